import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

from envs import REGISTRY as env_REGISTRY  # noqa: E402
from envs.multiagentenv import MultiAgentEnv  # noqa: E402


class MockEnv(MultiAgentEnv):
    """Deterministic test env. Episode length ep_len + seed % 3 (a true termination) unless that
    reaches episode_limit (a time-limit cut). Agent i dies at step death_steps[i] (None: never).
    Observation of agent i at step t: [t, i, seed, 1]; state: [t, seed]."""

    def __init__(
        self,
        n_agents=2,
        n_actions=3,
        episode_limit=10,
        ep_len=5,
        death_steps=None,
        seed=0,
        common_reward=True,
        reward_scalarisation="sum",
        crash_at_step=None,
        raise_at_t=None,
        **_,
    ):
        self.n_agents, self.n_actions, self.episode_limit = n_agents, n_actions, episode_limit
        self.seed_ = seed or 0
        self.length = ep_len + self.seed_ % 3
        self.death_steps = death_steps or [None] * n_agents
        self.common_reward = common_reward
        self.crash_at_step = crash_at_step
        self.raise_at_t = raise_at_t  # raise after this many steps in total (a crashing run)
        self.total_steps = 0
        self.t = 0

    def reset(self):
        self.t = 0
        return self.get_obs(), self.get_state()

    def dead(self):
        return np.array([d is not None and self.t >= d for d in self.death_steps], dtype=np.uint8)

    def step(self, actions):
        if self.crash_at_step is not None and self.t == self.crash_at_step:
            os._exit(3)
        self.total_steps += 1
        if self.raise_at_t is not None and self.total_steps > self.raise_at_t:
            raise RuntimeError("mock env failure")
        self.t += 1
        rewards = np.array([(i + 1) * self.t for i in range(self.n_agents)], dtype=np.float32)
        terminated = self.t >= self.length
        limit = self.t >= self.episode_limit and not terminated
        reward = float(rewards.sum()) if self.common_reward else rewards
        return reward, terminated or limit, {"episode_limit": limit, "score": 1.0}

    def get_obs(self):
        return np.array([[self.t, i, self.seed_, 1] for i in range(self.n_agents)], dtype=np.float32)

    def get_obs_size(self):
        return 4

    def get_state(self):
        return np.array([self.t, self.seed_], dtype=np.float32)

    def get_state_size(self):
        return 2

    def get_avail_actions(self):
        avail = np.ones((self.n_agents, self.n_actions), dtype=np.uint8)
        avail[self.dead() == 1] = 0
        avail[self.dead() == 1, 0] = 1
        return avail

    def get_total_actions(self):
        return self.n_actions

    def get_indi_terminated(self):
        return self.dead()


env_REGISTRY["mock"] = MockEnv


def make_args(**overrides):
    """A config namespace from default.yaml plus overrides (no command line)."""
    from config import CONFIG_DIR, load_yaml

    cfg = load_yaml(os.path.join(CONFIG_DIR, "default.yaml"))
    cfg.update(device="cpu", seed=0, unique_token="test")
    cfg.update(overrides)
    return SimpleNamespace(**cfg)


@pytest.fixture
def mock_setup():
    """Builds (args, runner, mac, scheme, groups, preprocess) on the mock env."""
    from controllers import REGISTRY as mac_REGISTRY
    from run import build_scheme
    from runners import REGISTRY as r_REGISTRY
    from utils.logger import Logger, get_console_logger

    made = []

    def build(runner="episode", batch_size_run=1, **env_args):
        args = make_args(
            env="mock",
            runner=runner,
            batch_size_run=batch_size_run,
            env_args=dict(env_args, seed=env_args.get("seed", 0)),
        )
        r = r_REGISTRY[runner](args=args, logger=Logger(get_console_logger()))
        made.append(r)
        info = r.get_env_info()
        for k in ("n_agents", "n_actions", "state_shape", "obs_shape", "episode_limit"):
            setattr(args, k, info[k])
        args.common_reward = env_args.get("common_reward", True)
        scheme, groups, preprocess = build_scheme(args, info)
        mac = mac_REGISTRY["basic_mac"](
            {**scheme, "actions_onehot": {"vshape": (info["n_actions"],), "group": "agents"}}, groups, args
        )
        r.setup(scheme=scheme, groups=groups, preprocess=preprocess, mac=mac)
        return args, r, mac

    yield build
    for r in made:
        r.close_env()


@pytest.fixture(autouse=True)
def _seed():
    np.random.seed(0)
    torch.manual_seed(0)
