from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from envs import REGISTRY as env_REGISTRY
from runners.base import RunnerBase, env_data

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch
    from utils.logger import Logger


class EpisodeRunner(RunnerBase):
    """One env in this process; each run() plays one episode."""

    replayable_episodes = True

    def __init__(self, args: SimpleNamespace, logger: Logger) -> None:
        super().__init__(args, logger)
        self.batch_size = 1
        self.env = env_REGISTRY[args.env](**args.env_args)
        self.episode_limit = self.env.episode_limit
        self.t = 0

    def get_env_info(self) -> dict:
        return self.env.get_env_info()

    def env_rng_states(self) -> list:
        return [self.env.get_rng_state()]

    def set_env_rng_states(self, states: list) -> None:
        self.env.set_rng_state(states[0])

    def save_replay(self) -> list[str | None]:
        """-> [the path the env wrote, or None]."""
        return [self.env.save_replay()]

    def close_env(self) -> None:
        self.env.close()

    def run(self, test_mode: bool = False) -> EpisodeBatch:
        batch = self.new_batch()
        self.env.reset()
        self.t = 0
        self.start_episode(batch)
        terminated = False
        episode_return = 0.0
        env_info = {}
        while not terminated:
            batch.update(env_data(self.env, self.step_fields), bs=0, ts=self.t)
            actions = self.mac.select_actions(batch, t_ep=self.t, t_env=self.t_env, test_mode=test_mode)
            to_env = self.mac.env_actions(actions, batch, self.t, slice(None))
            reward, terminated, env_info = self.env.step(to_env[0].cpu().numpy())
            episode_return = episode_return + np.asarray(reward, dtype=np.float64)
            batch.update(
                {
                    "actions": actions,
                    "reward": np.asarray(reward, dtype=np.float32).reshape(1, -1),
                    "terminated": [[terminated and not env_info.get("episode_limit", False)]],
                    "indi_terminated": np.asarray(self.env.get_indi_terminated())[None],
                },
                ts=self.t,
                mark_filled=False,
            )
            self.t += 1

        # Final observation, and one more action so `actions` is defined at T_ep.
        batch.update(env_data(self.env, self.step_fields), bs=0, ts=self.t)
        actions = self.mac.select_actions(batch, t_ep=self.t, t_env=self.t_env, test_mode=test_mode)
        batch.update({"actions": actions}, ts=self.t, mark_filled=False)

        if not test_mode:
            self.t_env += self.t
        self.record_episode(
            episode_return.tolist() if np.ndim(episode_return) else float(episode_return),
            self.t,
            env_info,
            test_mode,
        )
        self.maybe_log(test_mode, getattr(self.mac.action_selector, "epsilon", None))
        return batch
