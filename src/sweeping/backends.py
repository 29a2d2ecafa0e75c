"""Running a sweep's commands: a local pool of processes, or Ray."""

import concurrent.futures
import functools
import os
import signal
import subprocess
import threading

from config import ROOT
from utils.errors import ConfigError
from utils.processes import SAVE_AND_STOP


def run_env():
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # runs share the cores
    # main.py ends the run (as INTERRUPTED) when this process dies, however it dies; set there,
    # not in a preexec_fn, which is unsafe in this threaded process
    env["MARL_PARENT_PID"] = str(os.getpid())
    return env


class LocalRuns:
    """The local backend's runs, each a subprocess in its own session: Ctrl-C reaches the sweep
    only, and the sweep passes one SIGINT to each running run and starts no more (SIGUSR1: passes
    SIGUSR1, and each run saves a checkpoint before it stops)."""

    def __init__(self):
        self.lock = threading.RLock()  # stop() may run in a signal handler of the main thread
        self.procs = set()
        self.stopping = False

    def run(self, cmd, log, check=None):
        """-> exit code, None when the sweep was stopped before this run started, or the reason
        check() gives for not starting it (a str)."""
        why = check() if check else None
        if why:
            return why
        with self.lock:
            if self.stopping:
                return None
            with open(log, "w") as f:
                p = subprocess.Popen(
                    cmd,
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    env=run_env(),
                    cwd=ROOT,
                    start_new_session=True,
                )
            self.procs.add(p)
        try:
            return p.wait()
        finally:
            with self.lock:
                self.procs.discard(p)

    def stop(self, sig=signal.SIGINT):
        with self.lock:
            self.stopping = True
            for p in self.procs:
                if p.poll() is None:
                    p.send_signal(sig)


def _ignored(signum, frame):
    pass


def run_local(jobs, workers, check=None):
    """Runs the jobs, `workers` at a time; yields ((run, log), exit code or None or a str: see
    LocalRuns.run). check(run), just before a run starts, may give a reason not to start it."""
    # A sweep started in the background of a script has SIGINT ignored, and a run would inherit
    # that until its main() listens again: a stop sent during its imports (seconds) was lost and
    # the run trained on. A handler that does nothing keeps the sweep deaf to the terminal's
    # Ctrl-C as before, while its runs start with SIGINT's default (exec resets handlers).
    deaf = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if deaf:
        signal.signal(signal.SIGINT, _ignored)
    runs = LocalRuns()
    save_and_stop = signal.signal(SAVE_AND_STOP, lambda signum, frame: runs.stop(SAVE_AND_STOP))
    try:
        yield from _run_local(runs, jobs, workers, check)
    finally:
        signal.signal(SAVE_AND_STOP, save_and_stop)
        if deaf:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_local(runs, jobs, workers, check):
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    futures = {
        pool.submit(runs.run, cmd, log, functools.partial(check, run) if check else None): (run, log)
        for run, cmd, log in jobs
    }
    pending = set(futures)
    interrupted = False
    try:
        while pending:
            try:
                done, pending = concurrent.futures.wait(pending, return_when="FIRST_COMPLETED")
            except KeyboardInterrupt:
                # A second Ctrl-C while the runs wind down sends SIGTERM (also recorded as
                # INTERRUPTED) to any that are still going.
                runs.stop(signal.SIGTERM if interrupted else signal.SIGINT)
                interrupted = True
                continue
            for fut in done:
                yield futures[fut], fut.result()
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    if interrupted or runs.stopping:  # SIGUSR1 too: the sweep then says what did not start
        raise KeyboardInterrupt


def run_ray(jobs, address):
    try:
        import ray
    except ImportError:
        raise ConfigError("backend=ray needs Ray: pip install 'ray>=2.40'") from None
    ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)

    def ray_run(cmd, log, cwd):
        # Defined here so Ray ships it by value: workers need not import this module. Runs on a
        # cluster need the repository at the same path on every node.
        import os as _os
        import signal as _signal
        import subprocess as _subprocess

        env = dict(_os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        env["MARL_PARENT_PID"] = str(_os.getpid())  # as locally: the run ends if its Ray worker dies
        _os.makedirs(_os.path.dirname(log), exist_ok=True)
        with open(log, "w") as f:
            p = _subprocess.Popen(cmd, stdout=f, stderr=_subprocess.STDOUT, env=env, cwd=cwd)
            try:
                return p.wait()
            except KeyboardInterrupt:  # ray.cancel: the run ends INTERRUPTED, not killed
                p.send_signal(_signal.SIGINT)
                return p.wait()

    remote = ray.remote(num_cpus=1)(ray_run)
    interrupted = False
    # a Ray task cannot be passed a signal of our choosing: SIGUSR1 stops its runs as Ctrl-C does
    save_and_stop = signal.signal(SAVE_AND_STOP, signal.default_int_handler)
    try:
        refs = {remote.remote(cmd, log, ROOT): (run, log) for run, cmd, log in jobs}
        pending = list(refs)
        while pending:
            try:
                ready, pending = ray.wait(pending, num_returns=1)
            except KeyboardInterrupt:
                interrupted = True
                for ref in pending:
                    ray.cancel(ref)  # queued: never start; running: interrupted (above)
                continue
            for ref in ready:
                try:
                    rc = ray.get(ref)
                except (ray.exceptions.TaskCancelledError, ray.exceptions.RayTaskError):
                    rc = None if interrupted else 1
                yield refs[ref], rc
    finally:
        signal.signal(SAVE_AND_STOP, save_and_stop)
        ray.shutdown()
    if interrupted:
        raise KeyboardInterrupt


# How a stopped run ends: 130/143/138 from main.py (its record says INTERRUPTED; 138: SIGUSR1,
# after saving a checkpoint), or killed by the signal's default action before main.py listened
# (during its imports: no record yet).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, SAVE_AND_STOP)
INTERRUPTED_CODES = tuple(128 + s for s in STOP_SIGNALS) + tuple(-s for s in STOP_SIGNALS)


def exit_reason(rc):
    """A failed run's exit code in words. A run killed by a signal leaves its record RUNNING
    (read back as DIED) and its newest checkpoint, from which the sweep goes on when run again."""
    if rc >= 0:
        return f"exit {rc}"
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        name = f"signal {-rc}"
    oom = -rc == signal.SIGKILL
    why = " (the kernel's out-of-memory killer, if nobody sent it: see dmesg)" if oom else ""
    return f"killed by {name}{why}; run the sweep again to go on from its newest checkpoint"
