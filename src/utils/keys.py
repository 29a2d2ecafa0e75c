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
