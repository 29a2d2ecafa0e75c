"""Files that survive faults: writes that cannot truncate what is there, full-disk errors in
one line, and Sacred records left RUNNING by a process that died told apart."""

import errno
import os
import socket
import tempfile
from datetime import UTC, datetime

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# A RUNNING record whose heartbeat (every 10 s) is older than this belongs to a dead process.
STALE_HEARTBEAT_S = 600


def atomic_write(path, data):
    """Write bytes to `path` through a temporary file in the same folder: afterwards the file
    holds either its old contents or the new ones, whatever fails in between."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename is None:
            e.filename = path
        raise


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def is_disk_full(e):
    return isinstance(e, OSError) and e.errno in DISK_FULL


def disk_full_message(e):
    return f"no space left on the device holding {e.filename or 'the results folder'}"


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_status(run):
    """The status of a run.json dict, with "DIED" for a RUNNING record whose process is gone
    (killed with -9, out of memory, machine rebooted)."""
    status = run.get("status", "UNKNOWN")
    if status != "RUNNING":
        return status
    host = run.get("host") or {}
    pid = host.get("pid")
    if pid is not None and host.get("hostname") == socket.gethostname():
        return "RUNNING" if pid_alive(pid) else "DIED"
    beat = run.get("heartbeat") or run.get("start_time")
    if beat:
        try:
            t = datetime.fromisoformat(beat)
        except ValueError:
            return status
        t = t if t.tzinfo else t.replace(tzinfo=UTC)  # Sacred writes UTC
        if (datetime.now(UTC) - t).total_seconds() > STALE_HEARTBEAT_S:
            return "DIED"
    return status
