"""EpisodeBatch: fixed-size [batch, time, ...] tensors described by a scheme; ReplayBuffer over it."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import torch

Index = int | slice | list | np.ndarray | torch.Tensor  # episode or time-step selections
Scheme = dict[str, dict]  # field -> {vshape, dtype, group, episode_const, from_env}

# What the runners write from the env: before each action (PRE_FIELDS, plus the extra step fields
# a run records, args.step_fields) and after it (POST_FIELDS). The scheme marks every field the
# env writes with from_env; the runners and the replay log read these, nothing else lists them.
PRE_FIELDS = ("state", "avail_actions", "obs")
POST_FIELDS = ("reward", "terminated", "indi_terminated")


class EpisodeBatch:
    """Episodes stored as tensors allocated once.

    scheme: {field: {"vshape": int|tuple, "group": str (optional), "dtype": torch dtype,
    "episode_const": bool}}. Grouped fields are [B, T, groups[group], *vshape], others
    [B, T, *vshape]; episode-constant fields drop T. `filled` is added automatically.
    preprocess: {field: (new_field, [transforms])} applied whenever `field` is written.
    """

    def __init__(
        self,
        scheme: Scheme,
        groups: dict[str, int],
        batch_size: int,
        max_seq_length: int,
        data: SimpleNamespace | None = None,
        preprocess: dict | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        self.scheme = dict(scheme)
        self.groups = groups
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.preprocess = {} if preprocess is None else preprocess
        self.device = device
        self._np_views = {}
        if data is not None:
            self.data = data
        else:
            self.data = SimpleNamespace(transition_data={}, episode_data={})
            self._setup_data(self.scheme, groups, batch_size, max_seq_length, self.preprocess)

    def _setup_data(self, scheme, groups, batch_size, max_seq_length, preprocess):
        for k, (new_k, transforms) in preprocess.items():
            assert k in scheme, f"preprocess source '{k}' is not in the scheme"
            vshape = scheme[k]["vshape"]
            dtype = scheme[k].get("dtype", torch.float32)
            for transform in transforms:
                vshape, dtype = transform.infer_output_info(vshape, dtype)
            scheme[new_k] = {"vshape": vshape, "dtype": dtype}
            for key in ("group", "episode_const"):
                if key in scheme[k]:
                    scheme[new_k][key] = scheme[k][key]

        if "filled" in scheme:
            raise ValueError("'filled' is a reserved key of the scheme")
        scheme["filled"] = {"vshape": (1,), "dtype": torch.uint8}

        for field, info in scheme.items():
            assert "vshape" in info, f"scheme field '{field}' needs a 'vshape'"
            vshape = info["vshape"]
            vshape = (vshape,) if isinstance(vshape, int) else tuple(vshape)
            dtype = info.get("dtype", torch.float32)
            group = info.get("group")
            shape = (groups[group], *vshape) if group else vshape
            if info.get("episode_const", False):
                self.data.episode_data[field] = torch.zeros(
                    (batch_size, *shape), dtype=dtype, device=self.device
                )
            else:
                self.data.transition_data[field] = torch.zeros(
                    (batch_size, max_seq_length, *shape), dtype=dtype, device=self.device
                )

    def to(self, device: str | torch.device) -> EpisodeBatch:
        for store in (self.data.transition_data, self.data.episode_data):
            for k, v in store.items():
                store[k] = v.to(device)
        self.device = device
        self._np_views = {}
        return self

    def update(
        self, data: dict, bs: Index = slice(None), ts: Index = slice(None), mark_filled: bool = True
    ) -> None:
        """Write `data` ({field: array-like}) into episodes `bs` at time steps `ts`."""
        slices = self._parse_slices((bs, ts))
        for k, v in data.items():
            if k in self.data.transition_data:
                target = self.data.transition_data
                if mark_filled:
                    self._write(target, "filled", slices, 1)
                    mark_filled = False
                _slices = slices
            elif k in self.data.episode_data:
                target = self.data.episode_data
                _slices = slices[0]
            else:
                raise KeyError(f"'{k}' is neither transition nor episode data of this batch")
            self._write(target, k, _slices, v)
            if k in self.preprocess:
                new_k, transforms = self.preprocess[k]
                arr = self._np_views[k][1]  # _write cached it: a NumPy view, or None off the CPU
                if arr is not None:
                    v = arr[_slices]
                    for transform in transforms:
                        v = transform.transform_np(v)
                else:
                    v = target[k][_slices]
                    for transform in transforms:
                        v = transform.transform(v)
                self._write(target, new_k, _slices, v)

    def _write(self, store, k, slices, v):
        cached = self._np_views.get(k)
        if cached is None or cached[0] is not store[k]:
            dest = store[k]
            # NumPy views share CPU tensors' memory and make small writes several times cheaper.
            cached = self._np_views[k] = (dest, dest.numpy() if dest.device.type == "cpu" else None)
        dest, arr = cached
        if arr is not None:
            if isinstance(v, torch.Tensor):
                v = v.detach().cpu().numpy()
            elif not isinstance(v, np.ndarray):
                v = np.asarray(v)
            slot_shape = arr[slices].shape
            if v.ndim and v.shape != slot_shape:  # a scalar fills the whole slot
                self._check_safe_view(v, slot_shape, k)
                v = v.reshape(slot_shape)
            arr[slices] = v
        else:
            v = torch.as_tensor(
                np.asarray(v) if isinstance(v, (list, tuple)) else v, dtype=dest.dtype, device=dest.device
            )
            slot_shape = dest[slices].shape
            if v.ndim and v.shape != slot_shape:
                self._check_safe_view(v, slot_shape, k)
                v = v.reshape(slot_shape)
            dest[slices] = v

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def _safe_view_error(v_shape, dest_shape):
        """None if a value of v_shape fits a slot of dest_shape (right to left, each axis equal or
        the slot's axis 1), else the reason."""
        idx = len(v_shape) - 1
        for s in dest_shape[::-1]:
            if idx >= 0 and v_shape[idx] == s:
                idx -= 1
            elif s != 1:
                return "mismatch"
        if idx >= 0 and any(d != 1 for d in v_shape[: idx + 1]):
            return "mismatch"
        return None

    def _check_safe_view(self, v, dest_shape, key):
        if self._safe_view_error(tuple(v.shape), tuple(dest_shape)) is not None:
            raise ValueError(
                f"cannot write '{key}' of shape {tuple(v.shape)} into a slot of shape {tuple(dest_shape)}"
            )

    def __getitem__(self, item):
        if isinstance(item, str):
            if item in self.data.episode_data:
                return self.data.episode_data[item]
            if item in self.data.transition_data:
                return self.data.transition_data[item]
            raise KeyError(item)
        if isinstance(item, tuple) and all(isinstance(it, str) for it in item):
            new_data = SimpleNamespace(transition_data={}, episode_data={})
            for key in item:
                if key in self.data.transition_data:
                    new_data.transition_data[key] = self.data.transition_data[key]
                elif key in self.data.episode_data:
                    new_data.episode_data[key] = self.data.episode_data[key]
                else:
                    raise KeyError(key)
            new_scheme = {key: self.scheme[key] for key in item}
            new_groups = {
                self.scheme[key]["group"]: self.groups[self.scheme[key]["group"]]
                for key in item
                if "group" in self.scheme[key]
            }
            return EpisodeBatch(
                new_scheme,
                new_groups,
                self.batch_size,
                self.max_seq_length,
                data=new_data,
                device=self.device,
            )

        slices = self._parse_slices(item)
        new_data = SimpleNamespace(
            transition_data={k: v[slices] for k, v in self.data.transition_data.items()},
            episode_data={k: v[slices[0]] for k, v in self.data.episode_data.items()},
        )
        ret_bs = self._get_num_items(slices[0], self.batch_size)
        ret_max_t = self._get_num_items(slices[1], self.max_seq_length)
        return EpisodeBatch(self.scheme, self.groups, ret_bs, ret_max_t, data=new_data, device=self.device)

    @staticmethod
    def _get_num_items(indexing_item, max_size):
        if isinstance(indexing_item, (list, np.ndarray, torch.Tensor)):
            return len(indexing_item)
        if isinstance(indexing_item, slice):
            return len(range(*indexing_item.indices(max_size)))
        raise TypeError(f"unsupported index {indexing_item!r}")

    @staticmethod
    def _parse_slices(items):
        if isinstance(items, (slice, int, list, np.ndarray, torch.Tensor)):
            items = (items, slice(None))
        if len(items) != 2:
            raise IndexError("index an EpisodeBatch with [episodes, time]")
        parsed = []
        for axis, item in enumerate(items):
            if isinstance(item, (int, np.integer)):
                parsed.append(slice(int(item), int(item) + 1))
            elif axis == 1 and not isinstance(item, slice):
                raise IndexError("the time index must be an int or a slice")
            else:
                parsed.append(item)
        return tuple(parsed)

    def max_t_filled(self) -> int:
        return int(self.data.transition_data["filled"].sum(1).max())

    @classmethod
    def cat(cls, parts: list[EpisodeBatch]) -> EpisodeBatch:
        """The episodes of several batches of one scheme and length, as one batch."""
        first = parts[0]
        if len(parts) == 1:
            return first
        data = SimpleNamespace(
            transition_data={
                k: torch.cat([p.data.transition_data[k] for p in parts]) for k in first.data.transition_data
            },
            episode_data={
                k: torch.cat([p.data.episode_data[k] for p in parts]) for k in first.data.episode_data
            },
        )
        size = sum(p.batch_size for p in parts)
        return cls(first.scheme, first.groups, size, first.max_seq_length, data=data, device=first.device)

    def __repr__(self):
        return (
            f"EpisodeBatch(batch_size={self.batch_size}, max_seq_length={self.max_seq_length}, "
            f"keys={list(self.scheme)}, groups={self.groups})"
        )


def first_rows(v: torch.Tensor, n: int) -> torch.Tensor:
    """v[:n] over a storage of exactly its bytes, without a copy. torch.save writes a view's
    whole storage, and a copy of a part-filled buffer for a checkpoint would need as much memory
    again (several GiB on large maps, with two runs sharing the machine)."""
    if n == len(v):
        return v
    if n == 0 or not v.is_contiguous() or v.device.type != "cpu":  # a GPU buffer: as before
        return v[:n].clone()
    size = v.element_size()
    start = v.storage_offset() * size
    storage = v.untyped_storage()[start : start + n * v.stride(0) * size]  # shares v's memory
    return v.new_empty(0).set_(storage, 0, (n, *v.shape[1:]), v.stride())


class ReplayBuffer(EpisodeBatch):
    """A ring buffer of whole episodes, sampled uniformly; lives on `device` (the CPU by default)."""

    def __init__(
        self, scheme: Scheme, groups: dict[str, int], buffer_size: int, max_seq_length: int, **batch_args
    ) -> None:
        """buffer_size episodes of max_seq_length steps; batch_args: EpisodeBatch's preprocess, device."""
        super().__init__(scheme, groups, buffer_size, max_seq_length, **batch_args)
        self.buffer_size = buffer_size
        self.buffer_index = 0
        self.episodes_in_buffer = 0
        self._transitions = torch.zeros(buffer_size)  # per stored episode, for sample_transitions
        # per stored episode, the env's random state before it began (None: not known), so that
        # a checkpoint can keep the buffer as a log of how to play it again (replay_log.py)
        self.env_rng = [None] * buffer_size

    def insert_episode_batch(self, ep_batch: EpisodeBatch, env_rng: list | None = None) -> None:
        """env_rng: the random state of the env of each episode before it began, if known."""
        n = ep_batch.batch_size
        if self.buffer_index + n <= self.buffer_size:
            dst = slice(self.buffer_index, self.buffer_index + n)
            self.env_rng[dst] = env_rng if env_rng is not None else [None] * n
            t = ep_batch.max_seq_length
            # Straight copies: the batch already holds its preprocessed fields and `filled`.
            for k, v in ep_batch.data.transition_data.items():
                self.data.transition_data[k][dst, :t] = v.to(self.device)
            for k, v in ep_batch.data.episode_data.items():
                self.data.episode_data[k][dst] = v.to(self.device)
            # the filled rows less the final observation's
            filled = ep_batch.data.transition_data["filled"][:, :, 0].sum(1).cpu()
            self._transitions[dst] = (filled - 1).clamp(min=0).float()
            self.buffer_index += n
            self.episodes_in_buffer = max(self.episodes_in_buffer, self.buffer_index)
            self.buffer_index %= self.buffer_size
        else:
            left = self.buffer_size - self.buffer_index
            head, tail = (env_rng[:left], env_rng[left:]) if env_rng is not None else (None, None)
            self.insert_episode_batch(ep_batch[0:left, :], head)
            self.insert_episode_batch(ep_batch[left:, :], tail)

    def can_sample(self, batch_size: int) -> bool:
        return self.episodes_in_buffer >= batch_size

    def sample(self, batch_size: int, t_env: int = 0) -> EpisodeBatch:
        """batch_size distinct stored episodes, cut after the longest one's last filled step
        (what a learner reads); only that part is copied, a third of the time of copying the
        whole length and cutting after when episodes run to half their limit. The batch carries
        the episodes' slots in the buffer as `ep_ids` [B] (what learn() takes back)."""
        assert self.can_sample(batch_size)
        if self.episodes_in_buffer == batch_size:
            ep_ids = slice(0, batch_size)
        else:
            ep_ids = np.random.choice(self.episodes_in_buffer, batch_size, replace=False)
        return self._episodes(ep_ids)

    def _episodes(self, ep_ids):
        longest = int(self._transitions[ep_ids].max()) + 1  # filled rows: transitions + final obs
        batch = self[ep_ids, :longest]
        batch.ep_ids = torch.arange(self.episodes_in_buffer)[ep_ids]
        return batch

    def learn(self, ep_ids: torch.Tensor, feedback: dict) -> None:
        """What a learner learned about the episodes `ep_ids` it trained on (train()'s return
        value); a uniform buffer keeps nothing of it."""

    def can_sample_transitions(self, batch_size: int) -> bool:
        return int(self._transitions[: self.episodes_in_buffer].sum()) >= batch_size

    def sample_transitions(self, batch_size: int, episode_limit: int | None = None) -> EpisodeBatch:
        """`batch_size` single transitions drawn uniformly (with replacement) from all stored
        ones, as a batch of two-step windows [t, t + 1]: what feed-forward learners need, from
        many more episodes than a batch of whole episodes covers.

        episode_limit: also mark the step t = episode_limit - 1 terminated (no bootstrap at the
        limit); the window no longer shows where in its episode it lies."""
        lengths = self._transitions[: self.episodes_in_buffer]
        ep = torch.multinomial(lengths, batch_size, replacement=True)
        t = (torch.rand(batch_size) * lengths[ep]).long()
        return self.transition_windows(ep, t, episode_limit)

    def transition_windows(self, ep, t, episode_limit=None):
        """The windows [t, t + 1] of stored episodes `ep` (see sample_transitions)."""
        ep = torch.as_tensor(ep, device=self.device)
        t = torch.as_tensor(t, device=self.device)
        t_ix = t[:, None] + torch.arange(2, device=self.device)
        new_data = SimpleNamespace(
            transition_data={k: v[ep[:, None], t_ix] for k, v in self.data.transition_data.items()},
            episode_data={k: v[ep] for k, v in self.data.episode_data.items()},
        )
        if episode_limit is not None:
            term = new_data.transition_data["terminated"]
            term[:, 0][t == episode_limit - 1] = 1
        return EpisodeBatch(self.scheme, self.groups, len(ep), 2, data=new_data, device=self.device)

    def state_dict(self) -> dict:
        """The stored episodes (only the filled slots) and the ring's position, for checkpoints."""
        n = self.episodes_in_buffer
        return {
            "transition_data": {k: first_rows(v, n) for k, v in self.data.transition_data.items()},
            "episode_data": {k: first_rows(v, n) for k, v in self.data.episode_data.items()},
            "transitions": first_rows(self._transitions, n),
            "buffer_index": self.buffer_index,
            "episodes_in_buffer": n,
            "buffer_size": self.buffer_size,
        }

    def load_state_dict(self, state: dict) -> None:
        if state["buffer_size"] != self.buffer_size:
            raise ValueError(
                f"it holds a buffer of buffer_size={state['buffer_size']}, this run's is {self.buffer_size}"
            )
        for part in ("transition_data", "episode_data"):
            mine, theirs = getattr(self.data, part), state[part]
            if set(mine) != set(theirs):
                raise ValueError(f"its buffer has fields {sorted(theirs)}, this run's {sorted(mine)}")
            for k, v in theirs.items():
                if v.shape[1:] != mine[k].shape[1:]:
                    have, want = tuple(v.shape[1:]), tuple(mine[k].shape[1:])
                    raise ValueError(f"its buffer's '{k}' has shape {have}, this run's {want}")
        n = state["episodes_in_buffer"]
        for part in ("transition_data", "episode_data"):
            for k, v in state[part].items():
                getattr(self.data, part)[k][:n] = v.to(self.device)
        self._transitions[:n] = state["transitions"]
        self.episodes_in_buffer = n
        self.buffer_index = state["buffer_index"]

    def __repr__(self):
        return (
            f"ReplayBuffer({self.episodes_in_buffer}/{self.buffer_size} episodes, "
            f"keys={list(self.scheme)}, groups={self.groups})"
        )
