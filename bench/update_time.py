"""Time of one learner update on a SMAC-sized batch: QMIX (q_learner) against DIFFER
(q_divide_learner, PER_weight), per agent network; prints one JSON line per setting and the ratio.

    python bench/update_time.py [--agents 5] [--steps 120] [--batch 32] [--updates 30] [--agent rnn]
    python bench/update_time.py --compare-agents     # QMIX update: rnn vs mlp vs transformer
    python bench/update_time.py --compare-selection  # QMIX, PER, DIFFER, SUPER, DIFFER + sharing

The batch is synthetic with SMAC 2s3z-like sizes by default (5 agents, 80 observation features,
120 state features, 11 actions, 120-step episodes, some agents dying part-way), so no StarCraft II
is needed; both learners see the same batch.
"""

import argparse
import json
import os
import time

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import torch


def make_batch(b, t, n, obs, state, n_actions, seed=0):
    from components.episode_buffer import EpisodeBatch
    from components.transforms import OneHot

    g = torch.Generator().manual_seed(seed)
    scheme = {
        "state": {"vshape": state},
        "obs": {"vshape": obs, "group": "agents"},
        "avail_actions": {"vshape": (n_actions,), "group": "agents", "dtype": torch.uint8},
        "actions": {"vshape": (1,), "group": "agents", "dtype": torch.long},
        "reward": {"vshape": (1,)},
        "terminated": {"vshape": (1,), "dtype": torch.uint8},
        "indi_terminated": {"vshape": (n,), "dtype": torch.uint8},
    }
    batch = EpisodeBatch(
        scheme,
        {"agents": n},
        b,
        t + 1,
        preprocess={"actions": ("actions_onehot", [OneHot(out_dim=n_actions)])},
    )
    avail = (torch.rand(b, t + 1, n, n_actions, generator=g) > 0.4).to(torch.uint8)
    avail[..., 0] = 1
    actions = torch.multinomial(avail.view(-1, n_actions).float(), 1, generator=g).view(b, t + 1, n, 1)
    death = torch.randint(t // 3, 2 * t, (b, 1, n), generator=g)  # some agents die part-way
    indi = (torch.arange(t).view(1, t, 1) >= death).to(torch.uint8)
    term = torch.zeros(b, t, 1)
    term[:, -1] = 1
    batch.update(
        {
            "state": torch.randn(b, t + 1, state, generator=g),
            "obs": torch.randn(b, t + 1, n, obs, generator=g),
            "avail_actions": avail,
            "actions": actions,
        },
        ts=slice(0, t + 1),
    )
    batch.update(
        {"reward": torch.randn(b, t, 1, generator=g), "terminated": term, "indi_terminated": indi},
        ts=slice(0, t),
        mark_filled=False,
    )
    return batch


def time_updates(config, overrides, batch, a, updates):
    from types import SimpleNamespace

    from assembly import build
    from config import load_config
    from utils.logger import Logger, get_console_logger

    cfg = load_config([f"--config={config}", "--env-config=mpe", "with", "seed=0", *overrides])
    args = SimpleNamespace(**cfg)
    args.device, args.unique_token = "cpu", "bench"
    args.t_max = 2050000
    info = dict(
        n_agents=a.agents, n_actions=a.actions, state_shape=a.state, obs_shape=a.obs, episode_limit=a.steps
    )
    # a SMAC-like entity layout of the observation (move, enemies, allies, own) for entity agents
    n_enemies, others = a.actions - 6, a.agents - 1
    dim = (a.obs - 8) // (n_enemies + others)
    from envs.multiagentenv import smac_entities

    info.update(smac_entities(4, (n_enemies, dim), (others, dim), a.obs - 4 - dim * (n_enemies + others), 6))
    torch.manual_seed(0)
    parts = build(args, Logger(get_console_logger()), env_info=info, buffer=False)
    mac, learner = parts.mac, parts.learner
    n_params = sum(p.numel() for p in mac.parameters())
    for _ in range(3):
        learner.train(batch, 0, 0)
    start = time.perf_counter()
    for i in range(updates):
        learner.train(batch, 10000 * i, 0)
    return (time.perf_counter() - start) / updates * 1000, n_params


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, default=5)
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--obs", type=int, default=80)
    p.add_argument("--state", type=int, default=120)
    p.add_argument("--actions", type=int, default=11)
    p.add_argument("--updates", type=int, default=30)
    p.add_argument("--agent", default="rnn")
    p.add_argument(
        "--compare-agents",
        action="store_true",
        help="instead: QMIX update time and parameter count for rnn, mlp and transformer",
    )
    p.add_argument(
        "--compare-selection",
        action="store_true",
        help="instead: update time of qmix_pymarl, per_qmix, differ_qmix, super_qmix and inspire_qmix",
    )
    a = p.parse_args()
    batch = make_batch(a.batch, a.steps, a.agents, a.obs, a.state, a.actions)
    if a.compare_selection:
        settings = [
            ("qmix_pymarl", []),
            ("per_qmix", []),
            ("differ_qmix", []),
            ("super_qmix", []),
            ("inspire_qmix", []),
            ("inspire_qmix", ["share_rule=joint_density", "receive_rule=sigmoid_gate"]),
            ("inspire_qmix", ["share_control=mass"]),
        ]
        base = None
        for config, extra in settings:
            ms, _ = time_updates(config, [f"agent={a.agent}", *extra], batch, a, a.updates)
            base = base or ms
            line = {
                "config": " ".join([config, *extra]),
                "update_ms": round(ms, 1),
                "over_qmix": round(ms / base, 2),
            }
            print(json.dumps(line), flush=True)
        return
    if a.compare_agents:
        for agent in ("rnn", "mlp", "transformer", "hpn_rnn"):
            ms, n_params = time_updates(
                "qmix", [f"agent={agent}", "obs_last_action=True"], batch, a, a.updates
            )
            print(
                json.dumps(
                    {
                        "batch": f"{a.batch} episodes x {a.steps} steps x {a.agents} agents",
                        "agent": agent,
                        "agent_params": n_params,
                        "torch_threads": torch.get_num_threads(),
                        "qmix_update_ms": round(ms, 1),
                    }
                ),
                flush=True,
            )
        return
    common = [f"agent={a.agent}", "obs_last_action=True", "standardise_rewards=False"]
    qmix_ms, n_params = time_updates(
        "qmix", common + ["td_lambda=0", "optimizer=rmsprop"], batch, a, a.updates
    )
    differ_ms, _ = time_updates("differ_qmix", common, batch, a, a.updates)
    print(
        json.dumps(
            {
                "batch": f"{a.batch} episodes x {a.steps} steps x {a.agents} agents",
                "agent": a.agent,
                "agent_params": n_params,
                "torch_threads": torch.get_num_threads(),
                "qmix_update_ms": round(qmix_ms, 1),
                "differ_qmix_update_ms": round(differ_ms, 1),
                "differ_over_qmix": round(differ_ms / qmix_ms, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
