"""Train on an mpe2 scenario and print the test return curves (team and per agent), the
random policy's returns and the training speed.

    python bench/learn_mpe.py [--config qmix] [--t-max 200000] [--seed 1] [overrides, e.g. agent=rnn]
    python bench/learn_mpe.py --config maddpg env_args.scenario=simple_adversary_v3

Measures the raw env rate (random actions) before and after, times the whole training command in
between, start-up included, and reports steps/s and its ratio to the mean raw rate (the machine's
speed drifts), as one JSON line at the end.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from throughput import raw_env_rate  # noqa: E402


def random_returns(overrides, episodes=2000, seed=0):
    """Per-agent returns of uniformly random actions, summed over each 25-step episode, and their
    standard errors (a good agent's return on simple_adversary varies by about 15 between
    episodes, so a few hundred episodes leave the mean uncertain by more than 1)."""
    import importlib

    import numpy as np

    opts = dict(o.split("=", 1) for o in overrides if "=" in o)
    scenario = opts.get("env_args.scenario", "simple_spread_v3")
    continuous = opts.get("env_args.continuous_actions", "False") == "True"
    env = importlib.import_module(f"mpe2.{scenario}").parallel_env(
        max_cycles=25, continuous_actions=continuous
    )
    env.reset(seed=seed)
    for i, a in enumerate(env.possible_agents):  # one stream each: a shared seed moves all agents alike
        env.action_space(a).seed(seed + i)
    returns = np.zeros((episodes, len(env.possible_agents)))
    for ep in range(episodes):
        env.reset()
        while env.agents:
            _, rewards, _, _, _ = env.step({a: env.action_space(a).sample() for a in env.agents})
            returns[ep] += [rewards.get(a, 0.0) for a in env.possible_agents]
    mean, se = returns.mean(0).round(2).tolist(), (returns.std(0) / np.sqrt(episodes)).round(2).tolist()
    return dict(zip(env.possible_agents, mean, strict=True)), dict(zip(env.possible_agents, se, strict=True))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--t-max", type=int, default=200000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--config", default="qmix")
    p.add_argument("overrides", nargs="*", help="extra key=value overrides")
    a = p.parse_args()

    raw_before = raw_env_rate(20000)
    results = tempfile.mkdtemp(prefix="learn_mpe_")
    cmd = [
        sys.executable,
        os.path.join(ROOT, "src", "main.py"),
        f"--config={a.config}",
        "--env-config=mpe",
        "with",
        f"t_max={a.t_max}",
        f"seed={a.seed}",
        f"local_results_path={results}",
        *a.overrides,
    ]
    print("running:", " ".join(cmd), flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    raw_after = raw_env_rate(20000)
    raw = (raw_before + raw_after) / 2
    run_dir = glob.glob(os.path.join(results, "sacred", "*", "*", "*", "[0-9]*"))[0]
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)
    curve = metrics["test_return_mean"]
    agents = sorted(
        (k for k in metrics if k.startswith("test_agent") and k.endswith("_return_mean")),
        key=lambda k: int(k[len("test_agent") : -len("_return_mean")]),
    )
    print(f"{'t_env':>8s}  {'test_return_mean':>16s}" + "".join(f"  {k[5:11]:>8s}" for k in agents))
    for j, (t, v) in enumerate(zip(curve["steps"], curve["values"], strict=True)):
        print(f"{t:>8d}  {v:16.2f}" + "".join(f"  {metrics[k]['values'][j]:8.2f}" for k in agents))
    rand, rand_se = random_returns(a.overrides)
    print(
        "random policy, per agent:",
        rand,
        "team sum:",
        round(sum(rand.values()), 2),
        "standard errors:",
        rand_se,
    )
    t_env = metrics["return_mean"]["steps"][-1]
    print(
        json.dumps(
            {
                "config": a.config,
                "overrides": a.overrides,
                "t_max": a.t_max,
                "seed": a.seed,
                "raw_env_steps_per_s": round(raw, 1),
                "raw_before": round(raw_before, 1),
                "raw_after": round(raw_after, 1),
                "wall_s": round(wall, 1),
                "train_steps_per_s": round(t_env / wall, 1),
                "ratio_to_raw": round(t_env / wall / raw, 3),
                "final_test_return_mean": round(curve["values"][-1], 2),
                "best_test_return_mean": round(max(curve["values"]), 2),
                "final_test_agent_returns": [round(metrics[k]["values"][-1], 2) for k in agents],
                "random_agent_returns": list(rand.values()),
                "random_agent_se": list(rand_se.values()),
                "sacred_run": run_dir,
            }
        )
    )


if __name__ == "__main__":
    main()
