"""Win rates of scripted play on every skirmish map, with 95% Wilson intervals: uniformly random
valid actions, SMAC's own heuristic (heuristic_ai=True: each agent attacks the nearest enemy until
it dies) and a focus-fire script (every agent shoots the weakest enemy in range, else steps toward
the nearest). Prints one markdown table row per map.

    OMP_NUM_THREADS=1 python bench/skirmish_calibration.py [--maps 3m 8m ...] [--episodes 100]
"""

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import numpy as np  # noqa: E402

from envs.skirmish.env import SkirmishEnv  # noqa: E402
from envs.skirmish.maps import MAPS  # noqa: E402
from test_skirmish import focus_fire  # noqa: E402


def wilson(wins, n, z=1.96):
    p = wins / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def play(name, policy, episodes, seed=1):
    env = SkirmishEnv(map_name=name, seed=seed, heuristic_ai=policy == "heuristic")
    rng = np.random.default_rng(seed)
    wins = 0
    for _ in range(episodes):
        env.reset()
        done = False
        while not done:
            if policy == "random":
                avail = np.asarray(env.get_avail_actions())
                actions = (rng.random(avail.shape) * avail).argmax(axis=1)
            elif policy == "focus":
                actions = focus_fire(env)
            else:
                actions = [0] * env.n_agents
            _, done, info = env.step(actions)
        wins += info["battle_won"]
    return wins


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--maps", nargs="+", default=list(MAPS))
    p.add_argument("--episodes", type=int, default=100)
    a = p.parse_args()
    print("| map | random | heuristic_ai | focus fire |")
    print("|---|---|---|---|")
    for name in a.maps:
        cells = []
        for policy in ("random", "heuristic", "focus"):
            w = play(name, policy, a.episodes)
            lo, hi = wilson(w, a.episodes)
            cells.append(f"{w / a.episodes:.2f} [{lo:.2f}, {hi:.2f}]")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
