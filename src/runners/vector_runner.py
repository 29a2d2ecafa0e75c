from __future__ import annotations

from envs import REGISTRY as env_REGISTRY
from runners.parallel_runner import STACKED, ParallelRunner, env_args_for, env_command, stack_replies


class VectorRunner(ParallelRunner):
    """batch_size_run envs stepped one after another in this process, acting for all of them in
    one forward pass: the parallel runner's episodes without its worker processes and pipes. For
    envs that step fast (MPE: about 0.3 ms), the pipes and process switches cost more than the
    steps themselves; slow envs (StarCraft II) gain from the parallel runner's workers instead."""

    def _start_envs(self, args):
        self.envs = [env_REGISTRY[args.env](**env_args_for(args, i)) for i in range(self.batch_size)]

    def _exchange(self, cmd, items):
        replies = [env_command(self.envs[i], cmd, data) for i, data in items]
        return stack_replies(replies) if cmd in STACKED else replies

    def close_env(self) -> None:
        if self.closed:
            return
        self.closed = True
        for env in self.envs:
            env.close()
