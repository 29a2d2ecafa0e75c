from __future__ import annotations

import numpy as np
import torch

from envs import REGISTRY as env_REGISTRY
from envs import batched
from runners.base import RunnerBase, answer_here, env_args_for, transition_fields


class VectorRunner(RunnerBase):
    """batch_size_run envs stepped one after another in this process, acting for all of them in
    one forward pass: the parallel runner's episodes without its worker processes and pipes. For
    envs that step fast (MPE: about 0.3 ms), the pipes and process switches cost more than the
    steps themselves; slow envs (StarCraft II) gain from the parallel runner's workers instead.
    Envs that can step all copies as one batch (VMAS; simple_spread_v3 through its NumPy port)
    are built once with num_envs=batch_size_run.

    Batched envs that offer reset_tensors/step_tensors (VMAS) are played by run_tensors: the
    episodes stay on the env's device (the GPU with device=cuda) from the env through the
    controller into the batch, with nothing read back to the host until all of them are over.
    Every copy steps at every step; the copies whose episode is over are masked out of the
    batch, which then holds what the step-by-step path writes."""

    CHECK_EVERY = 8  # steps between checks whether every episode is over (a read from the device)

    @property
    def replayable_episodes(self) -> bool:
        # a batched env has one random state for all its copies: no copy's episode replays alone
        return not self.batched

    def _start_envs(self, args):
        make = batched(args.env, args.env_args, getattr(args, "numpy_mpe", True))
        if make is not None and not set(self.step_fields) <= set(getattr(make, "step_fields", ())):
            make = None  # the batched port records no step fields: one env per copy instead
        self.batched = make is not None  # one env of batch_size_run copies (VMAS, MPE's port)
        if self.batched:
            self.envs = [make(**{**env_args_for(args, 0), "num_envs": self.batch_size})]
            self.envs[0].record_fields = self.step_fields
        else:
            self.envs = [env_REGISTRY[args.env](**env_args_for(args, i)) for i in range(self.batch_size)]
        self.on_device = self.batched and hasattr(self.envs[0], "step_tensors")

    def run(self, test_mode: bool = False):
        if self.on_device:
            return self.run_tensors(test_mode)
        return super().run(test_mode)

    def run_tensors(self, test_mode: bool = False):
        """One episode per copy, as ParallelRunner.run, on the env's device. The batch is on the
        run's device (the env's, where run.py puts VMAS)."""
        env, n = self.envs[0], self.batch_size
        batch = self.new_batch()
        batch.update(env.reset_tensors(), ts=0)
        self.t = 0
        self.start_episode(batch)
        dev = batch.device
        acting = torch.ones(n, dtype=torch.bool, device=dev)  # rows that get an action at this step
        alive = acting.clone()  # rows whose episode goes on: they step
        lengths = torch.zeros(n, dtype=torch.long, device=dev)
        cut_at_end = torch.zeros(n, dtype=torch.bool, device=dev)
        filled = torch.ones(n, 1, device=dev)
        returns, info_sums = None, {}
        for t in range(self.episode_limit + 1):
            actions = self.mac.select_actions(batch, t_ep=t, t_env=self.t_env, test_mode=test_mode)
            self._masked_update(batch, {"actions": actions}, t, acting)
            # Rows that just ended got their extra action; the loop ends once no row is left.
            if t == self.episode_limit or (t % self.CHECK_EVERY == 0 and t > 0 and not alive.any()):
                break
            r = env.step_tensors(self.mac.env_actions(actions, batch, t, slice(None)))
            done = r["terminated"] | r["cut"]
            reward = r["reward"].double()
            step_return = reward * _per_row(alive, reward)
            returns = step_return if returns is None else returns + step_return
            for k, v in r["infos"].items():
                info_sums[k] = info_sums.get(k, 0.0) + v * _per_row(alive, v)
            lengths += alive
            cut_at_end |= alive & r["cut"]
            indi = r["terminated"][:, None].expand(n, env.n_agents)
            post = transition_fields(r["reward"], done, r["cut"], indi)
            self._masked_update(batch, post, t, alive)
            self.t = t + 1
            data = {k: r[k] for k in self.pre_fields}
            self._masked_update(batch, {**data, "filled": filled}, t + 1, alive)
            acting, alive = alive, alive & ~done
        # Read back once all episodes are over: lengths, returns, infos.
        lengths, cut_at_end = lengths.tolist(), cut_at_end.tolist()
        returns = returns.cpu().numpy()
        info_sums = {k: v.cpu().numpy() for k, v in info_sums.items()}
        if not test_mode:
            self.t_env += sum(lengths)
        for i in range(n):
            info = {"episode_limit": cut_at_end[i], **{k: float(v[i]) for k, v in info_sums.items()}}
            ret = returns[i]
            self.record_episode(ret.tolist() if np.ndim(ret) else float(ret), lengths[i], info, test_mode)
        self.maybe_log(test_mode, getattr(self.mac.action_selector, "epsilon", None))
        return batch

    @staticmethod
    def _masked_update(batch, data, t, rows):
        """Write data ({field: [B, ...]}) at step t for the rows where `rows` [B] is true. The
        batch is fresh and each of its slots is written once, so writing zeros elsewhere is
        writing nothing; fields derived by preprocessing (one-hot actions) are masked too."""
        for k, v in data.items():
            batch.update(
                {k: v & _per_row(rows, v) if v.dtype == torch.bool else v * _per_row(rows, v)},
                ts=t,
                mark_filled=False,
            )
            if k in batch.preprocess:
                derived = batch.data.transition_data[batch.preprocess[k][0]][:, t]
                derived *= _per_row(rows, derived)

    def env_rng_states(self) -> list:
        return [env.get_rng_state() for env in self.envs]  # one per env, or the batched env's

    def set_env_rng_states(self, states: list) -> None:
        for env, state in zip(self.envs, states, strict=True):
            env.set_rng_state(state)

    def _exchange(self, cmd, items):
        if self.batched:
            return self._exchange_batched(cmd, items)
        return answer_here(self.envs, cmd, items, self.step_fields)

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


def _per_row(rows, like):
    """The row mask rows [B] shaped and typed to multiply `like` [B, ...]."""
    return rows.view(-1, *([1] * (like.dim() - 1))).to(like.dtype)
