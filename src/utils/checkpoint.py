"""Checkpoints: <root>/<t_env>/{learner.th, meta.json[, buffer.th]}, written atomically.

Only the newest step folder keeps a buffer.th (the replay buffer, with save_buffer=True): it is
what a resumed run needs, and the largest file by far. It also keeps buffer_log.npz where the run
can give it (with or without save_buffer), a few MB from which the buffer is played again
(components/replay_log.py, written through `writers`)."""

import io
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import zipfile

import torch

from utils.errors import ConfigError, first_line
from utils.files import current_umask

BUFFER = "buffer.th"  # the replay buffer, kept by the newest step folder only
PARTIAL = re.compile(r"^\.\d+\..+")  # a step folder being written (or left by a killed save)


def save_checkpoint(root, t_env, learner, meta, buffer=None, run_state=None, writers=None):
    """Write <root>/<t_env>/ whole or not at all. Partial folders left by a killed earlier save
    are removed first; a failed save (a full disk) removes its own and raises OSError.
    buffer: a replay buffer to save as well (and to drop from the older step folders).
    run_state: what else a resumed run needs to go on as this one (random states, counters).
    writers: {file name: function writing it to the path it is given} (the buffer's log)."""
    os.makedirs(root, exist_ok=True)
    for name in os.listdir(root):
        if PARTIAL.match(name):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    final = os.path.join(root, str(t_env))
    tmp = tempfile.mkdtemp(prefix=f".{t_env}.", dir=root)
    try:
        # Serialise in memory, then write plain bytes: a full disk gives OSError(ENOSPC) naming
        # the file, not torch's zip writer's "enforce fail ... unexpected pos".
        files = [
            ("learner.th", serialise(learner.state_dict())),
            ("meta.json", json.dumps(dict(meta, t_env=t_env), indent=2).encode()),
        ]
        if run_state is not None:
            files.append(("run_state.th", serialise(run_state)))
        for name, data in files:
            path = os.path.join(tmp, name)
            try:
                with open(path, "wb") as f:
                    f.write(data)
            except OSError as e:
                e.filename = e.filename or path
                raise
        if buffer is not None:  # streamed: it can be as large as the memory left for a copy
            stream_save(buffer.state_dict(), os.path.join(tmp, BUFFER))
        for name, write in (writers or {}).items():
            with _SignalsHeld():
                write(os.path.join(tmp, name))
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes it 0700
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(tmp, final)  # the step folder appears complete or not at all
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # what only the newest step folder needs (a resume goes on from there): the buffer, its log
    newest_only = ([BUFFER] if buffer is not None else []) + list(writers or {})
    for name in os.listdir(root):
        if name == str(t_env):
            continue
        for file in newest_only:
            old = os.path.join(root, name, file)
            if os.path.isfile(old):
                os.remove(old)
    return final


def serialise(obj):
    buf = io.BytesIO()
    with _SignalsHeld():
        torch.save(obj, buf)
    return buf.getbuffer()


