"""Training speed of whole runs, by config, and where the time goes: acting (the runner with the
controller) against learner updates. Prints one JSON line per config.

    OMP_NUM_THREADS=1 python bench/agent_speed.py [--env-config skirmish] [--map 2s3z] [--steps 6000]
        [--configs differ_qmix,differ_qmix_transformer] [--device cpu|cuda] [key=value ...]

Each config runs in its own process, one after another, with torch_threads=1 and the same seed:
the first batch_size episodes fill the buffer, then every episode is followed by one update, as
in a run. env_steps_per_s counts the steps after the buffer filled. With --device cuda the agents
act and learn on the GPU and the buffer stays on the CPU, as in a run; each phase is timed after
the GPU has finished its queued work.
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(config, env_config, task, steps, overrides, device="cpu"):
    from types import SimpleNamespace

    import torch

    from assembly import build, resolve_device
    from config import load_config, seed_env
    from run import set_seeds
    from utils.logger import Logger, get_console_logger

    key = "map_name" if env_config in ("skirmish", "sc2", "gfootball", "gfootball_cds") else "scenario"
    argv = [f"--config={config}", f"--env-config={env_config}", "with", "seed=1", "torch_threads=1"]
    argv += [f"env_args.{key}={task}", f"t_max={steps}", *overrides]
    run_config = load_config(argv)
    seed_env(run_config)  # as main does: a seeded run seeds its env
    args = SimpleNamespace(**run_config)
    args.device, args.unique_token = resolve_device(device), "bench"

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    torch.set_num_threads(1)
    set_seeds(args.seed)
    parts = build(args, Logger(get_console_logger()))
    runner, buffer, learner = parts.runner, parts.buffer, parts.learner
    try:
        while not buffer.can_sample(args.batch_size):
            buffer.insert_episode_batch(runner.run(test_mode=False))
        start_t, acting, learning, updates = runner.t_env, 0.0, 0.0, 0
        while runner.t_env - start_t < steps:
            sync()
            t0 = time.perf_counter()
            buffer.insert_episode_batch(runner.run(test_mode=False))
            sync()
            t1 = time.perf_counter()
            sample = buffer.sample(args.batch_size)
            if sample.device != args.device:
                sample.to(args.device)
            learner.train(sample, runner.t_env, updates)
            sync()
            learning += time.perf_counter() - t1
            acting += t1 - t0
            updates += 1
        done = runner.t_env - start_t
    finally:
        runner.close_env()
    return {
        "config": config,
        "task": task,
        "agent": args.agent,
        "device": args.device,
        "env_steps": done,
        "env_steps_per_s": round(done / (acting + learning), 1),
        "acting_s": round(acting, 1),
        "learning_s": round(learning, 1),
        "updates": updates,
        "update_ms": round(1000 * learning / updates, 1),
        "agent_params": sum(p.numel() for p in learner.mac.parameters()),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-config", default="skirmish")
    p.add_argument("--map", default="2s3z", help="map (skirmish, sc2, gfootball) or scenario")
    p.add_argument("--steps", type=int, default=6000, help="env steps measured after the buffer filled")
    p.add_argument("--configs", default="differ_qmix,differ_qmix_transformer", help="comma-separated")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    p.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one config here
    p.add_argument("overrides", nargs="*")
    a = p.parse_args()
    if a.one:
        print(json.dumps(measure(a.one, a.env_config, a.map, a.steps, a.overrides, a.device)), flush=True)
        return
    rows = []
    for config in a.configs.split(","):
        cmd = [sys.executable, __file__, "--one", config, "--env-config", a.env_config, "--map", a.map]
        cmd += ["--steps", str(a.steps), "--device", a.device, *a.overrides]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]["env_steps_per_s"]
    for r in rows[1:]:
        print(f"{r['config']}: {base / r['env_steps_per_s']:.2f}x slower than {rows[0]['config']}")


if __name__ == "__main__":
    main()
