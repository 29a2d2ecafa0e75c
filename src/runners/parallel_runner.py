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


def env_command(env, cmd, data):
    """What an env answers to one runner command."""
    if cmd == "step":
        reward, terminated, info = env.step(data)
        out = env_data(env)
        out.update(
            reward=reward,
            terminated=terminated,
            info=info,
            indi_terminated=np.asarray(env.get_indi_terminated()),
        )
        return out
    if cmd == "reset":
        env.reset()
        return env_data(env)
    if cmd == "get_env_info":
        return env.get_env_info()
    if cmd == "save_replay":
        return env.save_replay()
    if cmd == "close":
        env.close()
        return None
    raise ValueError(f"unknown worker command {cmd!r}")


def env_worker(remote, env_name, env_args, parent_pid=None):
    """Owns one env; answers (command, data) messages with ("ok", result) or ("error", text)."""
    parent_pid = parent_pid or os.getppid()
    die_with_parent(parent_pid)
    try:
        env = env_REGISTRY[env_name](**env_args)
        while True:
            cmd, data = next_message(remote, parent_pid)
            remote.send(("ok", env_command(env, cmd, data)))
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


def env_args_for(args, i):
    """Env i's arguments: the run's, with the seed offset by i when one is given."""
    env_args = dict(args.env_args)
    if env_args.get("seed") is not None:
        env_args["seed"] = env_args["seed"] + i
    return env_args


class ParallelRunner(RunnerBase):
    """batch_size_run envs, one worker process each; each run() plays one episode per env, and
    the controller acts for all of them in one forward pass."""

    def __init__(self, args: SimpleNamespace, logger: Logger) -> None:
        super().__init__(args, logger)
        self.batch_size = args.batch_size_run
        self._start_envs(args)
        self.env_info = self._call(0, "get_env_info")
        self.episode_limit = self.env_info["episode_limit"]
        self.t = 0
        self.closed = False

    def _start_envs(self, args):
        # fork is fast and safe here: workers never touch torch.
        ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        self.parent_conns, self.ps = [], []
        for i in range(self.batch_size):
            parent, child = ctx.Pipe()
            p = ctx.Process(
                target=env_worker, args=(child, args.env, env_args_for(args, i), os.getpid()), daemon=True
            )
            p.start()
            child.close()  # so that a dead worker shows as EOF, not a hang
            self.parent_conns.append(parent)
            self.ps.append(p)

    # --- messaging --------------------------------------------------------------------------
    def _recv(self, i):
        conn, p = self.parent_conns[i], self.ps[i]
        while not conn.poll(1.0):
            if not p.is_alive():
                raise EnvWorkerError(f"env worker {i} (pid {p.pid}) died with exit code {p.exitcode}")
        try:
            status, data = conn.recv()
        except (EOFError, ConnectionResetError):
            p.join(timeout=1.0)
            raise EnvWorkerError(f"env worker {i} (pid {p.pid}) died with exit code {p.exitcode}") from None
        if status == "error":
            raise EnvWorkerError(f"env worker {i} failed:\n{data}")
        return data

    def _send(self, i, cmd, data=None):
        try:
            self.parent_conns[i].send((cmd, data))
        except (BrokenPipeError, OSError):
            raise EnvWorkerError(
                f"env worker {i} (pid {self.ps[i].pid}) is gone (exit code {self.ps[i].exitcode})"
            ) from None

    def _call(self, i, cmd, data=None):
        self._send(i, cmd, data)
        return self._recv(i)

    # --- runner interface -------------------------------------------------------------------
    def get_env_info(self) -> dict:
        return self.env_info

    def save_replay(self) -> list[str | None]:
        """-> the path each env wrote (None where it writes none)."""
        return [self._call(i, "save_replay") for i in range(self.batch_size)]

    def close_env(self) -> None:
        if self.closed:
            return
        self.closed = True
        for i, p in enumerate(self.ps):
            if p.is_alive():
                try:
                    self._call(i, "close")
                except EnvWorkerError:
                    pass
        for p in self.ps:
            p.join(timeout=5.0)
            if p.is_alive():
                p.terminate()
                p.join(timeout=1.0)

    def _reset(self):
        batch = self.new_batch()
        for i in range(self.batch_size):
            self._send(i, "reset")
        replies = [self._recv(i) for i in range(self.batch_size)]
        batch.update({k: np.stack([r[k] for r in replies]) for k in replies[0]}, ts=0)
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
            stepped = [i for i in active if not terminated[i]]
            for j, i in enumerate(active):
                if not terminated[i]:
                    self._send(i, "step", actions[j])
            # Envs that just terminated get their extra action above, then drop out.
            active = stepped
            if not active:
                break
            replies = [self._recv(i) for i in active]
            post = {"reward": [], "terminated": [], "indi_terminated": []}
            for i, r in zip(active, replies, strict=True):
                episode_returns[i] = episode_returns[i] + np.asarray(r["reward"], dtype=np.float64)
                episode_lengths[i] += 1
                if r["terminated"]:
                    terminated[i] = True
                    final_infos[i] = r["info"]
                post["reward"].append(np.asarray(r["reward"], dtype=np.float32).reshape(-1))
                post["terminated"].append([r["terminated"] and not r["info"].get("episode_limit", False)])
                post["indi_terminated"].append(r["indi_terminated"])
            batch.update(post, bs=active, ts=self.t, mark_filled=False)
            self.t += 1
            batch.update(
                {k: np.stack([r[k] for r in replies]) for k in ("state", "avail_actions", "obs")},
                bs=active,
                ts=self.t,
            )

        if not test_mode:
            self.t_env += sum(episode_lengths)
        for i in range(n):
            ret = episode_returns[i]
            self.record_episode(
                ret.tolist() if np.ndim(ret) else float(ret), episode_lengths[i], final_infos[i], test_mode
            )
        self.maybe_log(test_mode, getattr(self.mac.action_selector, "epsilon", None))
        return batch
