"""Checks of a merged config: names against the registries, keys against their declared types and
ranges, the components against what each declares it supports, checkpoints and the results
folder. Pure: validate() changes nothing (config.complete makes the changes first)."""

import importlib.util
import os

from config_keys import ROOT, key_specs, load_defaults
from utils.errors import ConfigError
from utils.registry import unknown_name_message


def project_path(path):
    """A relative path is taken from the project root, wherever the command runs."""
    return path if os.path.isabs(path) else os.path.join(ROOT, path)


def results_base(config):
    return project_path(config["local_results_path"])


def check_results_path(config):
    """Refuse a results folder that is a file or cannot be written, before anything starts."""
    import tempfile

    base = results_base(config)
    probe = base
    while not os.path.exists(probe):  # the nearest existing folder is where writing starts
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        where = "is a file" if probe == base else f"lies under a file ({probe})"
        raise ConfigError(f"local_results_path={config['local_results_path']!r} {where}; give a folder")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        raise ConfigError(
            f"local_results_path={config['local_results_path']!r} cannot be written ({probe}: {e.strerror})"
        ) from None


def check_capabilities(config, learners, macs, mixers):
    """The chosen components against what each declares it supports and needs (learners/base.py,
    controllers), then the learner's own checks."""
    name = config["learner"]
    learner, mac = learners[name], macs[config["mac"]]
    if learner.mixer_use == "required" and config["mixer"] is None:
        raise ConfigError(
            f"learner={name} needs a mixer ({' or '.join(f'mixer={m}' for m in sorted(mixers))}), "
            "got mixer=None"
        )
    if learner.mixer_use == "none" and config["mixer"] is not None:
        raise ConfigError(f"learner={name} uses no mixer; set mixer=None (got mixer={config['mixer']})")
    if config["mixer"] is not None and not config["common_reward"]:
        raise ConfigError(
            f"mixer={config['mixer']} mixes agents' values into one team value and "
            "needs common_reward=True; use mixer=None (IQL) for individual rewards"
        )
    if config["mac"] not in learner.macs:
        raise ConfigError(f"learner={name} trains mac={' or '.join(learner.macs)}, not mac={config['mac']}")
    if config["policy_ensemble"] > 1 and not mac.policy_ensembles:
        able = [m for m, c in sorted(macs.items()) if c.policy_ensembles]
        raise ConfigError(
            f"policy_ensemble={config['policy_ensemble']} needs a controller with "
            f"policy ensembles (mac={' or '.join(able)}), not mac={config['mac']}; "
            "use policy_ensemble=1"
        )
    if config["env_args"].get("continuous_actions") and "continuous" not in learner.action_spaces:
        raise ConfigError(
            f"learner={name} learns {' and '.join(learner.action_spaces)} actions; "
            "env_args.continuous_actions=True needs a continuous-action learner"
        )
    learner.validate(config)
    check_step_fields(config, learner)


def check_step_fields(config, learner):
    """record_fields names step fields that exist, and the env records every one the run needs
    (where the env's class says so; gymma and mpe say it once built, see assembly.py)."""
    from envs import step_fields_message, step_fields_of
    from envs.multiagentenv import STEP_FIELDS

    asked = config["record_fields"]
    for name in asked:
        if name not in STEP_FIELDS:
            raise ConfigError(unknown_name_message("record_fields", name, list(STEP_FIELDS)))
    wanted = set(asked) | learner.batch_fields(config)
    have = step_fields_of(config["env"]) if wanted else None
    missing = [name for name in STEP_FIELDS if name in wanted and name not in have]
    if missing:
        raise ConfigError(step_fields_message(config["env"], missing, list(have)))


def validate(config, defaults=None):
    """Refuse, with one line, a config that cannot run; changes nothing (complete() makes the
    changes first). -> config."""
    check_names_and_values(config, defaults)
    check_run_shape(config)
    check_checkpoints_and_outputs(config)
    # The env's own arguments are checked by the env (complete() gave it the reward settings).
    from envs import validate_env_args

    validate_env_args(config["env"], config["env_args"])
    return config


