"""Read Sacred FileStorageObserver runs into one tidy pandas table.

One row per (run, metric, t_env): run folder, run id, status, every config value (nested keys
flattened with dots, e.g. env_args.map_name), metric, t_env, value.
"""

import json
import os
import warnings

from utils.files import run_status
from utils.keys import current_names


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def find_runs(folders):
    """Every Sacred run folder (holding run.json) under the given folders."""
    runs = []
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            if "run.json" in files and "config.json" in files:
                runs.append(root)
                dirs[:] = []
            else:
                dirs.sort()
    return sorted(runs)


def read_run(path):
    """-> (info dict, metrics dict); raises ValueError for an unreadable or half-written run."""
    try:
        with open(os.path.join(path, "run.json")) as f:
            run = json.load(f)
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
        metrics_path = os.path.join(path, "metrics.json")
        metrics = {}
        if os.path.exists(metrics_path):
            with open(metrics_path) as f:
                metrics = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: {e}") from None
    if not isinstance(metrics, dict) or not isinstance(config, dict):
        raise ValueError(f"{path}: unexpected contents")
    info = {"run_dir": path, "run_id": os.path.basename(path), "status": run_status(run)}
    config, _ = current_names(config)  # records made before a key's rename: its current name
    info.update(flatten({k: v for k, v in config.items() if k != "seed"}))
    info["seed"] = config.get("seed")
    info["start_time"] = run.get("start_time")
    # records written before run.json said its kind: an evaluation's config says evaluate
    info["kind"] = run.get("kind") or (
        "evaluation" if config.get("evaluate") or config.get("team_checkpoints") else "training"
    )
    info["resumed_from"] = resumed_from(path)
    return info, metrics


def resumed_from(path):
    """The record of the run this one went on from (whose metrics it carries), or None."""
    try:
        with open(os.path.join(path, "info.json")) as f:
            record = json.load(f).get("resumed_from", {}).get("record")
    except (OSError, ValueError, AttributeError):
        return None
    return record if isinstance(record, str) else None


ENDED_EARLY = ("INTERRUPTED", "FAILED", "DIED")


def load_runs(folders, metrics=None, status=None, evaluations=False):
    """Tidy DataFrame of every readable run under `folders`; unreadable runs are skipped with a
    warning. metrics: keep only these metric names; status: keep only runs with these statuses
    (DIED: left RUNNING by a process that was killed). A sweep run that ended early is left out
    when another run of the same sweep configuration completed, and any run that another was
    resumed from (its metrics are in that one's record) is left out too (SUPERSEDED). A copy of a
    sweep record (a sweep's archive read beside its results) counts once (DUPLICATE). Evaluation
    records (a checkpoint's test episodes, not a learning curve) are left out unless `evaluations`
    (EVALUATION).
    df.attrs["skipped"] counts the runs each filter left out."""
    import pandas as pd

    if isinstance(folders, str):
        folders = [folders]
    rows, skipped = [], {}
    runs = []
    for path in find_runs(folders):
        try:
            runs.append((path, *read_run(path)))
        except ValueError as e:
            warnings.warn(f"skipping unreadable run {e}", stacklevel=2)
    # A sweep that re-runs an interrupted configuration leaves two records of it: once one of
    # them completed, the ones that ended early are superseded (else one seed would count twice).
    done = {(i.get("experiment"), i.get("sweep_key")) for _, i, _ in runs if i["status"] == "COMPLETED"}
    # A run that another went on from lives on in that one's record, which carries its metrics.
    continued = {os.path.realpath(i["resumed_from"]) for _, i, _ in runs if i["resumed_from"]}
    seen = set()
    for path, info, run_metrics in runs:
        if info["kind"] == "evaluation" and not evaluations:
            skipped["EVALUATION"] = skipped.get("EVALUATION", 0) + 1
            continue
        key = (info.get("experiment"), info.get("sweep_key"))
        superseded = info["status"] in ENDED_EARLY and info.get("sweep_key") and key in done
        if superseded or os.path.realpath(path) in continued:
            skipped["SUPERSEDED"] = skipped.get("SUPERSEDED", 0) + 1
            continue
        twin = (info.get("experiment"), info.get("sweep_key"), info["start_time"], info["status"])
        if info.get("sweep_key") and twin in seen:
            skipped["DUPLICATE"] = skipped.get("DUPLICATE", 0) + 1
            continue
        seen.add(twin)
        if status is not None and info["status"] not in status:
            skipped[info["status"]] = skipped.get(info["status"], 0) + 1
            continue
        for name, series in run_metrics.items():
            if metrics is not None and name not in metrics:
                continue
            try:
                steps, values = series["steps"], series["values"]
            except (TypeError, KeyError):
                warnings.warn(f"skipping metric {name} of {path}: no steps/values", stacklevel=2)
                continue
            for t, v in zip(steps, values, strict=True):
                rows.append({**info, "metric": name, "t_env": t, "value": v})
    columns = ["run_dir", "run_id", "status", "metric", "t_env", "value"]
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=columns)
    else:
        first = [c for c in columns if c in df.columns]
        df = df[first + [c for c in df.columns if c not in first]]
    df.attrs["skipped"] = skipped
    return df
