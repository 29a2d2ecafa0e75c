"""A sweep's records: which runs are done, stopped or saved, and the archive that carries them
across machines and sessions.

The archive (a sweep's `archive` folder, e.g. bench/runs/<experiment>) keeps the small files of
each completed record, one folder per configuration (with `archive_checkpoints`, also the run's
final checkpoint without its replay buffer, for cross-play on another machine), and each stopped
run's newest checkpoint (without buffer.th, but with the few MB of buffer_log.npz from which the
resumed run plays its buffer again) and record in <archive>/unfinished/. Copies
are made whole or not at all: run.json, or where.json for a stopped run, is written last and marks
a whole copy, and a stopped run's copy replaces the previous one only once it is whole
(_write_whole)."""

import functools
import json
import os
import shutil

from components.replay_log import LOG
from config import project_path
from utils.checkpoint import BUFFER, find_checkpoint
from utils.errors import ConfigError
from utils.files import run_status
from utils.results import find_runs, read_run

ARCHIVED = ("config.json", "metrics.json", "info.json", "run.json")  # run.json last: it marks a whole copy
RESUMABLE = ("INTERRUPTED", "DIED")  # stopped from outside; a FAILED run starts over


def results_dir(spec):
    return project_path(spec.get("results", "results"))


def saved_runs(spec):
    """-> {sweep_key: [{folder, t_env, status, record}]}: the newest checkpoint of every run of
    this sweep that saved one, with the status of the run's record (None: no record found)."""
    base = results_dir(spec)
    root = os.path.join(base, "models")
    found = {}
    for token in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        try:
            folder = find_checkpoint(os.path.join(root, token))
            with open(os.path.join(folder, "meta.json")) as f:
                meta = json.load(f)
        except (ConfigError, OSError, ValueError):
            continue
        config = meta.get("config") if isinstance(meta, dict) else None
        if not isinstance(config, dict) or config.get("experiment") != spec["experiment"]:
            continue
        status, record = None, meta.get("record")
        if record:
            try:
                with open(os.path.join(base, record, "run.json")) as f:
                    status = run_status(json.load(f))
            except (OSError, ValueError):
                pass
        entry = {"folder": folder, "t_env": meta.get("t_env", 0), "status": status, "record": record}
        found.setdefault(config.get("sweep_key"), []).append(entry)
    return found


def resume_point(saved):
    """The checkpoint to go on from: the furthest one whose run was stopped, or None."""
    stopped = [e for e in saved if e["status"] in RESUMABLE]
    return max(stopped, key=lambda e: e["t_env"]) if stopped else None


def sacred_dir(spec):
    return os.path.join(results_dir(spec), "sacred", spec["experiment"])


def archive_name(config, key):
    """The archive's folder of one configuration: readable, and unique through the key."""
    return f"{config.get('name')}_seed{config.get('seed')}_{key}"


def records(folder):
    """-> [(run folder, sweep key, status)] of the Sacred records under `folder` that have a key."""
    found = []
    for path in find_runs([folder]) if os.path.isdir(folder) else []:
        try:
            with open(os.path.join(path, "run.json")) as f:
                run = json.load(f)
            with open(os.path.join(path, "config.json")) as f:
                key = json.load(f).get("sweep_key")
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
        if key:
            found.append((path, key, run_status(run)))
    return found


def archive_dir(spec):
    return project_path(spec["archive"]) if spec.get("archive") else None


def record_keys(spec):
    """-> {status (run_status): sweep keys of this sweep's records with it}; the archive's records
    count as COMPLETED."""
    by_status = {}
    for _, key, status in records(sacred_dir(spec)):
        by_status.setdefault(status, set()).add(key)
    archive = archive_dir(spec)
    if archive:
        by_status.setdefault("COMPLETED", set()).update(
            key for _, key, status in records(archive) if status == "COMPLETED"
        )
    return by_status


def archive_completed(spec):
    """Copy every completed record of this sweep that the archive lacks into it; -> how many."""
    archive = archive_dir(spec)
    if not archive:
        return 0
    have = {key for _, key, status in records(archive) if status == "COMPLETED"}
    saved = saved_runs(spec) if spec.get("archive_checkpoints") else {}
    copied = 0
    for path, key, status in records(sacred_dir(spec)):
        if status != "COMPLETED" or key in have:
            continue
        try:
            config = read_run(path)[0]
        except ValueError:  # a half-written copy: leave it to the loader's warning
            continue
        dest = os.path.join(archive, archive_name(config, key))
        point = final_checkpoint(saved.get(key, []), os.path.relpath(path, results_dir(spec)))
        if point is not None:  # before the record, whose run.json marks the copy whole
            # the buffer's log too is for going on, which a completed run will not do
            _copy_files(
                point["folder"],
                os.path.join(dest, "checkpoint", str(point["t_env"])),
                skip=(BUFFER, LOG),
            )
        _copy_files(path, dest, names=ARCHIVED)
        have.add(key)
        copied += 1
    for where in _unfinished_copies(spec):
        if where["key"] in have:  # its completed record carries the whole curve
            shutil.rmtree(where["folder"])
    return copied


def final_checkpoint(saved, record):
    """The newest checkpoint that the run recorded at `record` saved, or None."""
    own = [e for e in saved if e["record"] and os.path.normpath(e["record"]) == os.path.normpath(record)]
    return max(own, key=lambda e: e["t_env"]) if own else None


