from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import traceback
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from envs import REGISTRY as env_REGISTRY
from runners.base import RunnerBase, env_data
from utils.processes import signal_on_parent_death
from utils.seeding import env_seed

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch
    from utils.logger import Logger


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


def env_command(env, cmd, data, extra=()):
    """What an env answers to one runner command; `extra`: the step fields recorded."""
    if cmd == "step":
        reward, terminated, info = env.step(data)
        out = env_data(env, extra)
        out.update(
            reward=np.asarray(reward, dtype=np.float64),  # a float, or one per agent
            terminated=terminated,
            info=info,
            indi_terminated=np.asarray(env.get_indi_terminated()),
        )
        return out
    if cmd == "reset":
        env.reset()
        return env_data(env, extra)
    if cmd == "get_env_info":
        return env.get_env_info()
    if cmd == "get_rng_state":
        return env.get_rng_state()
    if cmd == "set_rng_state":
        return env.set_rng_state(data)
    if cmd == "save_replay":
        return env.save_replay()
    if cmd == "close":
        env.close()
        return None
    raise ValueError(f"unknown worker command {cmd!r}")


STACKED = ("step", "reset")  # commands whose replies travel as one array per field


def stack_replies(replies):
    """Per-env step/reset replies -> {field: array with the envs along axis 0}, infos as a list.
    A few arrays cross a pipe much faster than many small ones."""
    out = {k: np.stack([r[k] for r in replies]) for k in replies[0] if k != "info"}
    if "info" in replies[0]:
        out["info"] = [r["info"] for r in replies]
    return out


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
    try:
        envs = [env_REGISTRY[env_name](**a) for a in env_args_list]
        while True:
            cmd, items = next_message(remote, parent_pid)
            replies = [env_command(envs[j], cmd, data, extra) for j, data in items]
            remote.send(("ok", stack_replies(replies) if cmd in STACKED else replies))
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
    than cores only add switches and pipe traffic."""
    n, w = args.batch_size_run, args.env_workers
    return min(n, usable_cores()) if w is None else w


def env_args_for(args, i):
    """Env i's arguments: the run's, with env i's own seed when one is given."""
    env_args = dict(args.env_args)
    if env_args.get("seed") is not None:
        env_args["seed"] = env_seed(env_args["seed"], i)
    return env_args


class ParallelRunner(RunnerBase):
    """batch_size_run envs spread over env_workers processes; each run() plays one episode per
    env, and the controller acts for all of them in one forward pass."""

    replayable_episodes = True

    def __init__(self, args: SimpleNamespace, logger: Logger) -> None:
        super().__init__(args, logger)
        self.batch_size = args.batch_size_run
        self._start_envs(args)
        self.env_info = self._call(0, "get_env_info")
        self.episode_limit = self.env_info["episode_limit"]
        self.t = 0
        self.closed = False

    def _start_envs(self, args):
        n_workers = worker_count(args)
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
        per_worker = {}
        for i, data in items:
            w, j = self.owner[i]
            per_worker.setdefault(w, []).append((j, data))
        for w, msgs in per_worker.items():
            self._send(w, cmd, msgs)
        parts = [self._recv(w) for w in per_worker]
        return concat(parts) if cmd in STACKED else [r for part in parts for r in part]

    def _call(self, i, cmd, data=None):
        assert cmd not in STACKED
        return self._exchange(cmd, [(i, data)])[0]

    # --- runner interface -------------------------------------------------------------------
    def get_env_info(self) -> dict:
        return self.env_info

    def env_rng_states(self) -> list:
        return self._exchange("get_rng_state", [(i, None) for i in range(self.batch_size)])

    def set_env_rng_states(self, states: list) -> None:
        self._exchange("set_rng_state", list(enumerate(states)))

    def save_replay(self) -> list[str | None]:
        """-> the path each env wrote (None where it writes none)."""
        return self._exchange("save_replay", [(i, None) for i in range(self.batch_size)])

    def close_env(self) -> None:
        if self.closed:
            return
        self.closed = True
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

    def _reset(self):
        batch = self.new_batch()
        batch.update(self._exchange("reset", [(i, None) for i in range(self.batch_size)]), ts=0)
        self.t = 0
        return batch

    def run(self, test_mode: bool = False) -> EpisodeBatch:
        batch = self._reset()
        n = self.batch_size
        self.start_episode(batch)
        terminated = [False] * n
        active = list(range(n))  # envs whose episode needs an action at this step
        episode_returns = [0.0] * n
        episode_lengths = [0] * n
        final_infos = [{} for _ in range(n)]

        while True:
            actions = self.mac.select_actions(
                batch, t_ep=self.t, t_env=self.t_env, bs=active, test_mode=test_mode
            )
            batch.update({"actions": actions}, bs=active, ts=self.t, mark_filled=False)
            actions = self.mac.env_actions(actions, batch, self.t, active).cpu().numpy()
            # Envs that just terminated got their extra action above; now they drop out.
            steps = [(i, actions[j]) for j, i in enumerate(active) if not terminated[i]]
            active = [i for i, _ in steps]
            if not active:
                break
            r = self._exchange("step", steps)
            for k, i in enumerate(active):
                episode_returns[i] = episode_returns[i] + r["reward"][k]
                episode_lengths[i] += 1
                if r["terminated"][k]:
                    terminated[i] = True
                    final_infos[i] = r["info"][k]
            cut = np.array([info.get("episode_limit", False) for info in r["info"]], dtype=bool)
            post = {
                "reward": r["reward"].reshape(len(active), -1),
                "terminated": (r["terminated"].astype(bool) & ~cut)[:, None],
                "indi_terminated": r["indi_terminated"],
            }
            batch.update(post, bs=active, ts=self.t, mark_filled=False)
            self.t += 1
            batch.update({k: r[k] for k in self.pre_fields}, bs=active, ts=self.t)

        if not test_mode:
            self.t_env += sum(episode_lengths)
        for i in range(n):
            ret = episode_returns[i]
            self.record_episode(
                ret.tolist() if np.ndim(ret) else float(ret), episode_lengths[i], final_infos[i], test_mode
            )
        self.maybe_log(test_mode, getattr(self.mac.action_selector, "epsilon", None))
        return batch
