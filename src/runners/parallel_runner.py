from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import traceback

import numpy as np

from envs import REGISTRY as env_REGISTRY
from runners.base import STACKED, RunnerBase, answer_here, env_args_for
from utils.processes import SAVE_AND_STOP, signal_on_parent_death


class EnvWorkerError(RuntimeError):
    """An env worker process failed or died."""


def die_with_parent(parent_pid):
    """Killed when the parent dies, however it dies: forked workers inherit each other's pipe
    ends, so the pipe alone may never show EOF."""
    if not signal_on_parent_death(signal.SIGKILL, parent_pid):
        os._exit(1)


def next_message(remote, parent_pid):
    """The next message; exits when the parent is gone (where PR_SET_PDEATHSIG is missing)."""
    while not remote.poll(1.0):
        if os.getppid() != parent_pid:
            os._exit(1)
    return remote.recv()


def concat(parts):
    return {
        k: [x for p in parts for x in p[k]] if k == "info" else np.concatenate([p[k] for p in parts])
        for k in parts[0]
    }


def env_worker(remote, env_name, env_args_list, parent_pid=None, extra=()):
    """Owns a group of envs; answers (command, [(env, data), ...]) with ("ok", [result, ...]) in
    that order, or ("error", text)."""
    parent_pid = parent_pid or os.getppid()
    die_with_parent(parent_pid)
    # sent to the whole process group (a cluster's warning), it is the run's to answer: it saves
    # and then closes its workers
    signal.signal(SAVE_AND_STOP, signal.SIG_IGN)
    try:
        envs = [env_REGISTRY[env_name](**a) for a in env_args_list]
        while True:
            cmd, items = next_message(remote, parent_pid)
            remote.send(("ok", answer_here(envs, cmd, items, extra)))
            if cmd == "close":
                break
    except KeyboardInterrupt:
        pass
    except Exception:
        try:
            remote.send(("error", traceback.format_exc()))
        except (BrokenPipeError, OSError):
            pass
    finally:
        remote.close()


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def worker_count(args):
    """env_workers, or by default one process per core, at most one per env: more processes
    than cores only add switches and pipe traffic. 0: the envs live in this process."""
    n, w = args.batch_size_run, args.env_workers
    return min(n, usable_cores()) if w is None else w


class ParallelRunner(RunnerBase):
    """batch_size_run envs spread over env_workers processes; each run() plays one episode per
    env, and the controller acts for all of them in one forward pass. With env_workers=0 the
    same envs answer the same commands in this process: the same episodes without processes or
    pipes, faster where the cores are shared with other runs (and a setting a resumed run may
    change, unlike the runner)."""

    replayable_episodes = True

    def _start_envs(self, args):
        n_workers = worker_count(args)
        self.local_envs = None
        if n_workers == 0:
            make = env_REGISTRY[args.env]
            self.local_envs = [make(**env_args_for(args, i)) for i in range(self.batch_size)]
            self.groups, self.parent_conns, self.ps = [], [], []
            return
        # Contiguous groups: worker w owns envs groups[w]; env i is (owner[i], slot[i]).
        self.groups = [g.tolist() for g in np.array_split(np.arange(self.batch_size), n_workers)]
        self.owner = {i: (w, j) for w, g in enumerate(self.groups) for j, i in enumerate(g)}
        # fork is fast and safe here: workers never touch torch.
        ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        self.parent_conns, self.ps = [], []
        for group in self.groups:
            parent, child = ctx.Pipe()
            env_args = [env_args_for(args, i) for i in group]
            p = ctx.Process(
                target=env_worker,
                args=(child, args.env, env_args, os.getpid(), self.step_fields),
                daemon=True,
            )
            p.start()
            child.close()  # so that a dead worker shows as EOF, not a hang
            self.parent_conns.append(parent)
            self.ps.append(p)

    # --- messaging --------------------------------------------------------------------------
    def _recv(self, w, timeout=None):
        """Worker w's reply; timeout (seconds): give up on a worker that does not answer."""
        conn, p = self.parent_conns[w], self.ps[w]
        waited = 0.0
        while not conn.poll(1.0):
            waited += 1.0
            if not p.is_alive():
                raise EnvWorkerError(f"env worker {w} (pid {p.pid}) died with exit code {p.exitcode}")
            if timeout is not None and waited >= timeout:
                raise EnvWorkerError(f"env worker {w} (pid {p.pid}) did not answer in {timeout:.0f} s")
        try:
            status, data = conn.recv()
        except (EOFError, ConnectionResetError):
            p.join(timeout=1.0)
            raise EnvWorkerError(f"env worker {w} (pid {p.pid}) died with exit code {p.exitcode}") from None
        if status == "error":
            raise EnvWorkerError(f"env worker {w} (envs {self.groups[w]}) failed:\n{data}")
        return data

    def _send(self, w, cmd, items):
        try:
            self.parent_conns[w].send((cmd, items))
        except (BrokenPipeError, OSError):
            raise EnvWorkerError(
                f"env worker {w} (pid {self.ps[w].pid}) is gone (exit code {self.ps[w].exitcode})"
            ) from None

    def _exchange(self, cmd, items):
        """[(env index, data), ...] in increasing env order -> the envs' replies in that order
        (for step and reset: stacked, see stack_replies); every worker involved works at once.
        Workers own contiguous groups of envs, so their replies concatenate in env order."""
        if self.local_envs is not None:
            return answer_here(self.local_envs, cmd, items, self.step_fields)
        per_worker = {}
        for i, data in items:
            w, j = self.owner[i]
            per_worker.setdefault(w, []).append((j, data))
        for w, msgs in per_worker.items():
            self._send(w, cmd, msgs)
        parts = [self._recv(w) for w in per_worker]
        return concat(parts) if cmd in STACKED else [r for part in parts for r in part]

    # --- runner interface -------------------------------------------------------------------
    def close_env(self) -> None:
        if self.closed:
            return
        self.closed = True
        for env in self.local_envs or ():
            env.close()
        for w, p in enumerate(self.ps):
            if p.is_alive():
                try:  # bounded: after an interrupt a worker may be anywhere in its exchange
                    self._send(w, "close", [(j, None) for j in range(len(self.groups[w]))])
                    self._recv(w, timeout=5.0)
                except (EnvWorkerError, EOFError, OSError):
                    pass
        for p in self.ps:
            p.join(timeout=5.0)
            if p.is_alive():
                p.terminate()
                p.join(timeout=1.0)
