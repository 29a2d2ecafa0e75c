"""Throughput of the pieces of a QMIX run on mpe simple_spread_v3; prints one JSON line.

    python bench/throughput.py [--agent rnn|mlp] [--episodes 200] [--envs 4]

raw_env_steps_per_s: the mpe2 parallel env alone with random actions.
episode_runner_steps_per_s / parallel_runner_steps_per_s: training-mode collection with QMIX
acting (epsilon-greedy), learner off. learner_updates_per_s: QMIX updates on 32-episode batches.
"""

import argparse
import json
import os
import time

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import numpy as np
import torch


def raw_env_rate(steps, seed=0):
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(max_cycles=25)
    env.reset(seed=seed)
    for a in env.possible_agents:
        env.action_space(a).seed(seed)
    n = 0
    start = time.perf_counter()
    while n < steps:
        env.reset()
        while env.agents:
            env.step({a: env.action_space(a).sample() for a in env.agents})
            n += 1
    return n / (time.perf_counter() - start)


def build(overrides, config="qmix", env_config="mpe", device="cpu"):
    from types import SimpleNamespace

    from assembly import build as assemble
    from config import load_config
    from utils.logger import Logger, get_console_logger

    cfg = load_config([f"--config={config}", f"--env-config={env_config}", "with", "seed=0", *overrides])
    cfg["env_args"]["seed"] = 0
    args = SimpleNamespace(**cfg)
    args.device, args.unique_token = device, "bench"
    if "device" in args.env_args:  # envs that simulate on a device (VMAS) go with the networks
        args.env_args["device"] = device
    parts = assemble(args, Logger(get_console_logger()))
    return args, parts.runner, parts.buffer, parts.learner


def runner_rate(overrides, episodes):
    args, runner, buffer, _ = build(overrides)
    try:
        runner.run()  # warm-up (worker start, first allocation)
        start_t, start = runner.t_env, time.perf_counter()
        while runner.t_env - start_t < episodes * 25:
            buffer.insert_episode_batch(runner.run())
        return (runner.t_env - start_t) / (time.perf_counter() - start)
    finally:
        runner.close_env()


def learner_rate(agent, updates):
    args, runner, buffer, learner = build([f"agent={agent}"])
    try:
        while not buffer.can_sample(args.batch_size):
            buffer.insert_episode_batch(runner.run())
        for _ in range(3):
            learner.train(buffer.sample(args.batch_size), 0, 0)
        start = time.perf_counter()
        for _ in range(updates):
            learner.train(buffer.sample(args.batch_size), 0, 0)
        return updates / (time.perf_counter() - start)
    finally:
        runner.close_env()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agent", default="rnn", choices=["rnn", "mlp"])
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--updates", type=int, default=100)
    a = p.parse_args()
    np.random.seed(0)
    torch.manual_seed(0)
    raw = raw_env_rate(a.episodes * 25)
    ep = runner_rate([f"agent={a.agent}"], a.episodes)
    par = runner_rate([f"agent={a.agent}", "runner=parallel", f"batch_size_run={a.envs}"], a.episodes)
    out = {
        "agent": a.agent,
        "torch_threads": torch.get_num_threads(),
        "raw_env_steps_per_s": round(raw, 1),
        "episode_runner_steps_per_s": round(ep, 1),
        "episode_runner_ratio_to_raw": round(ep / raw, 3),
        f"parallel_runner_{a.envs}envs_steps_per_s": round(par, 1),
        "learner_updates_per_s_rnn": round(learner_rate("rnn", a.updates), 1),
        "learner_updates_per_s_mlp": round(learner_rate("mlp", a.updates), 1),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