class _SignalsHeld:
    """Holds Ctrl-C and SIGTERM while torch.save runs. A Python handler that fires inside its
    C++ zip writer has its KeyboardInterrupt turned into a RuntimeError ("enforce fail ...
    unexpected pos"), and the interrupted run would be recorded as failed. A held signal is
    raised, with its usual handler, as the block ends."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self):
        self.pending, self.previous = None, {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler):  # SIG_DFL / SIG_IGN act in C and raise nothing
                    self.previous[sig] = handler
                    signal.signal(sig, self._hold)
        return self

    def _hold(self, signum, frame):
        if self.pending is None:
            self.pending = signum

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        if self.pending is not None:
            signal.raise_signal(self.pending)
        return False


class _Stopped(Exception):
    """A held signal: the streamed save stops at its next write instead of finishing."""


class _Writer:
    """A file that remembers what stopped its write: torch.save turns an OSError (a full disk)
    into a RuntimeError that no longer says the disk is full."""

    def __init__(self, f, held):
        self.f, self.held, self.error = f, held, None

    def write(self, data):
        try:
            if self.held.pending is not None:
                raise _Stopped
            return self.f.write(data)
        except Exception as e:
            self.error = e
            raise

    def flush(self):
        self.f.flush()


def stream_save(obj, path):
    with open(path, "wb") as f, _SignalsHeld() as held:
        writer = _Writer(f, held)
        try:
            torch.save(obj, writer)
        except RuntimeError:
            if isinstance(writer.error, OSError):
                writer.error.filename = writer.error.filename or path
                raise writer.error from None
            if not isinstance(writer.error, _Stopped):
                raise
            # the held signal is raised as the block ends


def find_checkpoint(path, load_step=0):
    """The step folder under `path` (itself, or the step closest to load_step; 0 = the latest)."""
    if os.path.isfile(os.path.join(path, "learner.th")):
        return path
    steps = [
        int(d)
        for d in os.listdir(path)
        if d.isdigit() and os.path.isfile(os.path.join(path, d, "learner.th"))
    ]
    if not steps:
        raise ConfigError(f"checkpoint_path={path!r} holds no saved models (no <t_env>/learner.th)")
    step = max(steps) if load_step == 0 else min(steps, key=lambda s: abs(s - load_step))
    return os.path.join(path, str(step))


def check_checkpoint(path, load_step=0):
    """The step folder to load, after checking that its files can be read: refuses a missing
    meta.json and a truncated or foreign learner.th before the run starts."""
    folder = find_checkpoint(path, load_step)
    meta_path = os.path.join(folder, "meta.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise ConfigError(
            f"checkpoint {folder!r} has no meta.json; it was not written by a completed save"
        ) from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"checkpoint {meta_path!r} cannot be read: {e}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("t_env"), int):
        raise ConfigError(f"checkpoint {meta_path!r} does not hold a t_env")
    weights = os.path.join(folder, "learner.th")
    try:
        with zipfile.ZipFile(weights) as z:  # torch.save's format: a zip archive
            bad = z.testzip()
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise ConfigError(f"checkpoint {weights!r} is truncated or not a saved model: {e}") from None
    if bad is not None:
        raise ConfigError(f"checkpoint {weights!r} is corrupt (member {bad})")
    return folder


def _load(folder, name, device="cpu"):
    try:
        return torch.load(os.path.join(folder, name), map_location=device, weights_only=True)
    except Exception as e:  # torch raises many types for damaged files
        raise ConfigError(f"checkpoint {folder!r}: {name} cannot be loaded: {first_line(e)}") from None


def load_checkpoint(folder, learner, device):
    state = _load(folder, "learner.th", device)
    try:
        learner.load_state_dict(state)
    except (RuntimeError, KeyError) as e:  # other networks: a changed agent, hidden_dim, policy_ensemble...
        raise ConfigError(
            f"checkpoint {folder!r} does not fit this run's networks; load it with the "
            f"settings it was saved with (see its run's config.json): {first_line(e)}"
        ) from None
    with open(os.path.join(folder, "meta.json")) as f:
        return json.load(f)


def load_run_state(folder):
    """The step folder's run_state.th, or None where it has none (saved before it was kept)."""
    if not os.path.isfile(os.path.join(folder, "run_state.th")):
        return None
    return _load(folder, "run_state.th")


def load_buffer(folder, buffer):
    """Fill `buffer` from the step folder's buffer.th; -> False when it has none."""
    path = os.path.join(folder, BUFFER)
    if not os.path.isfile(path):
        return False
    try:
        # Mapped, not read: the episodes are copied into the buffer from the file's pages, which
        # the system can drop, so a resume needs no second buffer's worth of memory.
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        buffer.load_state_dict(state)
    except (ValueError, KeyError) as e:
        raise ConfigError(f"checkpoint {folder!r}: buffer.th does not fit this run: {e}") from None
    except Exception as e:  # torch raises many types for damaged files
        raise ConfigError(f"checkpoint {folder!r}: buffer.th cannot be loaded: {first_line(e)}") from None
    return True
