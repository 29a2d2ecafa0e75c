import os

import numpy as np
import pytest
import torch

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

# One thread, as runs use by default: the suite stays fast when other jobs share the cores.
torch.set_num_threads(1)

from envs import REGISTRY as env_REGISTRY  # noqa: E402
from helpers import MockEnv, make_args  # noqa: E402


@pytest.fixture
def mock_env(monkeypatch):
    """The mock env under the name "mock" in the env registry, for this test only."""
    monkeypatch.setitem(env_REGISTRY, "mock", MockEnv)
    return MockEnv


@pytest.fixture
def mock_setup(mock_env):
    """Builds (args, runner, mac, scheme, groups, preprocess) on the mock env."""
    from assembly import build as assemble
    from utils.logger import Logger, get_console_logger

    made = []

    def build(runner="episode", batch_size_run=1, env_workers=None, **env_args):
        args = make_args(
            env="mock",
            runner=runner,
            batch_size_run=batch_size_run,
            env_workers=env_workers,
            common_reward=env_args.get("common_reward", True),
            env_args=dict(env_args, seed=env_args.get("seed", 0)),
        )
        parts = assemble(args, Logger(get_console_logger()), buffer=False)
        made.append(parts.runner)
        return args, parts.runner, parts.mac

    yield build
    for r in made:
        r.close_env()


@pytest.fixture(autouse=True)
def _seed():
    np.random.seed(0)
    torch.manual_seed(0)
