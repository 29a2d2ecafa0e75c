"""Each run of a sweep as a command: its checkpoints, whether it goes on from one, its log; which
runs are done, taken by another process, or to do."""

import contextlib
import io
import json
import os
import sys

from components.replay_log import LOG
from config import ROOT, load_config
from sweep_archive import (
    archive_completed,
    archive_unfinished,
    archived_unfinished,
    record_keys,
    restore_unfinished,
    results_dir,
    resume_point,
    saved_runs,
)
from sweeping.spec import describe, keys, yaml_value
from utils.checkpoint import BUFFER
from utils.errors import ConfigError

MAIN = os.path.join(ROOT, "src", "main.py")


def command(run, spec):
    results = spec.get("results", "results")
    resume = run.get("resume")
    return [
        sys.executable,
        MAIN,
        f"--config={run['config']}",
        f"--env-config={run['env_config']}",
        "with",
        *(f"{k}={yaml_value(v)}" for k, v in run["overrides"].items()),
        *(f"{k}={yaml_value(v)}" for k, v in (spec.get("launch") or {}).items()),
        *run.get("checkpointing", ()),
        *([f"checkpoint_path={resume['folder']}"] if resume else []),
        f"seed={run['seed']}",
        f"experiment={spec['experiment']}",
        f"sweep_key={run['key']}",
        f"local_results_path={results}",
    ]


def checkpointing(config, run, spec):
    """The overrides that make a run save what it needs to go on after an interruption. Not part
    of the run's key: saving changes nothing in the training."""
    interval = spec.get("checkpoint_interval", "auto")
    if interval == "auto":
        interval = max(1, int(config["t_max"]) // 10)
    if not isinstance(interval, int) or isinstance(interval, bool) or interval < 0:
        raise ConfigError(f"checkpoint_interval must be auto or an int >= 0, got {interval!r}")
    extra = []
    if not config["save_model"] and interval > 0:
        extra += ["save_model=True", f"save_model_interval={interval}"]
    if "save_buffer" not in run["overrides"]:  # the sweep's overrides and grid point
        extra.append(f"save_buffer={bool(spec.get('checkpoint_buffer', True))}")
    return extra


def resume_folder(run, spec):
    folder = run["resume"].get("folder")
    if folder is None:  # only in the archive (a dry run): its kept checkpoint
        folder = os.path.join(archived_unfinished(spec)[run["key"]]["folder"], "checkpoint")
    return folder


def resume_buffer(run, spec):
    """-> how the resumed run gets its replay buffer back, or None (an on-policy learner)."""
    folder = resume_folder(run, spec)
    try:
        with open(os.path.join(folder, "meta.json")) as f:
            learner = (json.load(f).get("config") or {}).get("learner")
        from learners import REGISTRY as learners

        if learners[learner].on_policy:
            return None
    except (OSError, ValueError, KeyError, ConfigError):
        return None
    if os.path.isfile(os.path.join(folder, BUFFER)):
        return "its buffer from buffer.th"
    if os.path.isfile(os.path.join(folder, LOG)):
        return f"its buffer played again from {LOG}"
    return "no buffer kept: it refills, and the run is not the uninterrupted one"


def resume_refusal(run, spec):
    """-> why main.py would refuse to go on from the run's checkpoint with the sweep's settings
    as they are now (a value the sweep passes that the checkpoint was not saved with), or None.
    Keys the sweep does not pass keep their saved values, so a changed default is no change."""
    argv = command({**run, "resume": {"folder": resume_folder(run, spec)}}, spec)[2:]
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # its notes are for the run's own log
            load_config(argv)
    except ConfigError as e:
        return str(e)
    return None


def drop_buffers(spec, key):
    """A completed run's checkpoints need no replay buffer (nor its log) any more: free the disk."""
    for entry in saved_runs(spec).get(key, []):
        for name in (BUFFER, LOG):
            path = os.path.join(entry["folder"], name)
            if os.path.isfile(path):
                os.remove(path)


def log_path(run, spec):
    base = results_dir(spec)
    folder = os.path.join(base, "logs", "sweeps", spec["experiment"])
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{run['config']}_seed{run['seed']}_{run['key']}.log")


def plan(spec, runs, a):
    """Bring the archive up to date (not in a dry run), then sort the runs: -> (keys done, keys
    running in another process, runs to start), each run to start with its resume point."""
    if not a.dry_run:
        archived = archive_completed(spec)
        if archived:
            print(f"archived {archived} completed runs in {spec['archive']}")
        archive_unfinished(spec)
    done, busy = claimed(spec)
    todo = [r for r in runs if r["key"] not in done and r["key"] not in busy]
    elsewhere = {}  # stopped runs that only the archive holds: went on from there
    if not a.restart:
        if a.dry_run:
            elsewhere = {k: w["t_env"] for k, w in archived_unfinished(spec).items()}
        else:
            restore_unfinished(spec, keys(todo))
    saved = {} if a.restart else saved_runs(spec)
    for r in todo:
        r["resume"] = resume_point(saved.get(r["key"], []))
        if r["key"] in elsewhere and (r["resume"] is None or r["resume"]["t_env"] < elsewhere[r["key"]]):
            r["resume"] = {"t_env": elsewhere[r["key"]], "archived": True}
    return done, busy, todo


def report(spec, runs, done, busy, wanted=None):
    """One line a run: done, busy, held (by --only), resume (from where) or run."""
    elsewhere = len(busy & keys(runs))
    print(
        f"sweep {spec['experiment']}: {len(runs)} runs, {len(done & keys(runs))} already completed"
        + (f", {elsewhere} running now in another process (left to it)" if elsewhere else "")
    )
    if spec.get("command_line_overrides"):
        given = " ".join(f"{k}={v}" for k, v in spec["command_line_overrides"].items())
        print(f"  every run with {given} (from the command line)")
    if spec.get("launch"):
        given = " ".join(f"{k}={yaml_value(v)}" for k, v in spec["launch"].items())
        print(f"  every run launched with {given} (how runs go, not part of their keys)")
    for r in runs:
        if r["key"] in done:
            print("  done   " + describe(r))
        elif r["key"] in busy:
            print("  busy   " + describe(r))
        elif wanted is not None and r["key"] not in wanted:
            print("  held   " + describe(r))
        elif r.get("resume"):
            where = ", in the archive" if r["resume"].get("archived") else ""
            buffer = resume_buffer(r, spec)
            where += f"; {buffer}" if buffer else ""
            print(f"  resume {describe(r)} (from t_env {r['resume']['t_env']}{where})")
            refusal = resume_refusal(r, spec)
            if refusal:
                print(f"         will be refused (--restart starts afresh): {refusal}")
        else:
            print("  run    " + describe(r))


def claimed(spec):
    """-> (keys of this sweep's completed runs, keys of the runs another sweep process is running
    now: the same sweep started twice, or overlapping --only)."""
    statuses = record_keys(spec)
    done = statuses.get("COMPLETED", set())
    return done, statuses.get("RUNNING", set()) - done


def taken(spec, run):
    """Why a planned run must not start now, or None: another sweep process (one started after
    this one's plan, with an overlapping --only) completed it or is running it meanwhile."""
    done, busy = claimed(spec)
    if run["key"] in done:
        return "completed meanwhile by another process"
    if run["key"] in busy:
        return "running now in another process"
    return None