def check_names_and_values(config, defaults=None):
    """Every registry name registered, every key's value of its declared type and range."""
    # Registries are imported here so that a bad name is refused before anything starts.
    from components.action_selectors import REGISTRY as sel_REGISTRY
    from controllers import REGISTRY as mac_REGISTRY
    from envs import REGISTRY as env_REGISTRY
    from learners import REGISTRY as le_REGISTRY
    from modules.agents import REGISTRY as agent_REGISTRY
    from modules.critics import REGISTRY as critic_REGISTRY
    from modules.mixers import REGISTRY as mixer_REGISTRY
    from runners import REGISTRY as r_REGISTRY

    for key, registry in (
        ("runner", r_REGISTRY),
        ("mac", mac_REGISTRY),
        ("agent", agent_REGISTRY),
        ("learner", le_REGISTRY),
        ("action_selector", sel_REGISTRY),
        ("env", env_REGISTRY),
        ("critic", critic_REGISTRY),
    ):
        registry[config[key]]
    if config["mixer"] is not None:
        mixer_REGISTRY[config["mixer"]]
    defaults = defaults if defaults is not None else load_defaults()
    for key, spec in key_specs().items():
        if key in config:
            spec.check(key, config[key], defaults.get(key))  # raises on a bad value
    if config.get("use_wandb") and importlib.util.find_spec("wandb") is None:
        raise ConfigError("use_wandb=True needs the wandb package: pip install wandb")


def check_run_shape(config):
    """Sizes that must fit together, and what the learner, controller and mixer declare they
    support."""
    from controllers import REGISTRY as mac_REGISTRY
    from learners import REGISTRY as le_REGISTRY
    from modules.agents.transformer_agent import head_count_error
    from modules.mixers import REGISTRY as mixer_REGISTRY

    if message := head_count_error(config["transformer_embed_dim"], config["transformer_n_head"]):
        raise ConfigError(message)
    # on-policy learners train on the episodes just played and allocate no buffer
    if not le_REGISTRY[config["learner"]].on_policy and config["buffer_size"] < config["batch_size"]:
        raise ConfigError(
            f"buffer_size={config['buffer_size']} must be at least batch_size={config['batch_size']}"
        )
    if config["runner"] == "episode" and config["batch_size_run"] != 1:
        raise ConfigError(
            f"runner=episode steps one env, but batch_size_run="
            f"{config['batch_size_run']}; use runner=parallel or vector, or batch_size_run=1"
        )
    if config["env_workers"] is not None and config["env_workers"] > config["batch_size_run"]:
        raise ConfigError(
            f"env_workers={config['env_workers']} is more processes than envs "
            f"(batch_size_run={config['batch_size_run']}); use at most {config['batch_size_run']}, "
            f"0 (the envs in this process) or null"
        )
    check_capabilities(config, le_REGISTRY, mac_REGISTRY, mixer_REGISTRY)


def check_checkpoints_and_outputs(config):
    """Evaluation, cross-play and resume need their checkpoints; replays need an env that saves
    them; the results folder must be writable."""
    from utils.checkpoint import check_checkpoint

    if config["evaluate"] and not config["checkpoint_path"] and not config["team_checkpoints"]:
        raise ConfigError(
            "evaluate=True needs checkpoint_path=<folder of saved models> "
            "(or, for cross-play, team_checkpoints.<team>=<folder> for every team)"
        )
    if config["team_checkpoints"]:
        if not config["evaluate"]:
            raise ConfigError(
                "team_checkpoints (cross-play) needs evaluate=True: it evaluates, it does not train"
            )
        for team, folder in config["team_checkpoints"].items():
            if not isinstance(folder, str) or not os.path.isdir(folder):
                raise ConfigError(f"team_checkpoints.{team}={folder!r} is not a folder")
            check_checkpoint(folder, config["load_step"])
    if config["checkpoint_path"]:
        if not os.path.isdir(config["checkpoint_path"]):
            raise ConfigError(f"checkpoint_path={config['checkpoint_path']!r} is not a folder")
        check_checkpoint(config["checkpoint_path"], config["load_step"])
    if config["save_replay"]:
        from envs import SAVES_REPLAYS

        if config["env"] not in SAVES_REPLAYS:
            raise ConfigError(
                f"save_replay=True: env {config['env']!r} cannot save replays "
                f"(envs that can: {', '.join(sorted(SAVES_REPLAYS))})"
            )
        if not config["evaluate"]:
            raise ConfigError(
                "save_replay=True saves a replay of the evaluation episodes and "
                "needs evaluate=True (and checkpoint_path)"
            )
    check_results_path(config)
