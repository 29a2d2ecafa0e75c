"""Cross-play: each team of a competitive env acts with the controller of its own checkpoint.

    evaluate=True team_checkpoints.good=<dir> team_checkpoints.adversary=<dir>

Each checkpoint's run may have used another algorithm: its controller is rebuilt from the config
saved with the checkpoint (networks, inputs, action form), on this run's env."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import torch

from utils.checkpoint import find_checkpoint, load_checkpoint
from utils.errors import ConfigError

# What a team's controller takes from this run rather than from its checkpoint's config: the env,
# the run's mechanics and the env-derived shapes.
RUN_KEYS = {
    "env",
    "env_args",
    "seed",
    "device",
    "runner",
    "batch_size_run",
    "env_workers",
    "test_nepisode",
    "t_max",
    "evaluate",
    "checkpoint_path",
    "load_step",
    "team_checkpoints",
    "local_results_path",
    "experiment",
    "sweep_key",
    "unique_token",
    "save_model",
    "save_replay",
    "use_tensorboard",
    "use_wandb",
    "torch_threads",
    "common_reward",
    "reward_scalarisation",
    "n_agents",
    "n_actions",
    "state_shape",
    "obs_shape",
    "episode_limit",
    "obs_entities",
    "action_entities",
    "action_space",
    "action_low",
    "action_high",
}


def saved_config(folder):
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    if "config" not in meta:
        raise ConfigError(
            f"checkpoint {folder!r} holds no config (saved by an older version); cross-play "
            "rebuilds each team's controller from it: save the run again"
        )
    # keys added to default.yaml after the run was saved take their defaults, which keep the
    # behaviour the run was trained with
    from config import load_defaults

    return {**load_defaults(), **meta["config"]}


class TeamMAC:
    """Acts for every agent with its team's controller; the runner sees one controller."""

    def __init__(self, macs: dict[str, tuple]):
        self.macs = macs  # {team: (controller, agent indices)}
        self.action_selector = None  # no exploration schedule to log

    def init_hidden(self, batch_size: int) -> None:
        for mac, _ in self.macs.values():
            mac.init_hidden(batch_size)

    def episode_data(self) -> dict:
        return {}

    def select_actions(self, ep_batch, t_ep, t_env, bs=slice(None), test_mode=False):
        out = None
        for mac, members in self.macs.values():
            actions = mac.select_actions(ep_batch, t_ep=t_ep, t_env=t_env, bs=bs, test_mode=test_mode)
            if out is None:
                out = actions.clone()
            out[:, members] = actions[:, members]
        return out

    def env_actions(self, actions, ep_batch, t, bs):
        out = None
        for mac, members in self.macs.values():
            env_actions = mac.env_actions(actions, ep_batch, t, bs)
            if out is None:
                out = env_actions.clone()
            out[:, members] = env_actions[:, members]
        return out


def build_team_mac(args, env_info, scheme, groups, logger):
    """One controller per team, loaded from team_checkpoints.<team>; every team of the env must
    be given, and only those."""
    from controllers import REGISTRY as mac_REGISTRY
    from learners import REGISTRY as le_REGISTRY

    teams = env_info.get("teams")
    given = dict(args.team_checkpoints)
    if not teams:
        task = args.env_args.get("scenario", args.env_args.get("key", ""))
        raise ConfigError(
            f"team_checkpoints: env {args.env} ({task}) has no teams; cross-play needs a "
            "competitive env (mpe simple_adversary_v3, simple_tag_v3, simple_push_v3, simple_world_comm_v3)"
        )
    unknown = sorted(set(given) - set(teams))
    missing = sorted(set(teams) - set(given))
    if unknown or missing:
        problem = (
            f"unknown team {', '.join(unknown)}" if unknown else f"no checkpoint for {', '.join(missing)}"
        )
        raise ConfigError(
            f"team_checkpoints: {problem}; this env's teams are {', '.join(sorted(teams))} "
            f"(team_checkpoints.<team>=<folder>)"
        )
    macs = {}
    for team in sorted(teams):
        folder = find_checkpoint(given[team], args.load_step)
        cfg = saved_config(folder)
        trained_on = (cfg.get("env"), cfg.get("env_args", {}).get("scenario"))
        here = (args.env, args.env_args.get("scenario"))
        if trained_on != here:
            raise ConfigError(
                f"team_checkpoints.{team}={given[team]!r} was trained on {trained_on[0]} "
                f"{trained_on[1]}, this run plays {here[0]} {here[1]}"
            )
        team_args = SimpleNamespace(**{**cfg, **{k: v for k, v in vars(args).items() if k in RUN_KEYS}})
        mac = mac_REGISTRY[team_args.mac](scheme, groups, team_args)
        # The learner owns what the checkpoint holds; loading it fills the controller's weights.
        learner = le_REGISTRY[team_args.learner](mac, scheme, logger, team_args)
        learner.to(args.device)
        meta = load_checkpoint(folder, learner, args.device)
        logger.console_logger.info(
            f"team {team} (agents {teams[team]}): {cfg.get('name')} from {folder} (t_env {meta['t_env']})"
        )
        macs[team] = (mac, torch.as_tensor(teams[team]))
    return TeamMAC(macs)
