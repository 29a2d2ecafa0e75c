"""mpe2's simple_spread_v3 for B copies at once, in NumPy: the vector runner's fast path for MPE.

B PettingZooEnv instances of simple_spread_v3 spend most of a step in mpe2's per-entity Python.
This steps the same physics, rewards and observations for all B copies with array operations,
in the same order of floating-point operations as mpe2, from the same per-copy seeds: the numbers
equal those of B PettingZooEnv instances (tests/test_mpe_env.py compares them step by step).
It covers the scenario's default options (full observability, no curriculum, no early success
termination); any other setting, or another scenario, uses mpe2 itself.
"""

import numpy as np
from gymnasium.utils import seeding

from envs.multiagentenv import team_reward
from utils.seeding import env_seed, generator_state, set_generator_state

DT, DAMPING, CONTACT_FORCE, CONTACT_MARGIN = 0.1, 0.25, 1e2, 1e-3
AGENT_SIZE, SENSITIVITY = 0.15, 5.0
# env_args that keep the scenario's defaults for the fast path to apply
FIXED = {
    "render_mode": None,
    "dynamic_rescaling": True,
    "benchmark_data": False,
    "curriculum": False,
    "terminate_on_success": False,
    "num_agent_neighbors": None,
    "num_landmark_neighbors": None,
}
OWN_KEYS = {"scenario", "key", "N", "local_ratio", "max_cycles", "continuous_actions", "seed"}
WRAPPER_KEYS = {"common_reward", "reward_scalarisation"}


def applies(env_args):
    """Whether env_args describe simple_spread_v3 with options this port reproduces."""
    if env_args.get("key") or env_args.get("scenario") != "simple_spread_v3":
        return False
    for k, v in env_args.items():
        if k in OWN_KEYS or k in WRAPPER_KEYS:
            continue
        if k not in FIXED or v != FIXED[k]:
            return False
    return True


