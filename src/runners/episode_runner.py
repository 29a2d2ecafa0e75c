from __future__ import annotations

from types import SimpleNamespace

from envs import REGISTRY as env_REGISTRY
from runners.vector_runner import VectorRunner


class EpisodeRunner(VectorRunner):
    """One env in this process; each run() plays one episode: the vector runner with one env,
    built as the run's env_args say (never a batched port of it)."""

    def env_count(self, args: SimpleNamespace) -> int:
        return 1

    def _start_envs(self, args):
        self.batched = self.on_device = False
        self.envs = [env_REGISTRY[args.env](**args.env_args)]

    @property
    def env(self):
        return self.envs[0]
