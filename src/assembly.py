"""The one way to assemble a run: env info -> scheme -> buffer -> controller -> learner.

run.py, cross-play, the bench scripts and the tests all call `build`; a team's controller in
cross-play is rebuilt here from the config saved with its checkpoint."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch

from components.episode_buffer import POST_FIELDS, PRE_FIELDS, EpisodeBatch, ReplayBuffer
from components.prioritised_buffer import PrioritisedReplayBuffer
from components.schedules import horizon, linear
from components.transforms import OneHot
from config import load_defaults, section_keys
from controllers import REGISTRY as mac_REGISTRY
from controllers.team_controller import TeamMAC
from envs import step_fields_message
from learners import REGISTRY as le_REGISTRY
from runners import REGISTRY as r_REGISTRY
from utils.checkpoint import find_checkpoint, load_checkpoint
from utils.errors import ConfigError
from utils.keys import DERIVED_KEYS, ENV_INFO_KEYS
from utils.logger import get_console_logger

# default.yaml's sections that describe the run rather than the algorithm
RUN_SECTIONS = ("run", "rewards", "outputs, checkpoints")


def resolve_device(name):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA device is available; valid choices here: cpu, auto")
    return name


def build_scheme(args, env_info):
    n_agents = env_info["n_agents"]
    continuous = env_info.get("action_space", "discrete") == "continuous"
    scheme = {
        "state": {"vshape": env_info["state_shape"]},
        "obs": {"vshape": env_info["obs_shape"], "group": "agents"},
        "avail_actions": {"vshape": (env_info["n_actions"],), "group": "agents", "dtype": torch.uint8},
        "reward": {"vshape": (1,) if args.common_reward else (n_agents,)},
        "terminated": {"vshape": (1,), "dtype": torch.uint8},
        "indi_terminated": {"vshape": (n_agents,), "dtype": torch.uint8},
    }
    declared = env_info.get("step_fields", {})
    for name in getattr(args, "step_fields", ()):  # the env's extra per-step fields, per agent
        spec = declared[name]
        scheme[name] = {
            "vshape": tuple(spec["vshape"]),
            "group": "agents",
            "dtype": getattr(torch, spec["dtype"]),
        }
    assert set(scheme) == {*PRE_FIELDS, *POST_FIELDS, *getattr(args, "step_fields", ())}
    for info in scheme.values():
        info["from_env"] = True
    if continuous:
        scheme["actions"] = {"vshape": (env_info["n_actions"],), "group": "agents", "dtype": torch.float32}
        preprocess = {}
    else:
        scheme["actions"] = {"vshape": (1,), "group": "agents", "dtype": torch.long}
        preprocess = {"actions": ("actions_onehot", [OneHot(out_dim=env_info["n_actions"])])}
    if getattr(args, "policy_ensemble", 1) > 1:  # which sub-policy each agent played the episode with
        scheme["policy_index"] = {
            "vshape": (1,),
            "group": "agents",
            "dtype": torch.long,
            "episode_const": True,
        }
    return scheme, {"agents": n_agents}, preprocess


def apply_env_info(args, env_info):
    """The env's sizes, action space and bounds into args, where the controller and learner look."""
    for k in ENV_INFO_KEYS:
        setattr(args, k, env_info[k])
    # Entity layout of observations and entity-targeted actions, for entity-aware agents.
    args.obs_entities = env_info.get("obs_entities")
    args.action_entities = env_info.get("action_entities")
    args.action_space = env_info.get("action_space", "discrete")
    # SMAC-like envs: the state opens with one block of these features per agent (Qatten's keys)
    features = env_info.get("agent_features")
    args.state_agent_features = len(features) if features else None
    if args.action_space == "continuous":
        args.action_low, args.action_high = env_info["action_low"], env_info["action_high"]


def env_info_summary(info):
    return (
        f"(n_agents {info['n_agents']}, n_actions {info['n_actions']}, obs {info['obs_shape']}, "
        f"state {info['state_shape']}, episode_limit {info['episode_limit']})"
    )


@dataclass
class Assembly:
    """What a run is made of. runner is None when built without one; buffer is None for
    on-policy learners (or when not asked for); learner is None in cross-play."""

    runner: object
    env_info: dict
    scheme: dict  # as the runner writes it
    groups: dict
    preprocess: dict
    full_scheme: dict  # with the preprocessed fields (actions_onehot), as the controller reads it
    buffer: ReplayBuffer | None
    mac: object
    learner: object


def build(args, logger, *, env_info=None, buffer=True):
    """Assemble a run from `args` (the merged config as a namespace; the env's sizes are written
    into it). Without env_info a runner is made and asked for it; with it, no runner is made.
    buffer=False: no replay buffer even for an off-policy learner. With args.team_checkpoints
    the controller is one per team, each rebuilt from its checkpoint, and there is no learner.
    The order of construction is fixed: it decides the random draws of a seeded run."""
    args.step_fields = recorded_fields(args)
    runner = None
    if env_info is None:
        runner = r_REGISTRY[args.runner](args=args, logger=logger)
    try:
        return _assemble(args, logger, runner, env_info, buffer)
    except BaseException:
        if runner is not None:
            runner.close_env()
        raise


