"""Processes that end with their parent, and the signals that stop them."""

import os
import signal
import sys
import time

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # 141: what a shell reports for a command SIGPIPE killed


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


class Interrupted(KeyboardInterrupt):
    """SIGTERM (a cluster's time limit, kill) or SIGINT: handled as Ctrl-C is, so the record says
    INTERRUPTED instead of staying RUNNING."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


_received = None  # the last signal raise_interrupt turned into Interrupted
_raised_at = None
# A signal repeated within this many seconds is the same request: a process killed with -9 sends
# its children's death signal once per thread the child is passed to as it dies (ms apart), and a
# second exception would land inside Sacred's handling of the first and cost the record its end.
REPEAT_S = 1.0
_clock = time.monotonic


def raise_interrupt(signum, frame):
    global _received, _raised_at
    now = _clock()
    if _raised_at is not None and now - _raised_at < REPEAT_S:
        return  # the first is already on its way; raise_if_interrupted backs it up
    _received, _raised_at = signum, now
    raise Interrupted(signum)


def interrupt_received():
    """-> the signal number of the last interrupt, or None."""
    return _received


def raise_if_interrupted():
    """Raise again an interrupt that was lost on the way: its exception can land in library code
    with a bare `except:`, or in a finaliser, where Python ignores exceptions. The training loop
    asks every iteration, so a run never trains on after one."""
    if _received is not None:
        raise Interrupted(_received)


# SIGUSR1 asks a run to save a checkpoint at the end of the step under way and stop (a cluster's
# warning before its time limit, a sweep stopped between sessions): nothing is lost.
SAVE_AND_STOP = signal.SIGUSR1
_stop_requested = None


def request_save_and_stop(signum, frame):
    global _stop_requested
    _stop_requested = signum


def save_and_stop_requested():
    """-> the signal number of a pending save-and-stop request, or None."""
    return _stop_requested


def forget_interrupts():
    global _received, _raised_at, _stop_requested
    _received = _raised_at = _stop_requested = None


def exit_quietly_on_closed_pipe(main):
    """Run `main()` -> its exit code; where its reader went away (`... | head`), end as a shell
    command does (code 141, no traceback)."""
    try:
        try:
            code = main()
        except SystemExit as stop:  # argparse's --help and its errors
            code = stop.code
        sys.stdout.flush()  # a buffered listing fails here, not at exit
        return code
    except BrokenPipeError:
        # later flushes (at exit) would raise again: point stdout at nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
