"""Env steps per second on a VMAS scenario: VMAS alone against our vector runner; one JSON line per
batch size.

    python bench/vmas_throughput.py [--scenario S] [--sizes 1,16,64,256] [--steps 3000] [key=value ...]

key=value pairs go to the runner's config (e.g. agent=mlp env_args.continuous_actions=True
env_args.n_agents=3 env_args.shared_rew=False common_reward=False: BenchMARL's navigation task).

raw_steps_per_s: VMAS stepping B copies with random actions (one call per step for all B).
runner_steps_per_s: the vector runner collecting training episodes of B copies with MAPPO's
controller acting (sampling its policy), learner off: what a run pays for its data.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

import torch  # noqa: E402
from throughput import build  # noqa: E402


def raw_rate(scenario, b, steps, max_steps):
    import vmas

    env = vmas.make_env(
        scenario, num_envs=b, device="cpu", continuous_actions=False, seed=0, max_steps=max_steps
    )
    env.reset()
    g = torch.Generator().manual_seed(0)
    n, start = 0, time.perf_counter()
    while n < steps:
        for _ in range(max_steps):
            env.step([torch.randint(0, s.n, (b,), generator=g) for s in env.action_space])
            n += b
        env.reset()
    return n / (time.perf_counter() - start)


def runner_rate(scenario, b, steps, max_steps, extra=()):
    overrides = [
        f"env_args.scenario={scenario}",
        f"env_args.max_steps={max_steps}",
        "runner=vector",
        f"batch_size_run={b}",
        f"batch_size={b}",
        f"buffer_size={b}",
        *extra,
    ]
    args, runner, _, _ = build(overrides, config="mappo", env_config="vmas")
    try:
        runner.run()  # warm-up
        start_t, start = runner.t_env, time.perf_counter()
        while runner.t_env - start_t < steps:
            runner.run()
        return (runner.t_env - start_t) / (time.perf_counter() - start)
    finally:
        runner.close_env()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="navigation")
    p.add_argument("--sizes", default="1,16,64,256")
    p.add_argument(
        "--steps", type=int, default=3000, help="env steps per measurement (at least one episode per copy)"
    )
    p.add_argument("--max-steps", type=int, default=100)
    p.add_argument("overrides", nargs="*", help="key=value for the runner's config")
    a = p.parse_args()
    torch.set_num_threads(1)
    for b in (int(x) for x in a.sizes.split(",")):
        steps = max(a.steps, b * a.max_steps)
        raw = raw_rate(a.scenario, b, steps, a.max_steps)
        ours = runner_rate(a.scenario, b, steps, a.max_steps, a.overrides)
        out = {
            "scenario": a.scenario,
            "B": b,
            "raw_steps_per_s": round(raw),
            "runner_steps_per_s": round(ours),
            "ratio": round(ours / raw, 3),
        }
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