def _assemble(args, logger, runner, env_info, buffer):
    if runner is not None:
        env_info = runner.get_env_info()
    apply_env_info(args, env_info)
    check_step_fields(args, env_info)
    learner_cls = le_REGISTRY[args.learner]
    if args.action_space not in learner_cls.action_spaces:
        raise ConfigError(
            f"learner={args.learner} learns {' and '.join(learner_cls.action_spaces)} "
            f"actions, but this env's are {args.action_space}"
        )
    scheme, groups, preprocess = build_scheme(args, env_info)
    parts = dict(runner=runner, env_info=env_info, scheme=scheme, groups=groups, preprocess=preprocess)
    if getattr(args, "team_checkpoints", None):  # cross-play: each team acts with its own controller
        full_scheme = EpisodeBatch(scheme, groups, 1, 1, preprocess=preprocess).scheme
        if runner is not None:
            runner.setup(scheme=scheme, groups=groups, preprocess=preprocess, mac=None)
        mac = build_team_mac(args, env_info, full_scheme, groups, logger)
        if runner is not None:
            runner.mac = mac
        return Assembly(**parts, full_scheme=full_scheme, buffer=None, mac=mac, learner=None)
    replay = None
    if learner_cls.on_policy or not buffer:  # on-policy: trains on the episodes just played
        full_scheme = EpisodeBatch(scheme, groups, 1, 1, preprocess=preprocess).scheme
    else:
        check_buffer_memory(args, scheme, groups, env_info["episode_limit"] + 1)
        kind, extra = ReplayBuffer, {}
        if getattr(args, "use_per", False):
            kind = PrioritisedReplayBuffer
            steps = horizon(args)
            extra = dict(
                alpha=args.per_alpha,
                epsilon=args.per_epsilon,
                beta=lambda t: linear(args.per_beta_start, args.per_beta_end, t, steps),
            )
        replay = kind(
            scheme,
            groups,
            args.buffer_size,
            env_info["episode_limit"] + 1,
            preprocess=preprocess,
            device="cpu" if args.buffer_cpu_only else args.device,
            **extra,
        )
        full_scheme = replay.scheme
        logger.console_logger.info(
            f"replay buffer: {args.buffer_size} episodes, only the steps played are kept: "
            f"{replay.row_bytes() / 2**10:.1f} KiB a step, at most {replay.full_nbytes() / 2**30:.2f} GiB "
            f"if every episode ran to the limit"
        )
    mac = mac_REGISTRY[args.mac](full_scheme, groups, args)
    if runner is not None:
        runner.setup(scheme=scheme, groups=groups, preprocess=preprocess, mac=mac)
    learner = learner_cls(mac, full_scheme, logger, args)
    learner.to(args.device)
    return Assembly(**parts, full_scheme=full_scheme, buffer=replay, mac=mac, learner=learner)


def recorded_fields(args):
    """The env's extra step fields this run records: what its learner needs and what
    record_fields asks for, in STEP_FIELDS' order."""
    from envs.multiagentenv import STEP_FIELDS

    wanted = set(getattr(args, "record_fields", ())) | le_REGISTRY[args.learner].batch_fields(vars(args))
    return tuple(name for name in STEP_FIELDS if name in wanted)


def check_step_fields(args, env_info):
    """Refuse, in one line, a run that needs step fields its env does not record."""
    have = env_info.get("step_fields", {})
    missing = [name for name in args.step_fields if name not in have]
    if missing:
        raise ConfigError(step_fields_message(args.env, missing, list(have)))


def check_buffer_memory(args, scheme, groups, max_seq_length):
    """Refuse a replay buffer that could not fit in this machine's memory were every episode to
    run to the limit (the OS would kill the run instead)."""
    per_step = 0
    for field in scheme.values():
        shape = field["vshape"]
        n = int(np.prod(shape if isinstance(shape, (tuple, list)) else (shape,)))
        n *= groups[field["group"]] if "group" in field else 1
        per_step += n * torch.empty((), dtype=field.get("dtype", torch.float32)).element_size()
    if "actions_onehot" not in scheme and scheme["actions"].get("dtype") == torch.long:
        per_step += groups["agents"] * args.n_actions * 4  # the one-hot copy
    need = per_step * max_seq_length * args.buffer_size
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if need > 0.8 * total:
        fit = max(1, int(0.5 * total / (per_step * max_seq_length)))
        raise ConfigError(
            f"buffer_size={args.buffer_size} episodes of this env need "
            f"{need / 2**30:.1f} GiB, more than this machine's "
            f"{total / 2**30:.1f} GiB of memory allows; use buffer_size={fit} or less"
        )
    available = available_memory()
    if available is not None and need > available:
        # The buffer's pages are taken as it fills, so this may still end well if other jobs
        # finish first; if not, the OS kills the run (a corridor run with the default buffer
        # needs 12 GiB: two at once on a 24 GiB machine were killed).
        fit = max(1, int(0.8 * available / (per_step * max_seq_length)))
        get_console_logger().warning(
            f"the replay buffer may take up to {need / 2**30:.1f} GiB as it fills, but only "
            f"{available / 2**30:.1f} GiB are available now (other jobs); buffer_size={fit} fits"
        )


def available_memory():
    """Bytes of memory available to new allocations (Linux's MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# --- cross-play: a team's controller from its checkpoint -------------------------------------


def run_keys():
    """What a team's controller takes from this run rather than from its checkpoint's config:
    default.yaml's run, rewards and outputs sections (the env, the run's mechanics) and what the
    env tells the run. The rest (controller, agent network, action selection) is the team's."""
    return set(section_keys(RUN_SECTIONS)) | set(DERIVED_KEYS)


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
    return {**load_defaults(), **meta["config"]}


def build_team_mac(args, env_info, scheme, groups, logger):
    """One controller per team, loaded from team_checkpoints.<team>; every team of the env must
    be given, and only those."""
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
    keep = run_keys()
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
        team_args = SimpleNamespace(**{**cfg, **{k: v for k, v in vars(args).items() if k in keep}})
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
