from __future__ import annotations

import numpy as np

from envs import REGISTRY as env_REGISTRY
from envs import batched
from runners.parallel_runner import STACKED, ParallelRunner, env_args_for, env_command, stack_replies


class VectorRunner(ParallelRunner):
    """batch_size_run envs stepped one after another in this process, acting for all of them in
    one forward pass: the parallel runner's episodes without its worker processes and pipes. For
    envs that step fast (MPE: about 0.3 ms), the pipes and process switches cost more than the
    steps themselves; slow envs (StarCraft II) gain from the parallel runner's workers instead.
    Envs that can step all copies as one batch (VMAS; simple_spread_v3 through its NumPy port)
    are built once with num_envs=batch_size_run."""

    def _start_envs(self, args):
        make = batched(args.env, args.env_args, getattr(args, "numpy_mpe", True))
        self.batched = make is not None  # one env of batch_size_run copies (VMAS, MPE's port)
        if self.batched:
            self.envs = [make(**{**env_args_for(args, 0), "num_envs": self.batch_size})]
        else:
            self.envs = [env_REGISTRY[args.env](**env_args_for(args, i)) for i in range(self.batch_size)]

    def _exchange(self, cmd, items):
        if self.batched:
            return self._exchange_batched(cmd, items)
        replies = [env_command(self.envs[i], cmd, data) for i, data in items]
        return stack_replies(replies) if cmd in STACKED else replies

    def _exchange_batched(self, cmd, items):
        env, rows = self.envs[0], [i for i, _ in items]
        if cmd == "reset":
            out = env.reset_batch()
        elif cmd == "step":
            # Every copy steps; those whose episode is over get a zero action and are not read.
            first = np.asarray(items[0][1])
            actions = np.zeros((self.batch_size, *first.shape), dtype=first.dtype)
            actions[rows] = np.stack([np.asarray(a) for _, a in items])
            out = env.step_batch(actions)
        elif cmd == "get_env_info":
            return [env.get_env_info() for _ in items]
        elif cmd in ("save_replay", "close"):
            return [None for _ in items]
        else:
            raise ValueError(f"unknown env command {cmd!r}")
        return {k: [v[i] for i in rows] if k == "info" else v[rows] for k, v in out.items()}

    def close_env(self) -> None:
        if self.closed:
            return
        self.closed = True
        for env in self.envs:
            env.close()
