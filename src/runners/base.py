from __future__ import annotations

import numbers
from functools import partial
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from components.episode_buffer import PRE_FIELDS, EpisodeBatch
from utils.seeding import env_seed

if TYPE_CHECKING:  # annotations only
    from controllers.basic_controller import BasicMAC
    from utils.logger import Logger


def env_data(env, extra=()):
    """What the runners write before each transition: PRE_FIELDS and the step fields `extra`."""
    # SMAC-style envs return lists; one array each keeps the batch writes on the fast path
    out = {
        "state": np.asarray(env.get_state()),
        "avail_actions": np.asarray(env.get_avail_actions()),
        "obs": np.asarray(env.get_obs()),
    }
    if extra:
        out.update(env.get_step_fields(extra))
    return out


def env_args_for(args, i):
    """Env i's arguments: the run's, with env i's own seed when one is given."""
    env_args = dict(args.env_args)
    if env_args.get("seed") is not None:
        env_args["seed"] = env_seed(env_args["seed"], i)
    return env_args


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
    raise ValueError(f"unknown env command {cmd!r}")


STACKED = ("step", "reset")  # commands whose replies come as one array per field


def answer_here(envs, cmd, items, extra=()):
    """A runner command played on envs of this process: what workers answer through their pipes."""
    replies = [env_command(envs[i], cmd, data, extra) for i, data in items]
    return stack_replies(replies) if cmd in STACKED else replies


def stack_replies(replies):
    """Per-env step/reset replies -> {field: array with the envs along axis 0}, infos as a list.
    A few arrays cross a pipe much faster than many small ones."""
    out = {k: np.stack([r[k] for r in replies]) for k in replies[0] if k != "info"}
    if "info" in replies[0]:
        out["info"] = [r["info"] for r in replies]
    return out


def transition_fields(reward, ended, cut, indi_terminated):
    """What the batch keeps of one step of n envs (NumPy arrays or tensors, envs along axis 0):
    reward [n, 1 or N], terminated [n, 1] and indi_terminated [n, N]. The time-limit rule lives
    here: an episode cut by its limit (`cut`) is not terminated, so its last step bootstraps."""
    return {
        "reward": reward.reshape(len(reward), -1),
        "terminated": (ended & ~cut)[:, None],
        "indi_terminated": indi_terminated,
    }


