"""A tiny PettingZoo ParallelEnv for tests: agent "b" terminates after 3 steps, "a" runs on.
It takes no max_cycles argument and has no state(), to exercise the wrapper's fallbacks."""

import numpy as np
from gymnasium.spaces import Box, Discrete
from pettingzoo import ParallelEnv


class ToyEnv(ParallelEnv):
    metadata = {"name": "toy_v0"}

    def __init__(self, bonus=0.0):
        self.possible_agents = ["a", "b"]
        self.bonus = bonus
        self._obs_spaces = {"a": Box(-1, 100, (2,)), "b": Box(-1, 100, (3,))}
        self._act_spaces = {"a": Discrete(2), "b": Discrete(3)}

    def observation_space(self, agent):
        return self._obs_spaces[agent]

    def action_space(self, agent):
        return self._act_spaces[agent]

    def _obs(self):
        return {a: np.full(self._obs_spaces[a].shape, self.t, dtype=np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        rewards = {a: float(actions[a]) + self.bonus for a in self.agents}
        terms = {a: a == "b" and self.t >= 3 for a in self.agents}
        truncs = dict.fromkeys(self.agents, False)
        obs = self._obs()
        self.agents = [a for a in self.agents if not terms[a]]
        return obs, rewards, terms, truncs, {a: {} for a in terms}


def parallel_env(bonus=0.0):
    return ToyEnv(bonus=bonus)
