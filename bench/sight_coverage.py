"""How often every living teammate is in range, per map and radius: is sight-limited sharing
(share_to=sight or radius) a different thing from sharing with everyone there?

For each agent-step of scripted play (random valid actions, SMAC's heuristic, focus fire: the
policies of skirmish_calibration.py) at which the agent is alive with at least one living
teammate, it counts whether every living teammate is closer than the radius (all in range) and
whether none is (sharing's fallback case). The learner logs the same fraction over the steps it
shares, as share_all_in_range; near 1, restricting sharing to teammates in sight changes nothing.
Radius 9 is SMAC's sight range (the visibility matrix of share_to=sight); smaller ones are what
share_to=radius with share_radius would use.

    OMP_NUM_THREADS=1 python bench/sight_coverage.py [--maps 2s3z MMM2 ...] [--radii 9 6 4]
        [--policies random focus] [--episodes 50]

Prints one markdown table row per (map, policy).
"""

import argparse
import os

HERE = os.path.dirname(os.path.abspath(__file__))

import numpy as np  # noqa: E402
from skirmish_calibration import POLICIES, make_env, policy_actions, units  # noqa: E402

SIGHT = 9.0  # SMAC's unit_sight_range


def coverage_counts(positions, alive, radii):
    """positions [n, 2], alive [n] bool -> (agent-steps counted, [all in range per radius],
    [none in range per radius]) for this step."""
    idx = np.flatnonzero(alive)
    if len(idx) < 2:
        return 0, np.zeros(len(radii)), np.zeros(len(radii))
    p = positions[idx]
    d = np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(-1))
    off = ~np.eye(len(idx), dtype=bool)
    r = np.asarray(radii, dtype=float)[:, None, None]
    near = (d[None] < r) & off[None]  # [R, k, k]: teammate j within r of agent i
    all_in = (near.sum(-1) == len(idx) - 1).sum(-1)
    none_in = (near.sum(-1) == 0).sum(-1)
    return len(idx), all_in, none_in


def measure(kind, name, policy, episodes, radii, seed=1):
    env = make_env(kind, name, seed, policy == "heuristic")
    rng = np.random.default_rng(seed)
    counted, all_in, none_in, wins = 0, np.zeros(len(radii)), np.zeros(len(radii)), 0
    try:
        for _ in range(episodes):
            env.reset()
            done, info = False, {}
            while not done:
                agents, _ = units(env)
                pos = np.array([a[:2] for a in agents])
                alive = np.array([a[2] > 0 for a in agents])
                n, a_in, n_in = coverage_counts(pos, alive, radii)
                counted, all_in, none_in = counted + n, all_in + a_in, none_in + n_in
                _, done, info = env.step(policy_actions(env, policy, rng))
            wins += bool(info.get("battle_won", False))
    finally:
        env.close()
    c = max(counted, 1)
    return dict(agent_steps=counted, all_in=all_in / c, none_in=none_in / c, win=wins / episodes)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="skirmish", choices=["skirmish", "sc2", "skirmish_v2", "sc2v2"])
    p.add_argument("--maps", nargs="+", default=["2s3z", "3s5z", "MMM2", "10m_vs_11m", "8m", "27m_vs_30m"])
    p.add_argument("--policies", nargs="+", default=["random", "focus"], choices=POLICIES)
    p.add_argument("--radii", nargs="+", type=float, default=[SIGHT, 6.0, 4.0])
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    radii = [f"{r:g}" for r in a.radii]
    print("| map | policy | win | agent-steps | " + " | ".join(f"all within {r}" for r in radii)
          + " | " + " | ".join(f"none within {r}" for r in radii) + " |")  # fmt: skip
    print("|---" * (4 + 2 * len(radii)) + "|")
    for name in a.maps:
        for policy in a.policies:
            m = measure(a.env, name, policy, a.episodes, a.radii, a.seed)
            cells = [f"{x:.2f}" for x in m["all_in"]] + [f"{x:.2f}" for x in m["none_in"]]
            print(f"| {name} | {policy} | {m['win']:.2f} | {m['agent_steps']} | " + " | ".join(cells) + " |",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
