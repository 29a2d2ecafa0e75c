"""Env steps per second on a VMAS scenario: VMAS alone against our vector runner; one JSON line per
batch size.

    python bench/vmas_throughput.py [--scenario S] [--sizes 1,16,64,256] [--steps 3000]
        [--device cpu|cuda] [--paths device,step] [key=value ...]

key=value pairs go to the runner's config (e.g. agent=mlp env_args.continuous_actions=True
env_args.n_agents=3 env_args.shared_rew=False common_reward=False: BenchMARL's navigation task).

raw_steps_per_s: VMAS stepping B copies with random actions (one call per step for all B).
runner_steps_per_s: the vector runner collecting training episodes of B copies with MAPPO's
controller acting (sampling its policy), learner off: what a run pays for its data; per path:
device (the episodes stay on VMAS's device until they are over: the runner's default for VMAS)
or step (the step-by-step path of the other envs, through NumPy on the host every step).
"""

import argparse
import json
import time

import torch
from throughput import build


def raw_rate(scenario, b, steps, max_steps, device="cpu"):
    import vmas

    env = vmas.make_env(
        scenario, num_envs=b, device=device, continuous_actions=False, seed=0, max_steps=max_steps
    )
    env.reset()
    g = torch.Generator(device=device).manual_seed(0)
    n, start = 0, time.perf_counter()
    while n < steps:
        for _ in range(max_steps):
            env.step([torch.randint(0, s.n, (b,), generator=g, device=device) for s in env.action_space])
            n += b
        env.reset()
    sync(device)
    return n / (time.perf_counter() - start)


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def runner_rate(scenario, b, steps, max_steps, extra=(), device="cpu", path="device"):
    overrides = [
        f"env_args.scenario={scenario}",
        f"env_args.max_steps={max_steps}",
        "runner=vector",
        f"batch_size_run={b}",
        f"batch_size={b}",
        f"buffer_size={b}",
        *extra,
    ]
    args, runner, _, _ = build(overrides, config="mappo", env_config="vmas", device=device)
    runner.on_device = path == "device"
    try:
        runner.run()  # warm-up
        start_t, start = runner.t_env, time.perf_counter()
        while runner.t_env - start_t < steps:
            runner.run()
        return (runner.t_env - start_t) / (time.perf_counter() - start)
    finally:
        runner.close_env()


def sync_report(scenario, b, max_steps, extra, device):
    """Each call site that waited for the GPU during one runner.run() (torch's sync debug mode),
    with its count: where a step still goes back to the host."""
    import collections
    import linecache
    import warnings

    overrides = [f"env_args.scenario={scenario}", f"env_args.max_steps={max_steps}", "runner=vector"]
    overrides += [f"batch_size_run={b}", f"batch_size={b}", f"buffer_size={b}", *extra]
    _, runner, _, _ = build(overrides, config="mappo", env_config="vmas", device=device)
    runner.run()  # warm-up
    torch.cuda.set_sync_debug_mode("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner.run()
    torch.cuda.set_sync_debug_mode("default")
    sites = collections.Counter(
        f"{w.filename}:{w.lineno}: {linecache.getline(w.filename, w.lineno).strip()}"
        for w in caught
        if "synchroniz" in str(w.message)
    )
    print(json.dumps({"B": b, "steps_per_episode": max_steps, "waits": sum(sites.values())}))
    for site, n in sites.most_common():
        print(f"{n:6d}  {site}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="navigation")
    p.add_argument("--sizes", default="1,16,64,256")
    p.add_argument(
        "--steps", type=int, default=3000, help="env steps per measurement (at least one episode per copy)"
    )
    p.add_argument("--max-steps", type=int, default=100)
    p.add_argument("--device", default="cpu", help="cpu or cuda: VMAS, the controller and the batch")
    p.add_argument("--paths", default="device", help="runner paths to measure: device, step or both")
    p.add_argument(
        "--sync-report",
        action="store_true",
        help="cuda: list the calls that wait for the GPU during one collection of B=--sizes[0] copies",
    )
    p.add_argument("overrides", nargs="*", help="key=value for the runner's config")
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.sync_report:
        return sync_report(a.scenario, int(a.sizes.split(",")[0]), a.max_steps, a.overrides, a.device)
    for b in (int(x) for x in a.sizes.split(",")):
        steps = max(a.steps, b * a.max_steps)
        raw = raw_rate(a.scenario, b, steps, a.max_steps, a.device)
        out = {"scenario": a.scenario, "device": a.device, "B": b, "raw_steps_per_s": round(raw)}
        for path in a.paths.split(","):
            ours = runner_rate(a.scenario, b, steps, a.max_steps, a.overrides, a.device, path)
            out[f"runner_{path}_steps_per_s"] = round(ours)
            out[f"ratio_{path}"] = round(ours / raw, 3)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
