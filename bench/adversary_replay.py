"""Replay a saved MADDPG (separate mlp actors, the maddpg.yaml defaults; discrete, or tanh
actors with --continuous) on mpe2's simple_adversary_v3 and report where the agents end up: who
reaches the target landmark, who covers the other one, and whether the adversary follows.

    python bench/learn_mpe.py --config maddpg env_args.scenario=simple_adversary_v3 save_model=True
    python bench/adversary_replay.py <results>/models/<run token>/<t_env> [--episodes 200] [--sample]
    python bench/adversary_replay.py <checkpoint> --continuous   # env_args.continuous_actions=True runs
    python bench/adversary_replay.py <checkpoint> --ensemble 3   # policy_ensemble=3 runs

Distances are Euclidean, averaged over episodes (seeds 0 .. episodes-1); greedy (noise-free) actions
unless --sample. With --ensemble K every agent plays one of its K sub-policies, drawn per
episode. "Split" episodes end with one good agent within 0.3 of each landmark, the cover that
leaves the adversary guessing.
"""

import argparse
import os
from types import SimpleNamespace

import numpy as np
import torch

from modules.agents.agent_group import AgentGroup
from modules.agents.mlp_agent import MLPAgent


def load_actors(folder):
    state = torch.load(os.path.join(folder, "learner.th"), map_location="cpu", weights_only=True)
    agent = state["agent"]
    n_agents = 1 + max(int(k.split(".")[1]) for k in agent)
    input_dim = agent["agents.0.fc1.weight"].shape[1]
    hidden, n_actions = agent["agents.0.fc3.weight"].shape[1], agent["agents.0.fc3.weight"].shape[0]
    args = SimpleNamespace(hidden_dim=hidden, n_actions=n_actions)
    actors = AgentGroup(lambda: MLPAgent(input_dim, args), n_agents)
    actors.load_state_dict(agent)
    return actors.eval(), input_dim


@torch.no_grad()
def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", help="a saved step folder holding learner.th")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--sample", action="store_true", help="sample actions instead of the argmax")
    p.add_argument("--ensemble", type=int, default=1, help="policy_ensemble of the run (K)")
    p.add_argument(
        "--continuous",
        action="store_true",
        help="tanh actors on the continuous env (continuous_actor=tanh, bounds [0, 1])",
    )
    a = p.parse_args()
    if a.sample and a.continuous:
        p.error("--sample applies to discrete actors only")

    from mpe2 import simple_adversary_v3

    actors, input_dim = load_actors(a.checkpoint)
    k = a.ensemble
    if actors.n_agents % k:
        p.error(f"--ensemble {k} does not divide the checkpoint's {actors.n_agents} actor networks")
    env = simple_adversary_v3.parallel_env(max_cycles=25, continuous_actions=a.continuous)
    names = env.possible_agents
    gen = torch.Generator().manual_seed(0)
    draws = torch.Generator().manual_seed(1)  # its own stream: --sample figures stay as they were
    returns = np.zeros(len(names))
    dists = []  # [episode, step, agent, (to target, to other landmark)]
    for ep in range(a.episodes):
        obs, _ = env.reset(seed=ep)
        # agent i plays network i * K + drawn[i] (the controller's layout)
        drawn = torch.randint(k, (len(names),), generator=draws)
        route = actors.route(torch.arange(len(names)) * k + drawn)
        world = env.unwrapped.world
        target = world.agents[0].goal_a
        other = next(lm for lm in world.landmarks if lm is not target)
        steps = []
        while env.agents:
            x = torch.zeros(len(names), 1, input_dim)
            for i, name in enumerate(names):  # observations zero-padded at the end, as in training
                x[i, 0, : len(obs[name])] = torch.as_tensor(obs[name])
            logits = actors(x, None, route)[0][:, 0]
            if a.continuous:  # the controller's tanh mapped onto mpe2's [0, 1] bounds
                acts = [((torch.tanh(row) + 1) / 2).numpy() for row in logits]
            elif a.sample:
                acts = torch.multinomial(logits.softmax(-1), 1, generator=gen)[:, 0].tolist()
            else:
                acts = logits.argmax(-1).tolist()
            obs, rewards, *_ = env.step(dict(zip(names, acts, strict=True)))
            returns += [rewards[n] for n in names]
            steps.append(
                [
                    [np.linalg.norm(ag.state.p_pos - lm.state.p_pos) for lm in (target, other)]
                    for ag in world.agents
                ]
            )
        dists.append(steps)
    d = np.array(dists)
    print("mean returns:", {n: round(float(r), 2) for n, r in zip(names, returns / a.episodes, strict=True)})
    good_min = d[:, :, 1:, 0].min(axis=2)
    print(
        f"{'step':>4s}  {'adv->target':>11s}  {'adv->other':>10s}  {'closest good->target':>20s}  "
        f"{'closest good->other':>19s}  " + "  ".join(f"{n + '->target':>16s}" for n in names[1:])
    )
    for t in range(0, d.shape[1], 4):
        print(
            f"{t:>4d}  {d[:, t, 0, 0].mean():11.2f}  {d[:, t, 0, 1].mean():10.2f}  "
            f"{good_min[:, t].mean():20.2f}  {d[:, t, 1:, 1].min(axis=1).mean():19.2f}  "
            + "  ".join(f"{d[:, t, i, 0].mean():16.2f}" for i in range(1, len(names)))
        )
    last = d[:, -1]
    q = [10, 50, 90]
    print(
        "last step, percentiles 10/50/90: adversary->target",
        np.percentile(last[:, 0, 0], q).round(2),
        "closest good->target",
        np.percentile(last[:, 1:, 0].min(1), q).round(2),
        "closest good->other",
        np.percentile(last[:, 1:, 1].min(1), q).round(2),
    )
    covered = last[:, 1:] < 0.3  # [episode, good agent, (target, other)]
    split = (covered[:, 0, 0] & covered[:, 1, 1]) | (covered[:, 0, 1] & covered[:, 1, 0])
    print(
        f"last step: split episodes {split.mean():.2f}; adversary nearer the target than the other "
        f"landmark in {(last[:, 0, 0] < last[:, 0, 1]).mean():.2f} of all, "
        f"{(last[split, 0, 0] < last[split, 0, 1]).mean() if split.any() else float('nan'):.2f} of split ones"
    )


if __name__ == "__main__":
    main()
