"""Env steps per second of the skirmish simulator with uniformly random valid actions, and the
win rates of random play and of a scripted focus-fire policy; one JSON line per map.

    OMP_NUM_THREADS=1 python bench/skirmish_speed.py [--maps 3m 2s3z 25m 27m_vs_30m] [--seconds 5]
    OMP_NUM_THREADS=1 python bench/skirmish_speed.py --maps protoss_5_vs_5 zerg_20_vs_23   # skirmish_v2

A SMACv2 scenario name measures skirmish_v2 with SMACv2's standard settings (one fresh battle per
episode, resets included in the time).
"""

import argparse
import json
import os
import time

import numpy as np

from envs.skirmish.env import SkirmishEnv

HERE = os.path.dirname(os.path.abspath(__file__))


def _test_module(name):
    """tests/<name>.py (tests/ is no package): its scripted policies."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(HERE), "tests", f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_policy(env, rng):
    avail = np.asarray(env.get_avail_actions())
    return (rng.random(avail.shape) * avail).argmax(axis=1)  # uniform among the available


def make(name, seed):
    from envs.skirmish.distributions import SCENARIOS

    if name in SCENARIOS:
        from envs.skirmish.v2 import SkirmishV2Env

        return SkirmishV2Env(scenario=name, seed=seed, use_unit_ranges=True, obs_own_pos=True)
    return SkirmishEnv(map_name=name, seed=seed)


def speed(name, seconds):
    env = make(name, 0)
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, done, _ = env.step(random_policy(env, rng))
        env.get_obs()
        env.get_state()
        steps += 1
        if done:
            env.reset()
    return steps / (time.perf_counter() - start)


def win_rate(name, policy, episodes):
    focus_fire = _test_module("test_skirmish").focus_fire

    env = make(name, 1)
    rng = np.random.default_rng(0)
    wins = 0
    for _ in range(episodes):
        env.reset()
        done = False
        while not done:
            acts = focus_fire(env) if policy == "focus" else random_policy(env, rng)
            _, done, info = env.step(acts)
        wins += info["battle_won"]
    return wins / episodes


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--maps",
        nargs="+",
        default=["3m", "8m", "2s3z", "MMM", "25m", "27m_vs_30m", "2c_vs_64zg", "corridor"],
    )
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--episodes", type=int, default=50)
    a = p.parse_args()
    for name in a.maps:
        print(
            json.dumps(
                {
                    "map": name,
                    "env_steps_per_s": round(speed(name, a.seconds), 1),
                    "random_win_rate": win_rate(name, "random", a.episodes),
                    "focus_fire_win_rate": win_rate(name, "focus", a.episodes),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