class SimpleSpreadBatch:
    """num_envs copies of simple_spread_v3 behind reset_batch()/step_batch(), as the vector
    runner drives VMAS. Copy i is seeded as the vector runner seeds env i (env_seed)."""

    def __init__(self, num_envs, **env_args):
        from envs.pettingzoo_env import PettingZooEnv

        one = PettingZooEnv(**env_args)  # the reference's sizes, spaces and env_info
        self._info = one.get_env_info()
        one.close()
        self.num_envs = B = num_envs
        self.n_agents = n = int(env_args.get("N", 3))
        self.local_ratio = float(env_args.get("local_ratio", 0.5))
        self.max_cycles = int(env_args.get("max_cycles") or 25)
        self.continuous = bool(env_args.get("continuous_actions", False))
        self.common_reward = env_args.get("common_reward", True)
        self.reward_scalarisation = env_args.get("reward_scalarisation", "sum")
        seed = env_args.get("seed")
        self.rngs = [seeding.np_random(None if seed is None else env_seed(seed, i))[0] for i in range(B)]
        self.n_actions = self._info["n_actions"]
        self.obs_size = self._info["obs_shape"]
        self.pos = np.zeros((B, n, 2))
        self.vel = np.zeros((B, n, 2))
        self.landmarks = np.zeros((B, n, 2))
        self.steps = 0
        self._pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
        self._others = [[j for j in range(n) if j != i] for i in range(n)]
        self._avail_live = np.ones((B, n, self.n_actions), dtype=np.uint8)
        self._avail_done = np.zeros((B, n, self.n_actions), dtype=np.uint8)
        self._avail_done[..., 0] = 1
        self.reset_batch()  # PettingZooEnv resets once when it is built: the same draws

    def get_env_info(self):
        return dict(self._info)

    def get_rng_state(self):
        return {"copies": [generator_state(g) for g in self.rngs]}

    def set_rng_state(self, state):
        for g, s in zip(self.rngs, state["copies"], strict=True):
            set_generator_state(g, s)

    # --- episodes -----------------------------------------------------------------------------
    def reset_batch(self):
        """Reset every copy: {state [B, S], avail_actions [B, N, A], obs [B, N, O]}."""
        for b, rng in enumerate(self.rngs):  # mpe2's order: every agent, then every landmark
            for i in range(self.n_agents):
                self.pos[b, i] = rng.uniform(-1, +1, 2)
            for j in range(self.n_agents):
                self.landmarks[b, j] = rng.uniform(-1, +1, 2)
        self.vel[:] = 0.0
        self.steps = 0
        obs = self._observe()
        return {"state": obs.reshape(self.num_envs, -1), "avail_actions": self._avail_live.copy(), "obs": obs}

    def step_batch(self, actions):
        """actions [B, N] (discrete) or [B, N, A] (continuous) -> the data after the step, reward
        [B] (or [B, N]), terminated [B], indi_terminated [B, N] and an info dict per copy."""
        n = self.n_agents
        actions = np.asarray(actions)
        u = np.zeros((self.num_envs, n, 2))
        if self.continuous:  # mpe2 clips to the box, then takes the float32 differences
            a = np.clip(actions[..., :5].astype(np.float32), 0.0, 1.0)
            u[..., 0] += a[..., 2] - a[..., 1]
            u[..., 1] += a[..., 4] - a[..., 3]
        else:
            a = actions.reshape(self.num_envs, n).astype(np.int64)
            u[..., 0] = np.where(a == 1, -1.0, np.where(a == 2, 1.0, 0.0))
            u[..., 1] = np.where(a == 3, -1.0, np.where(a == 4, 1.0, 0.0))
        force = u * SENSITIVITY + 0.0
        force = [force[:, i] for i in range(n)]
        for a_, b_ in self._pairs:  # mpe2's pair order, each force added in front of the sum
            delta = self.pos[:, a_] - self.pos[:, b_]
            dist = np.sqrt(np.sum(np.square(delta), axis=-1))
            pen = np.logaddexp(0, -(dist - 2 * AGENT_SIZE) / CONTACT_MARGIN) * CONTACT_MARGIN
            f = CONTACT_FORCE * delta / dist[:, None] * pen[:, None]
            force[a_] = +f + force[a_]
            force[b_] = -f + force[b_]
        self.pos += self.vel * DT
        self.vel = self.vel * (1 - DAMPING)
        self.vel += (np.stack(force, axis=1) / 1.0) * DT
        self.steps += 1
        reward = self._rewards()
        obs = self._observe()
        state = obs.reshape(self.num_envs, -1)
        done = self.steps >= self.max_cycles
        B = self.num_envs
        return {
            # after the last step every agent is done: only the no-op; the observations stay, as
            # a critic of observations bootstraps from them at the time limit
            "state": state,
            "avail_actions": (self._avail_done if done else self._avail_live).copy(),
            "obs": obs,
            "reward": reward,
            "terminated": np.full(B, done),
            "indi_terminated": np.zeros((B, n), dtype=np.uint8),
            "info": [{"episode_limit": done} for _ in range(B)],
        }

    def _rewards(self):
        n = self.n_agents
        dist = lambda p, q: np.sqrt(np.sum(np.square(p - q), axis=-1))  # noqa: E731
        glob = np.zeros(self.num_envs)
        for j in range(n):
            glob = glob - np.min(
                np.stack([dist(self.pos[:, i], self.landmarks[:, j]) for i in range(n)]), axis=0
            )
        rewards = np.zeros((self.num_envs, n), dtype=np.float32)
        for i in range(n):
            own = np.zeros(self.num_envs)
            for k in self._others[i]:
                own = own - 1.0 * (dist(self.pos[:, k], self.pos[:, i]) < 2 * AGENT_SIZE)
            rewards[:, i] = glob * (1 - self.local_ratio) + own * self.local_ratio
        if not self.common_reward:
            return rewards.astype(np.float64)
        return np.array([team_reward(r, self.reward_scalarisation) for r in rewards], dtype=np.float64)

    def _observe(self):
        """[B, N, O] float32: own velocity and position, landmarks and the other agents relative
        to it, and the others' (silent, zero) communication."""
        n = self.n_agents
        parts = []
        for i in range(n):
            me = self.pos[:, i]
            cols = [self.vel[:, i], me]
            cols += [self.landmarks[:, j] - me for j in range(n)]
            cols += [self.pos[:, k] - me for k in self._others[i]]
            cols += [np.zeros_like(me) for _ in self._others[i]]
            parts.append(np.concatenate(cols, axis=-1))
        return np.stack(parts, axis=1).astype(np.float32)

    def close(self):
        pass
