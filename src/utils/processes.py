"""Processes that end with their parent."""

import os
import sys


def signal_on_parent_death(sig, parent_pid):
    """Ask Linux to send `sig` to this process when its parent dies, however it dies (kill -9, the
    OOM killer). -> False when the parent is already gone (the request came too late)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, sig)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    return os.getppid() == parent_pid