def _unfinished_root(spec):
    archive = archive_dir(spec)
    return os.path.join(archive, "unfinished") if archive else None


def _copy_files(src, dest, names=None, skip=()):
    os.makedirs(dest, exist_ok=True)
    for name in sorted(os.listdir(src)) if names is None else names:
        path = os.path.join(src, name)
        if name not in skip and os.path.isfile(path):
            shutil.copyfile(path, os.path.join(dest, name))


def _unfinished_copies(spec):
    """-> [{key, t_env, token, record, folder}] of every whole copy in <archive>/unfinished, in
    name order: a dot-named one is what a replacement killed half-way left (see _write_whole)."""
    root = _unfinished_root(spec)
    found = []
    for name in sorted(os.listdir(root)) if root and os.path.isdir(root) else []:
        try:
            with open(os.path.join(root, name, "where.json")) as f:
                where = json.load(f)
        except (OSError, ValueError):
            continue  # a copy that did not finish: where.json is written last
        found.append({**where, "folder": os.path.join(root, name)})
    return found


def archived_unfinished(spec):
    """-> {sweep key: {folder, t_env, token, record}} of the stopped runs kept in the archive."""
    # the plain name (sorted after dot-named leftovers of the same run) is the current copy
    return {where["key"]: where for where in _unfinished_copies(spec)}


def _write_whole(dest, fill):
    """fill(folder) writes a sibling of `dest` that replaces it only once whole, so a copy cut
    short (a second signal, kill -9) keeps the previous one. A kill between the two renames
    leaves the new copy as .<name>.partial (found by archived_unfinished until the next write)."""
    parent, name = os.path.split(dest)
    partial, old = (os.path.join(parent, f".{name}.{suffix}") for suffix in ("partial", "old"))
    if not os.path.exists(dest):  # a replacement killed half-way: keep its best copy first
        for leftover in (partial, old):
            if os.path.exists(os.path.join(leftover, "where.json")):
                os.rename(leftover, dest)
                break
    for leftover in (partial, old):
        shutil.rmtree(leftover, ignore_errors=True)
    fill(partial)
    if os.path.exists(dest):
        os.rename(dest, old)
    os.rename(partial, dest)
    shutil.rmtree(old, ignore_errors=True)


def _archive_stopped_run(point, record, where, dest):
    _copy_files(point["folder"], os.path.join(dest, "checkpoint"), skip=(BUFFER,))
    _copy_files(record, os.path.join(dest, "record"), names=ARCHIVED)
    run_path = os.path.join(dest, "record", "run.json")
    with open(run_path) as f:
        run = json.load(f)
    if run.get("status") == "RUNNING":  # DIED: its pid means nothing on another machine
        run["status"] = "INTERRUPTED"
        with open(run_path, "w") as f:
            json.dump(run, f, indent=2)
    with open(os.path.join(dest, "where.json"), "w") as f:  # last: it marks a whole copy
        json.dump(where, f, indent=2)


def archive_unfinished(spec):
    """Keep each stopped run's newest checkpoint (without its replay buffer) and its record in
    <archive>/unfinished/, so a fresh checkout can go on from there. -> how many were written."""
    root = _unfinished_root(spec)
    if not root:
        return 0
    done = record_keys(spec).get("COMPLETED", set())
    have = archived_unfinished(spec)
    written = 0
    for key, saved in saved_runs(spec).items():
        point = resume_point(saved)
        if key in done or point is None or not point["record"]:
            continue
        if key in have and have[key]["t_env"] >= point["t_env"]:
            continue
        record = os.path.join(results_dir(spec), point["record"])
        with open(os.path.join(point["folder"], "meta.json")) as f:
            config = json.load(f)["config"]
        where = {
            "key": key,
            "t_env": point["t_env"],
            "token": os.path.basename(os.path.dirname(point["folder"])),
            "record": point["record"],
        }
        dest = os.path.join(root, archive_name(config, key))
        _write_whole(dest, functools.partial(_archive_stopped_run, point, record, where))
        written += 1
    return written


def restore_unfinished(spec, todo_keys):
    """Put archived stopped runs back into the results folder, where a sweep on the machine that
    ran them would find them, when that folder holds nothing as far along."""
    base = results_dir(spec)
    local = saved_runs(spec)
    for key, where in archived_unfinished(spec).items():
        point = resume_point(local.get(key, []))
        if key not in todo_keys or (point and point["t_env"] >= where["t_env"]):
            continue
        record = os.path.join(base, where["record"])
        if os.path.exists(record):  # that run id is taken here: the next free one
            parent = os.path.dirname(record)
            ids = [int(d) for d in os.listdir(parent) if d.isdigit()]
            record = os.path.join(parent, str(max(ids, default=0) + 1))
        shutil.copytree(os.path.join(where["folder"], "record"), record)
        checkpoint = os.path.join(base, "models", where["token"], str(where["t_env"]))
        shutil.copytree(os.path.join(where["folder"], "checkpoint"), checkpoint, dirs_exist_ok=True)
        meta_path = os.path.join(checkpoint, "meta.json")
        with open(meta_path) as f:
            meta = json.load(f)
        meta["record"] = os.path.relpath(record, base)
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=2)
