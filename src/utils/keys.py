"""Config keys declared beside the code that reads them.

A module that reads keys of its own declares them once at import time:

    declare_keys(
        "ICES (mac ices_mac with learner ices_learner)",
        ("ices_int_ratio", 0.1, "float in [0, 1]", "chance that an agent plays the exploration policy"),
    )

Each key: its name, its default, its type and range in the grammar config_keys.KeySpec reads
(`int >= 1`, `float in (0, 1]`, `float > 0 or null`, `one of: a, b`; None where the default's own
type is the check) and one line of help. config_keys.load_defaults() adds every declared key to
config/default.yaml's run-wide ones, so the command line, the YAML checks, the error messages,
peer-config translation and the generated key table of docs/configuration.md all see it."""

import sys
from dataclasses import dataclass

DECLARED = {}  # key name -> Key, in declaration order

# Keys renamed to carry their family's prefix (they collided with another family's in the one
# namespace): the former name is still read, as the current one, in YAML files and on the command
# line (peer_keys.py: with a note), in a checkpoint's saved settings (config.resumed_config: with
# a note), in run records (utils/results.py) and in plot filters.
# PyMARL3's DIFFER and the published INSPIRE code use the former names.
FORMER_NAMES = {
    "warm_up": "selected_warm_up",
    "warm_up_ratio": "selected_warm_up_ratio",
    "beta_start": "selected_beta_start",
    "beta_end": "selected_beta_end",
}


# What the env tells the run (assembly.apply_env_info), and where the controller and learner read it.
ENV_INFO_KEYS = ("n_agents", "n_actions", "state_shape", "obs_shape", "episode_limit")
# Keys a run writes into its own config as it starts (assembly.apply_env_info: the env's sizes and
# layout; assembly.build: step_fields; run.run: record, unique_token). A checkpoint's saved settings
# carry them and a resumed run sets them afresh; any other saved key this version lacks is a setting
# it cannot honour (config.resumed_config refuses it). tests/test_resume_settings.py checks the list.
DERIVED_KEYS = (
    *ENV_INFO_KEYS,
    "obs_entities",
    "action_entities",
    "action_space",
    "action_low",
    "action_high",
    "state_agent_features",
    "unique_token",
    "record",
    "step_fields",
)


def current_names(cfg: dict) -> tuple[dict, list[tuple[str, str]]]:
    """cfg with each former key name read as its current one (a current name given beside its
    former one wins) -> (that cfg, [(former, current), ...] renamed)."""
    out, renamed = {}, []
    for key, value in cfg.items():
        new = FORMER_NAMES.get(key)
        if new is None:
            out[key] = value
        else:
            renamed.append((key, new))
            if new not in cfg:
                out[new] = value
    return out, renamed


@dataclass(frozen=True)
class Key:
    name: str
    default: object
    spec: str | None  # type and range (config_keys.KeySpec's grammar), or None
    help: str
    family: str  # the heading it is listed under
    owner: str  # the module (or file) that declares it


def declare_keys(family: str, *keys: tuple) -> None:
    """Declare `keys` ((name, default, spec, help) each) for the calling module, under `family`.
    A module imported again may declare its keys again; another module may not take the name."""
    owner = sys._getframe(1).f_globals.get("__name__", "?")
    for name, default, spec, help_text in keys:
        key = Key(name, default, spec, help_text, family, owner)
        known = DECLARED.get(name)
        if known is not None and known.owner != owner:
            raise ValueError(f"config key {name!r} is declared by both {known.owner} and {owner}")
        DECLARED[name] = key
