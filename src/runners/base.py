from __future__ import annotations

import numbers
from functools import partial
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from components.episode_buffer import PRE_FIELDS, EpisodeBatch

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


class RunnerBase:
    """What both runners share: batch construction, and per-episode returns and info sums logged
    as <prefix>return_mean, <prefix><key>_mean, ... (with individual rewards also per agent and,
    in competitive envs, per team: <prefix><team>_return_mean)."""

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
