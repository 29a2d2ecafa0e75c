"""Which code a run ran on, for its record: a result is only comparable with runs of the same
simulator and learners, and sweeps span sessions (and commits)."""

import os
import subprocess

# Set where the code runs from a copy without git's history (a remote machine given the tree):
# the commit the copy was made from.
COMMIT_VARIABLE = "MARL_CODE_COMMIT"


def _git(folder, *args):
    out = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=10, check=True)
    return out.stdout.strip()


def code_version(folder=None):
    """-> {"commit": sha or None, "dirty": bool or None}: the checkout's HEAD and whether tracked
    files differ from it. Falls back on $MARL_CODE_COMMIT (dirty unknown) outside a git checkout."""
    folder = folder or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        commit = _git(folder, "rev-parse", "HEAD")
        dirty = bool(_git(folder, "status", "--porcelain", "--untracked-files=no"))
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": os.environ.get(COMMIT_VARIABLE) or None, "dirty": None}
