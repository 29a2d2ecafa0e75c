"""Our policy-gradient updates against EPyMARL's own learners: same weights, same episodes.

    python bench/epymarl_update.py /path/to/epymarl [--config ippo|mappo|ia2c|maa2c|coma]
        [--updates 5] [--seed 1] [--double]

Builds EPyMARL's BasicMAC (GRU agent) and learner (ppo_learner, actor_critic_learner or
coma_learner) with the settings of its <config>.yaml, copies their initial weights into our ac_mac
and learner (config/algs/<config>.yaml on simple_spread_v3, common reward), and feeds both the
same batches of 10 episodes played in our mpe env with uniformly random actions (the updates are
defined for any behaviour the old policy scores). After each update it prints the largest
absolute difference of the actor and critic weights and of the target critic. Agreement to
float precision means the two updates are the same function of (weights, batch, optimiser
state); anything larger names where they part.

EPyMARL and this project both use top-level packages called components, modules, learners and
controllers, so EPyMARL's are imported first, its learner is built, and its modules are then
dropped from sys.modules before ours are imported.
"""

import argparse
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("components", "modules", "learners", "controllers", "utils", "runners", "envs")


def _drop_packages():
    for name in list(sys.modules):
        if name.split(".")[0] in PACKAGES:
            del sys.modules[name]


def epymarl_learner(path, config, env_info, seed):
    src = os.path.join(path, "src")
    with open(os.path.join(src, "config", "default.yaml")) as f:
        cfg = yaml.safe_load(f)
    with open(os.path.join(src, "config", "algs", f"{config}.yaml")) as f:
        cfg.update(yaml.safe_load(f))
    cfg.update(
        n_agents=env_info["n_agents"],
        n_actions=env_info["n_actions"],
        state_shape=env_info["state_shape"],
        obs_shape=env_info["obs_shape"],
        use_cuda=False,
        device="cpu",
        common_reward=True,
    )
    args = SimpleNamespace(**cfg)
    _drop_packages()
    sys.path.insert(0, src)
    try:
        from components.episode_buffer import EpisodeBatch
        from components.transforms import OneHot
        from controllers import REGISTRY as mac_registry
        from learners import REGISTRY as learner_registry

        scheme, groups, preprocess = _scheme(env_info, OneHot)
        probe = EpisodeBatch(scheme, groups, 1, env_info["episode_limit"] + 1, preprocess=preprocess)
        torch.manual_seed(seed)
        mac = mac_registry[args.mac](probe.scheme, groups, args)
        learner = learner_registry[args.learner](mac, probe.scheme, _NullLogger(), args)
    finally:
        sys.path.remove(src)
        _drop_packages()
    return learner, lambda n: EpisodeBatch(
        scheme, groups, n, env_info["episode_limit"] + 1, preprocess=preprocess
    )


def _scheme(env_info, one_hot):
    n = env_info["n_agents"]
    scheme = {
        "state": {"vshape": env_info["state_shape"], "dtype": torch.get_default_dtype()},
        "obs": {"vshape": env_info["obs_shape"], "group": "agents", "dtype": torch.get_default_dtype()},
        "actions": {"vshape": (1,), "group": "agents", "dtype": torch.long},
        "avail_actions": {"vshape": (env_info["n_actions"],), "group": "agents", "dtype": torch.int},
        "reward": {"vshape": (1,), "dtype": torch.get_default_dtype()},
        "terminated": {"vshape": (1,), "dtype": torch.uint8},
        "indi_terminated": {"vshape": (n,), "dtype": torch.uint8},  # ours only; EPyMARL ignores it
    }
    return scheme, {"agents": n}, {"actions": ("actions_onehot", [one_hot(out_dim=env_info["n_actions"])])}


class _NullLogger:
    def log_stat(self, *a, **k):
        pass


def play(env, n_episodes, rng):
    """n episodes with uniformly random actions -> list of dicts of numpy arrays."""
    episodes = []
    for _ in range(n_episodes):
        env.reset()
        ep = {k: [] for k in ("state", "obs", "avail_actions", "actions", "reward", "terminated")}
        done = False
        while not done:
            avail = np.asarray(env.get_avail_actions())
            ep["state"].append(env.get_state())
            ep["obs"].append(np.asarray(env.get_obs()))
            ep["avail_actions"].append(avail)
            actions = np.array([rng.choice(np.flatnonzero(a)) for a in avail])
            reward, done, info = env.step(actions)
            ep["actions"].append(actions[:, None])
            ep["reward"].append([reward])
            ep["terminated"].append([done and not info.get("episode_limit", False)])
        ep["state"].append(env.get_state())  # the final observation, as the runners store it
        ep["obs"].append(np.asarray(env.get_obs()))
        ep["avail_actions"].append(np.asarray(env.get_avail_actions()))
        # the runners act at the final step too (COMA's target bootstraps from Q of that action)
        ep["actions"].append(
            np.array([rng.choice(np.flatnonzero(a)) for a in ep["avail_actions"][-1]])[:, None]
        )
        episodes.append({k: np.asarray(v) for k, v in ep.items()})
    return episodes