class RunnerBase:
    """Plays batch_size episodes at once, one per env, with the one episode loop (run). What
    tells the runners apart is where their envs live: _start_envs builds them and _exchange
    sends each a command (env_command) and gathers the replies. Per-episode returns and info
    sums are logged as <prefix>return_mean, <prefix><key>_mean, ... (with individual rewards
    also per agent and, in competitive envs, per team: <prefix><team>_return_mean)."""

    # each env plays one episode of a run() call from the state env_rng_states() gives just
    # before it, alone, so one episode can be played again from that state (a buffer's log)
    replayable_episodes = False

    def __init__(self, args: SimpleNamespace, logger: Logger) -> None:
        self.args = args
        self.logger = logger
        self.t_env = 0
        self.train_returns, self.test_returns = [], []
        self.train_stats, self.test_stats = {}, {}
        self.log_train_stats_t = -1000000
        # the env's extra per-step fields this run records (assembly sets args.step_fields)
        self.step_fields = tuple(getattr(args, "step_fields", ()))
        self.pre_fields = PRE_FIELDS + self.step_fields
        self.batch_size = self.env_count(args)
        self.t = 0
        self.closed = False
        self._start_envs(args)
        self.env_info = self._call(0, "get_env_info")
        self.episode_limit = self.env_info["episode_limit"]

    # --- where the envs live: each runner's own ---------------------------------------------
    def env_count(self, args: SimpleNamespace) -> int:
        """How many envs (episodes a run() call plays)."""
        return args.batch_size_run

    def _start_envs(self, args: SimpleNamespace) -> None:
        """Build batch_size envs."""
        raise NotImplementedError

    def _exchange(self, cmd: str, items: list) -> dict | list:
        """[(env index, data), ...] in increasing env order -> the envs' replies to `cmd` in that
        order (for step and reset: stacked, see stack_replies)."""
        raise NotImplementedError

    def close_env(self) -> None:
        raise NotImplementedError

    def _call(self, i, cmd, data=None):
        assert cmd not in STACKED
        return self._exchange(cmd, [(i, data)])[0]

    def get_env_info(self) -> dict:
        return self.env_info

    def env_rng_states(self) -> list:
        return self._exchange("get_rng_state", [(i, None) for i in range(self.batch_size)])

    def set_env_rng_states(self, states: list) -> None:
        self._exchange("set_rng_state", list(enumerate(states)))

    def save_replay(self) -> list[str | None]:
        """-> the path each env wrote (None where it writes none)."""
        return self._exchange("save_replay", [(i, None) for i in range(self.batch_size)])

    def setup(self, scheme: dict, groups: dict[str, int], preprocess: dict, mac: BasicMAC) -> None:
        self.batch_scheme, self.batch_groups = scheme, groups  # what new_batch builds
        self.new_batch = partial(
            EpisodeBatch,
            scheme,
            groups,
            self.batch_size,
            self.episode_limit + 1,
            preprocess=preprocess,
            device=self.args.device,
        )
        self.mac = mac
        self.teams = self.get_env_info().get("teams")  # competitive envs: {team: [agent ids]}

    def start_episode(self, batch: EpisodeBatch) -> None:
        """Fresh controller state for `batch`; what the controller drew for the episode (e.g. a
        sub-policy per agent) is stored with it."""
        self.mac.init_hidden(batch_size=self.batch_size)
        data = self.mac.episode_data()
        if data:
            batch.update(data, mark_filled=False)

    # --- the episode loop -------------------------------------------------------------------
    def run(self, test_mode: bool = False) -> EpisodeBatch:
        """One episode in every env: the batch of them. Each episode's steps are written at
        0..T-1 (data before the step, action, reward, ...), its last data at T with one more
        action, so that `actions` is defined wherever the batch is filled."""
        batch = self.new_batch()
        n = self.batch_size
        batch.update(self._exchange("reset", [(i, None) for i in range(n)]), ts=0)
        self.t = 0
        self.start_episode(batch)
        terminated = [False] * n
        active = list(range(n))  # envs whose episode needs an action at this step
        episode_returns = [0.0] * n
        episode_lengths = [0] * n
        final_infos = [{} for _ in range(n)]
        rows = slice(None)  # the active envs' rows: a slice while all are, whose reads are views

        while True:
            actions = self.mac.select_actions(
                batch, t_ep=self.t, t_env=self.t_env, bs=rows, test_mode=test_mode
            )
            batch.update({"actions": actions}, bs=rows, ts=self.t, mark_filled=False)
            actions = self.mac.env_actions(actions, batch, self.t, rows).cpu().numpy()
            # Envs that just terminated got their extra action above; now they drop out.
            steps = [(i, actions[j]) for j, i in enumerate(active) if not terminated[i]]
            active = [i for i, _ in steps]
            if not active:
                break
            rows = slice(None) if len(active) == n else active
            r = self._exchange("step", steps)
            for k, i in enumerate(active):
                episode_returns[i] = episode_returns[i] + r["reward"][k]
                episode_lengths[i] += 1
                if r["terminated"][k]:
                    terminated[i] = True
                    final_infos[i] = r["info"][k]
            cut = np.array([info.get("episode_limit", False) for info in r["info"]], dtype=bool)
            post = transition_fields(r["reward"], r["terminated"].astype(bool), cut, r["indi_terminated"])
            batch.update(post, bs=rows, ts=self.t, mark_filled=False)
            self.t += 1
            batch.update({k: r[k] for k in self.pre_fields}, bs=rows, ts=self.t)

        if not test_mode:
            self.t_env += sum(episode_lengths)
        for i in range(n):
            ret = episode_returns[i]
            self.record_episode(
                ret.tolist() if np.ndim(ret) else float(ret), episode_lengths[i], final_infos[i], test_mode
            )
        self.maybe_log(test_mode, getattr(self.mac.action_selector, "epsilon", None))
        return batch

    def state_dict(self) -> dict:
        """What a checkpoint keeps of the runner besides t_env: its envs' random states (None for
        an env that cannot give one) and the training episodes' statistics not yet logged."""
        return {
            "envs": self.env_rng_states(),
            "log_train_stats_t": self.log_train_stats_t,
            "train_returns": list(self.train_returns),
            "train_stats": dict(self.train_stats),
        }

    def load_state_dict(self, state: dict) -> list[str]:
        """The state of a run with the same settings (so the same envs). -> why the coming
        episodes differ from the uninterrupted run's ([] when they do not)."""
        self.log_train_stats_t = state["log_train_stats_t"]
        self.train_returns[:] = state["train_returns"]
        self.train_stats.clear()
        self.train_stats.update(state["train_stats"])
        envs = state["envs"]
        if any(s is None for s in envs):
            return [f"{self.args.env} cannot save its random state"]
        self.set_env_rng_states(envs)
        return []

    def record_episode(self, episode_return: float | list, length: int, info: dict, test_mode: bool) -> None:
        stats = self.test_stats if test_mode else self.train_stats
        returns = self.test_returns if test_mode else self.train_returns
        for k, v in info.items():
            if isinstance(v, (numbers.Number, np.number)):
                stats[k] = stats.get(k, 0) + float(v)
        stats["n_episodes"] = stats.get("n_episodes", 0) + 1
        stats["ep_length"] = stats.get("ep_length", 0) + length
        returns.append(episode_return)

    def maybe_log(self, test_mode: bool, epsilon: float | None = None) -> None:
        if test_mode:
            if len(self.test_returns) >= self.args.test_nepisode:
                self._log(self.test_returns, self.test_stats, "test_")
        elif self.t_env - self.log_train_stats_t >= self.args.runner_log_interval:
            self._log(self.train_returns, self.train_stats, "")
            if epsilon is not None:
                self.logger.log_stat("epsilon", epsilon, self.t_env)
            self.log_train_stats_t = self.t_env

    def _log(self, returns, stats, prefix):
        if not returns:
            return
        returns_arr = np.asarray(returns, dtype=np.float64)
        if returns_arr.ndim == 2:  # individual rewards: [episodes, agents]
            for i in range(returns_arr.shape[1]):
                self.logger.log_stat(f"{prefix}agent{i}_return_mean", returns_arr[:, i].mean(), self.t_env)
            for team, members in sorted((self.teams or {}).items()):  # a team's: its members' mean
                self.logger.log_stat(
                    f"{prefix}{team}_return_mean", returns_arr[:, members].mean(), self.t_env
                )
            returns_arr = returns_arr.sum(axis=1)  # the team's return is the sum over agents
        self.logger.log_stat(prefix + "return_mean", returns_arr.mean(), self.t_env)
        self.logger.log_stat(prefix + "return_std", returns_arr.std(), self.t_env)
        n = stats.pop("n_episodes")
        for k, v in sorted(stats.items()):
            self.logger.log_stat(f"{prefix}{k}_mean", v / n, self.t_env)
        returns.clear()
        stats.clear()
