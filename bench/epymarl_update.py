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

        batches, groups = _batches(EpisodeBatch, OneHot, env_info)
        scheme = batches(1).scheme
        torch.manual_seed(seed)
        mac = mac_registry[args.mac](scheme, groups, args)
        learner = learner_registry[args.learner](mac, scheme, _NullLogger(), args)
    finally:
        sys.path.remove(src)
        _drop_packages()
    return learner, batches


def _batches(episode_batch, one_hot, env_info):
    """-> (n -> an empty batch of n episodes in the given package's EpisodeBatch, groups)."""
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
    preprocess = {"actions": ("actions_onehot", [one_hot(out_dim=env_info["n_actions"])])}
    groups = {"agents": n}
    length = env_info["episode_limit"] + 1
    return lambda size: episode_batch(scheme, groups, size, length, preprocess=preprocess), groups


class _NullLogger:
    def log_stat(self, *a, **k):
        pass


def play(env, n_episodes, rng):
    """n episodes with uniformly random actions -> list of dicts of numpy arrays."""

    def sample(avail):
        return np.array([rng.choice(np.flatnonzero(a)) for a in avail])

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
            actions = sample(avail)
            reward, done, info = env.step(actions)
            ep["actions"].append(actions[:, None])
            ep["reward"].append([reward])
            ep["terminated"].append([done and not info.get("episode_limit", False)])
        ep["state"].append(env.get_state())  # the final observation, as the runners store it
        ep["obs"].append(np.asarray(env.get_obs()))
        ep["avail_actions"].append(np.asarray(env.get_avail_actions()))
        # the runners act at the final step too (COMA's target bootstraps from Q of that action)
        ep["actions"].append(sample(ep["avail_actions"][-1])[:, None])
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


def _pairs(theirs, ours):
    """-> {agent, critic, target critic: [(our tensor, EPyMARL's in our layout)]}: EPyMARL's GRUCell
    agent against our GRU, its nn.Linear critics against our batched ones ([1, in, out])."""
    agent = theirs.mac.agent.state_dict()
    pairs = {"agent": [(v, agent[k.replace("_l0", "")]) for k, v in ours.mac.agent.state_dict().items()]}
    for name in ("critic", "target_critic"):
        src, dst = getattr(theirs, name), getattr(ours, name)
        pairs[name] = [
            pair
            for i, layer in enumerate((src.fc1, src.fc2, src.fc3))
            for pair in ((dst.weights[i][0], layer.weight.t()), (dst.biases[i][0, 0], layer.bias))
        ]
    return pairs


def copy_weights(theirs, ours):
    with torch.no_grad():
        for pairs in _pairs(theirs, ours).values():
            for mine, other in pairs:
                mine.copy_(other)


def differences(theirs, ours):
    """-> largest |ours - EPyMARL| of the agent, the critic and the target critic."""
    return tuple(
        max((mine - other).abs().max().item() for mine, other in pairs)
        for pairs in _pairs(theirs, ours).values()
    )


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

    # our config and env first, for the shapes; then EPyMARL's learner; then ours
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from config import load_config
    from envs import REGISTRY as env_registry

    cfg = load_config([f"--config={a.config}", "--env-config=mpe", "with", f"seed={a.seed}"])
    env = env_registry[cfg["env"]](**{**cfg["env_args"], "seed": a.seed})
    env_info = env.get_env_info()
    sys.path.remove(os.path.join(ROOT, "src"))
    _drop_packages()

    theirs, their_batch = epymarl_learner(a.epymarl, a.config, env_info, a.seed)

    sys.path.insert(0, os.path.join(ROOT, "src"))
    from assembly import build
    from components.episode_buffer import EpisodeBatch
    from components.transforms import OneHot
    from utils.logger import Logger, get_console_logger

    cfg.update(device="cpu", unique_token="bench", learner_log_interval=10**12)
    args = SimpleNamespace(**cfg)
    ours = build(args, Logger(get_console_logger()), env_info=env_info, buffer=False).learner
    ours_batch, _ = _batches(EpisodeBatch, OneHot, env_info)
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
