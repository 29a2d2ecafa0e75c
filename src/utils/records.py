"""Sacred's file observer, made to survive faults (see RecordObserver)."""

import json
import os

from sacred.observers import FileStorageObserver
from sacred.serializer import flatten

from utils.code_version import code_version
from utils.files import atomic_write


class RecordObserver(FileStorageObserver):
    """Sacred's FileStorageObserver, with writes that cannot wipe the record:

    - run.json, config.json, info.json and metrics.json are replaced atomically;
    - metrics are kept in memory and rewritten whole, so a failed write loses nothing (Sacred's
      observer re-reads metrics.json each time and would start over from an empty file);
    - cout.txt is appended to, and cut back to its last good length when an append fails;
    - the first write error is kept in `write_error` for the training loop to raise, instead of
      Sacred silently dropping the observer; final events never raise.
    The run.json also records the process id, so a record left RUNNING by a killed process can be
    recognised (`run_status`), and the commit the code was at (`host.code`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.write_error = None
        self.metrics = {}

    def save_json(self, obj, filename):
        data = json.dumps(flatten(obj), sort_keys=True, indent=2).encode()
        self._guard(atomic_write, os.path.join(self.dir, filename), data)

    def save_cout(self):
        path = os.path.join(self.dir, "cout.txt")
        text = self.cout[self.cout_write_cursor :].encode("utf-8")
        if not text and os.path.exists(path):
            return
        size = os.path.getsize(path) if os.path.exists(path) else 0
        try:
            with open(path, "ab") as f:
                f.write(text)
        except OSError as e:
            try:
                os.truncate(path, size)
            except OSError:
                pass
            e.filename = e.filename or path
            self._note(e)
            raise
        self.cout_write_cursor = len(self.cout)

    def started_event(self, ex_info, command, host_info, start_time, config, meta_info, _id):
        self.metrics = {}
        host_info = dict(host_info, pid=os.getpid(), code=code_version())
        _id = super().started_event(ex_info, command, host_info, start_time, config, meta_info, _id)
        self.run_entry["kind"] = run_kind(config)
        self.save_json(self.run_entry, "run.json")
        return _id

    def log_metrics(self, metrics_by_name, info):
        for name, new in metrics_by_name.items():
            series = self.metrics.setdefault(name, {"values": [], "steps": [], "timestamps": []})
            series["values"] += new["values"]
            series["steps"] += new["steps"]
            series["timestamps"] += [ts.isoformat() for ts in new["timestamps"]]
        self.save_json(self.metrics, "metrics.json")

    # Final events: Sacred prints a traceback for any exception here; the error is reported once
    # by the run instead, and the last good record stays on disk.
    def completed_event(self, stop_time, result):
        self._final(super().completed_event, stop_time, result)

    def interrupted_event(self, interrupt_time, status):
        self._final(super().interrupted_event, interrupt_time, status)

    def failed_event(self, fail_time, fail_trace):
        self._final(super().failed_event, fail_time, fail_trace)

    def _final(self, method, *args):
        try:
            self.save_cout()
            method(*args)
        except OSError as e:
            self._note(e)

    def _guard(self, fn, path, data):
        try:
            fn(path, data)
        except OSError as e:
            self._note(e)
            raise

    def _note(self, e):
        if self.write_error is None:
            self.write_error = e


def run_kind(config):
    """What a record holds: "evaluation" (a checkpoint's test episodes, or cross-play) or
    "training" (a learning curve). plot.py leaves evaluations out of training curves."""
    return "evaluation" if config.get("evaluate") or config.get("team_checkpoints") else "training"
