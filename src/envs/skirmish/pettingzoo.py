"""Skirmish as a PettingZoo ParallelEnv, for frameworks other than this one.

    from envs.skirmish.pettingzoo import parallel_env
    env = parallel_env(map_name="3m")
    env = parallel_env(scenario="protoss_5_vs_5")   # SMACv2's battles (skirmish_v2)

Observations are {"observation": SMAC's vector, "action_mask": available actions (int8)}; every
living agent gets the team reward; an agent that dies is terminated and leaves env.agents; the
battle's end terminates the rest (truncates them at the time limit).
"""

import numpy as np
from gymnasium.spaces import Box, Dict, Discrete
from pettingzoo import ParallelEnv

from envs.skirmish.env import SkirmishEnv


class SkirmishParallelEnv(ParallelEnv):
    metadata = {"name": "skirmish_v0", "render_modes": ["rgb_array"], "is_parallelizable": True}

    def __init__(self, render_mode=None, **kwargs):
        if "scenario" in kwargs or str(kwargs.get("map_name", "")).startswith("10gen_"):
            from envs.skirmish.v2 import SkirmishV2Env

            self.sim = SkirmishV2Env(**kwargs)
        else:
            self.sim = SkirmishEnv(**kwargs)
        self.render_mode = render_mode
        self.possible_agents = [f"agent_{i}" for i in range(self.sim.n_agents)]
        self.agents = []
        self._obs_space = Dict(
            {
                "observation": Box(-np.inf, np.inf, (self.sim.get_obs_size(),), np.float32),
                "action_mask": Box(0, 1, (self.sim.n_actions,), np.int8),
            }
        )
        self._act_space = Discrete(self.sim.n_actions)

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def state(self):
        return self.sim.get_state()

    def _observe(self):
        obs = self.sim.get_obs()
        avail = np.asarray(self.sim.get_avail_actions(), dtype=np.int8)
        return {
            a: {"observation": obs[i], "action_mask": avail[i]}
            for i, a in enumerate(self.possible_agents)
            if a in self.agents
        }

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.sim.seed(seed)
        self.sim.reset()
        self.agents = list(self.possible_agents)
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions):
        acts = [int(actions.get(a, 0)) if a in self.agents else 0 for a in self.possible_agents]
        reward, done, info = self.sim.step(acts)
        dead = self.sim.get_indi_terminated()
        na = self.sim.n_agents
        timeout = done and self.sim._end_code(self.sim.alive[:na], self.sim.alive[na:]) is None
        rewards = {a: float(reward) for a in self.agents}
        terms = {
            a: bool(dead[i]) or (done and not timeout)
            for i, a in enumerate(self.possible_agents)
            if a in self.agents
        }
        truncs = {
            a: bool(timeout) and not dead[i] for i, a in enumerate(self.possible_agents) if a in self.agents
        }
        infos = {a: dict(info) for a in self.agents}
        obs = self._observe()
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos

    def render(self):
        return self.sim.render()

    def close(self):
        self.sim.close()


def parallel_env(**kwargs):
    return SkirmishParallelEnv(**kwargs)
