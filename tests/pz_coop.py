"""A small cooperative PettingZoo task for the learning check.

Each step both agents see the same cue (one of 3) and the team gets reward 1 when both pick the
action matching the cue. 10 steps per episode: a random team scores about 10/9, the best 10."""

import numpy as np
from gymnasium.spaces import Box, Discrete
from pettingzoo import ParallelEnv

K = 3


class CueMatch(ParallelEnv):
    metadata = {"name": "cue_match_v0"}

    def __init__(self, max_cycles=10):
        self.possible_agents = ["a", "b"]
        self.max_cycles = max_cycles
        self.rng = np.random.default_rng()

    def observation_space(self, agent):
        return Box(0, 1, (K,))

    def action_space(self, agent):
        return Discrete(K)

    def _obs(self):
        cue = np.eye(K, dtype=np.float32)[self.cue]
        return dict.fromkeys(self.agents, cue)

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        self.cue = self.rng.integers(K)
        return self._obs(), {a: {} for a in self.agents}

    def state(self):
        return np.eye(K, dtype=np.float32)[self.cue]

    def step(self, actions):
        hit = float(all(actions[a] == self.cue for a in self.agents))
        self.t += 1
        self.cue = self.rng.integers(K)
        trunc = self.t >= self.max_cycles
        obs = self._obs()
        agents = list(self.agents)
        if trunc:
            self.agents = []
        return (
            obs,
            dict.fromkeys(agents, hit),
            dict.fromkeys(agents, False),
            dict.fromkeys(agents, trunc),
            {a: {} for a in agents},
        )


def parallel_env(max_cycles=10):
    return CueMatch(max_cycles=max_cycles)
