"""Typed values from the command line and YAML files."""

from utils.errors import ConfigError
from utils.results import flatten


def type_name(v):
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "mapping"}.get(
        type(v), type(v).__name__
    )


def coerce(key, value, basis):
    """`value` converted to the type of `basis` (the default), or ConfigError."""
    if basis is None:
        return value
    if isinstance(basis, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(basis, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        number = _as_number(value)
        if number is not None and float(number).is_integer():
            return int(number)
    elif isinstance(basis, float):
        number = _as_number(value)
        if number is not None:
            return float(number)
    elif isinstance(basis, str):
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    elif isinstance(basis, list | dict) and isinstance(value, type(basis)):
        return value
    raise ConfigError(
        f"{key}={value!r} has the wrong type: expected {type_name(basis)} "
        f"(default {basis!r}), got {type_name(value)}"
    )


def _as_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def plain(config):
    """Settings as JSON-ready values (what a record or checkpoint holds after a round trip)."""
    import json

    return json.loads(json.dumps(config, default=str))


def plain_config(args):
    """A run's settings (a namespace) as JSON-ready values: what checkpoints and W&B keep."""
    return plain(vars(args))


# The one declaration of the keys that do not change what a run trains, in three rings.
# BOOKKEEPING changes nothing a run draws or learns: where it writes, what it logs and saves, its
# processes, threads and device, and the sweep's names for it.
BOOKKEEPING = {
    "checkpoint_path", "load_step", "resume_override", "evaluate", "local_results_path", "save_model",
    "save_model_interval", "save_buffer", "save_replay", "use_tensorboard", "use_wandb",
    "wandb_entity", "wandb_mode", "wandb_project", "torch_threads", "env_workers", "log_interval",
    "runner_log_interval", "learner_log_interval", "team_checkpoints", "device", "experiment",
    "sweep_key",
}  # fmt: skip
# What a resumed run may change besides (config_changes): how long it runs, and the keys the run
# fills in for itself.
RESUMABLE = BOOKKEEPING | {"t_max", "unique_token", "record", "step_fields"}
# What runs of one experiment may differ in besides (plot.py pools them): their seeds and config
# names, the test cadence, where the buffer lives and which extra fields it records.
SAME_EXPERIMENT = BOOKKEEPING | {
    "seed", "env_args.seed", "alg_config", "env_config", "test_interval", "test_nepisode",
    "buffer_cpu_only", "record_fields", "step_fields",
}  # fmt: skip


def config_changes(saved, current, defaults=None):
    """-> {key: (saved value, current value)} for the settings of `current` that differ from those
    a checkpoint was saved with (env_args.* compared key by key). A key `current` lacks is not
    reported: a config loaded from the command line has not yet got the keys a run derives from
    its env (n_agents, obs_shape...). A key the checkpoint lacks (a setting added since) is
    compared with its default in `defaults` where given, the behaviour the run was trained with."""
    saved = flatten({**(defaults or {}), **saved})
    changes = {}
    for key, value in flatten(current).items():
        old = saved.get(key, "(not set)")
        if old != value and not RESUMABLE.intersection(key.split(".")):
            changes[key] = (old, value)
    return changes


def describe_changes(changes, limit=6):
    shown = [f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(changes.items())[:limit]]
    more = len(changes) - limit
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