def fill(batch, episodes):
    for b, ep in enumerate(episodes):
        T = len(ep["reward"])
        batch.update(
            {k: torch.as_tensor(ep[k]) for k in ("state", "obs", "avail_actions", "actions")},
            bs=b,
            ts=slice(0, T + 1),
        )
        batch.update(
            {
                "reward": torch.as_tensor(ep["reward"], dtype=torch.get_default_dtype()),
                "terminated": torch.as_tensor(ep["terminated"], dtype=torch.uint8),
            },
            bs=b,
            ts=slice(0, T),
            mark_filled=False,
        )
    return batch


def copy_weights(theirs, ours):
    """EPyMARL's agent (GRUCell) and nn.Linear critics into our GRU agent and batched critics."""
    agent = theirs.mac.agent.state_dict()
    mine = ours.mac.agent.state_dict()
    for k in mine:
        mine[k].copy_(agent[k.replace("_l0", "")])
    for src, dst in ((theirs.critic, ours.critic), (theirs.target_critic, ours.target_critic)):
        layers = [src.fc1, src.fc2, src.fc3]
        with torch.no_grad():
            for i, layer in enumerate(layers):
                dst.weights[i][0].copy_(layer.weight.t())
                dst.biases[i][0, 0].copy_(layer.bias)


def differences(theirs, ours):
    agent = theirs.mac.agent.state_dict()
    d_agent = max(
        (v - agent[k.replace("_l0", "")]).abs().max().item() for k, v in ours.mac.agent.state_dict().items()
    )

    def critic(src, dst):
        layers = [src.fc1, src.fc2, src.fc3]
        return max(
            max(
                (dst.weights[i][0] - layer.weight.t()).abs().max().item(),
                (dst.biases[i][0, 0] - layer.bias).abs().max().item(),
            )
            for i, layer in enumerate(layers)
        )

    return d_agent, critic(theirs.critic, ours.critic), critic(theirs.target_critic, ours.target_critic)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("epymarl", help="an EPyMARL checkout (its src/ folder is imported)")
    p.add_argument("--config", default="ippo", choices=["ippo", "mappo", "ia2c", "maa2c", "coma"])
    p.add_argument("--updates", type=int, default=5)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--double",
        action="store_true",
        help="float64 weights and data: rounding no longer hides in Adam's first steps",
    )
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.double:
        torch.set_default_dtype(torch.float64)

    sys.path.insert(0, os.path.join(ROOT, "src"))
    from config import load_config  # ours; imports none of the clashing packages

    cfg = load_config([f"--config={a.config}", "--env-config=mpe", "with", f"seed={a.seed}"])
    sys.path.remove(os.path.join(ROOT, "src"))
    _drop_packages()

    # the env first (ours), for its shapes; then EPyMARL's learner; then ours
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from envs import REGISTRY as env_registry

    env = env_registry[cfg["env"]](**{**cfg["env_args"], "seed": a.seed})
    env_info = env.get_env_info()
    sys.path.remove(os.path.join(ROOT, "src"))
    _drop_packages()

    theirs, their_batch = epymarl_learner(a.epymarl, a.config, env_info, a.seed)

    sys.path.insert(0, os.path.join(ROOT, "src"))
    from components.episode_buffer import EpisodeBatch
    from components.transforms import OneHot
    from controllers import REGISTRY as mac_registry
    from learners import REGISTRY as learner_registry
    from utils.logger import Logger, get_console_logger

    cfg.update(
        n_agents=env_info["n_agents"],
        n_actions=env_info["n_actions"],
        state_shape=env_info["state_shape"],
        obs_shape=env_info["obs_shape"],
        episode_limit=env_info["episode_limit"],
        device="cpu",
        unique_token="bench",
        learner_log_interval=10**12,
    )
    args = SimpleNamespace(**cfg)
    scheme, groups, preprocess = _scheme(env_info, OneHot)
    ours_batch = lambda n: EpisodeBatch(  # noqa: E731
        scheme, groups, n, env_info["episode_limit"] + 1, preprocess=preprocess
    )
    probe = ours_batch(1)
    mac = mac_registry[args.mac](probe.scheme, groups, args)
    ours = learner_registry[args.learner](mac, probe.scheme, Logger(get_console_logger()), args)
    copy_weights(theirs, ours)
    print(
        f"{a.config}, start: largest |ours - EPyMARL| agent, critic, target critic "
        f"{differences(theirs, ours)}"
    )

    rng = np.random.default_rng(a.seed)
    for u in range(1, a.updates + 1):
        episodes = play(env, a.episodes, rng)
        before = [q.detach().clone() for q in ours.mac.agent.parameters()]
        theirs.train(fill(their_batch(a.episodes), episodes), u * 250, u)
        ours.train(fill(ours_batch(a.episodes), episodes), u * 250, u)
        d = differences(theirs, ours)
        moved = max(
            (q - b).abs().max().item() for q, b in zip(ours.mac.agent.parameters(), before, strict=True)
        )
        print(
            f"update {u}: largest |ours - EPyMARL| agent {d[0]:.2e}, critic {d[1]:.2e}, "
            f"target critic {d[2]:.2e} (this update moved our agent weights by up to {moved:.2e})"
        )
    env.close()


if __name__ == "__main__":
    main()
