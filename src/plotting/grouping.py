"""Which runs form a curve: filters, the task of a run, and splitting a name by the config keys its
runs differ in (bookkeeping keys aside)."""

import sys

import numpy as np

from utils.keys import FORMER_NAMES
from utils.values import SAME_EXPERIMENT

# Columns of load_runs that are not config keys.
RUN_COLUMNS = {
    "run_dir", "run_id", "status", "kind", "start_time", "resumed_from", "metric", "t_env", "value",
}  # fmt: skip


# Keys in which runs of one experiment may differ (utils/values.py declares them).
BOOKKEEPING = SAME_EXPERIMENT
BOOKKEEPING_PREFIXES = ("team_checkpoints.",)


# Said on every figure and table of runs on the built-in simulators, so that no plot of them can
# pass for StarCraft II results.
SIMULATOR_NOTES = {
    "skirmish": "skirmish: the built-in StarCraft-style simulator with SMAC's interface, calibrated "
    "to published StarCraft II figures; not StarCraft II",
    "skirmish_v2": "skirmish_v2: the built-in simulator with SMACv2's interface, set against "
    "SMACv2's published curves; not StarCraft II",
}


def simulator_note(df):
    """-> one line naming the built-in simulators these runs used, or "" if none."""
    envs = sorted(set(df["env"].dropna().astype(str))) if "env" in df.columns else []
    return "; ".join(SIMULATOR_NOTES[e] for e in envs if e in SIMULATOR_NOTES)


def _given(col):
    return col.notna() & (col != "")


def task_key(df):
    """The config key that names each run's task: the first of the env's task keys any run sets."""
    for key in ("env_args.map_name", "env_args.key", "env_args.scenario"):
        if key in df.columns and _given(df[key]).any():
            return key
    return "env"


def task_column(df):
    """Each run's task: its task_key value, or its env where it sets none."""
    key = task_key(df)
    return df[key].where(_given(df[key])).fillna(df["env"]).astype(str)


def apply_filters(df, filters):
    for f in filters:
        if "=" not in f:
            raise SystemExit(f"error: --filter '{f}' must look like KEY=VALUE")
        key, value = f.split("=", 1)
        key = FORMER_NAMES.get(key, key)
        if key not in df.columns:
            raise SystemExit(
                f"error: --filter key '{key}' is not a config key of these runs; "
                f"some valid ones: {', '.join(sorted(c for c in df.columns if '.' in c)[:12])}"
            )
        # V1,V2: any of them (a value that itself holds a comma still matches whole)
        wanted = {value, *value.split(",")}
        df = df[df[key].astype(str).isin(wanted)]
    return df


# What a record that lacks a key ran with, where that is not the key's default today: a default
# that changed after records were made without the key.
ABSENT_MEANS = {"env_args.placement": "toward"}


def absent_value(key, defaults):
    return ABSENT_MEANS[key] if key in ABSENT_MEANS else defaults.get(key)


def differing_keys(runs, defaults):
    """Config keys (not bookkeeping) whose values differ among `runs` (one row per run). A key a
    run lacks (recorded before the key existed) counts as its default.yaml value, or as what
    ABSENT_MEANS says it ran with."""
    out = []
    for col in runs.columns:
        if (
            col in RUN_COLUMNS
            or col in BOOKKEEPING
            or col in ("group", "task")
            or col.startswith(BOOKKEEPING_PREFIXES)
        ):
            continue
        values = runs[col].map(lambda v, c=col: _plain(absent_value(c, defaults) if _missing(v) else v))
        if values.nunique() > 1:
            out.append(col)
    return out


def flat_defaults():
    from config import load_defaults
    from utils.results import flatten

    return flatten(load_defaults())


def _plain(v):
    """A comparable text of a config value: 1 and 1.0 are one value (older records kept YAML's
    int where the key's default is a float)."""
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return repr(float(v))
    return str(v)


def _missing(v):
    if isinstance(v, (list, tuple, dict, np.ndarray)):  # list-valued keys (record_fields: [])
        return False
    try:
        return v is None or bool(np.isnan(v))
    except TypeError:
        return False


def split_groups(df, explicit):
    """-> the group of every row. Runs are never pooled unless their configs differ only in
    bookkeeping: by default a group whose runs differ in other keys is split, each part named
    by them (`differ_qmix_transformer (transformer_n_layers=1)`); with an explicit --group-by the
    pooling is kept and warned about, naming the keys."""
    runs = df.groupby("run_dir").first()
    label = runs["group"].copy()
    defaults = flat_defaults()
    for (group, _), members in runs.groupby(["group", "task"]):  # a task is a panel of its own
        keys = differing_keys(members, defaults)
        if not keys:
            continue
        if explicit:
            print(
                f"warning: group {group!r} averages {len(members)} runs whose configs differ in "
                f"{', '.join(keys)}, as if they were seeds of one config (leave out --group-by to "
                "split them, or add those keys to it)",
                file=sys.stderr,
            )
            continue
        for run, row in members.iterrows():
            shown = ", ".join(f"{k}={_show(row[k], absent_value(k, defaults))}" for k in keys)
            label[run] = f"{group} ({shown})"
    return df["run_dir"].map(label)


def _show(v, default):
    """A value for a legend: the default where the run lacks the key, 64 rather than 64.0."""
    v = default if _missing(v) else v
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    return "-" if v is None else v
