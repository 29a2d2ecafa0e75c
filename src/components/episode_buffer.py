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


def row_range(v: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """v[start:stop] over a storage of exactly its bytes, without a copy. torch.save writes a
    view's whole storage, and a copy of a buffer for a checkpoint would need as much memory again
    (several GiB on large maps, with two runs sharing the machine)."""
    if start == 0 and stop == len(v):
        return v
    if stop <= start or not v.is_contiguous() or v.device.type != "cpu":  # a GPU buffer: copied
        return v[start:stop].clone()
    size = v.element_size()
    begin = (v.storage_offset() + start * v.stride(0)) * size
    storage = v.untyped_storage()[begin : begin + (stop - start) * v.stride(0) * size]  # shares v's memory
    return v.new_empty(0).set_(storage, 0, (stop - start, *v.shape[1:]), v.stride())


def first_rows(v: torch.Tensor, n: int) -> torch.Tensor:
    """v[:n] without a copy (see row_range)."""
    return row_range(v, 0, n)


LOAD_CHUNK = 256  # episodes of a padded buffer.th copied at a time
GROWTH = 1.05  # how much the step pool's span grows when full: its pages are taken as first written


class ReplayBuffer:
    """A ring of whole episodes, sampled uniformly; lives on `device` (the CPU by default).

    Only the steps that happened are stored: every episode's filled rows (its transitions and
    final observation) go one after another into a pool of steps per field, in the order the
    episodes entered, so the episode that leaves (the oldest) always frees the pool's oldest rows.
    The pool is reserved for buffer_size episodes at the limit but only the rows written are
    ever touched, so memory grows as the buffer fills, to GROWTH x the most it held. A sampled
    batch is padded to its longest episode with zeros, exactly what a buffer of padded episodes
    gives (what PyMARL's does)."""

    def __init__(
        self,
        scheme: Scheme,
        groups: dict[str, int],
        buffer_size: int,
        max_seq_length: int,
        preprocess: dict | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        """buffer_size episodes of at most max_seq_length steps."""
        layout = EpisodeBatch(scheme, groups, 0, max_seq_length, preprocess=preprocess, device=device)
        self.scheme, self.groups, self.preprocess = layout.scheme, groups, layout.preprocess
        self.device = device
        self.buffer_size = buffer_size
        self.max_seq_length = max_seq_length
        self.max_rows = buffer_size * max_seq_length
        # Row max_rows of every pool stays zero: the padding of sampled batches.
        self.steps = {
            k: torch.empty((self.max_rows + 1, *v.shape[2:]), dtype=v.dtype, device=device)
            for k, v in layout.data.transition_data.items()
        }
        for v in self.steps.values():
            v[self.max_rows] = 0
        self.consts = {
            k: torch.zeros((buffer_size, *v.shape[1:]), dtype=v.dtype, device=device)
            for k, v in layout.data.episode_data.items()
        }
        self.offset = torch.zeros(buffer_size, dtype=torch.long)  # each slot's first row
        self.rows = torch.zeros(buffer_size, dtype=torch.long)  # each slot's filled rows
        self.span = 0  # rows of the pool in use as a ring (grows as needed up to max_rows)
        self.head = 0  # where the next episode's rows go
        self.used = 0  # rows held, the `used` rows before head (mod span)
        self.buffer_index = 0
        self.episodes_in_buffer = 0

    @property
    def _tail(self) -> int:
        """The first row of the oldest held episode."""
        return (self.head - self.used) % self.span if self.span else 0

    def _wrap(self, idx: torch.Tensor) -> torch.Tensor:
        """Row indices past the ring's end taken back to its start."""
        return torch.where(idx >= self.span, idx - self.span, idx)

    @property
    def _transitions(self) -> torch.Tensor:
        """Per slot, its transitions (filled rows less the final observation's)."""
        return (self.rows - 1).clamp(min=0).float()

    # --- memory -------------------------------------------------------------------------------
    def row_bytes(self) -> int:
        return sum(v[0].numel() * v.element_size() for v in self.steps.values())

    def _const_bytes(self) -> int:
        return sum(v.numel() * v.element_size() for v in self.consts.values())

    def nbytes(self) -> int:
        """Bytes of the pool's rows taken so far (its span) and of the per-episode fields."""
        return self.span * self.row_bytes() + self._const_bytes()

    def full_nbytes(self) -> int:
        """The most it can take: every episode at the limit."""
        return self.max_rows * self.row_bytes() + self._const_bytes()

    # --- writing ------------------------------------------------------------------------------
    def _reserve(self, n_rows: int) -> None:
        """Make room for n_rows more rows after head, widening the ring if it is full."""
        if self.used + n_rows <= self.span:
            return
        new_span = min(self.max_rows, max(self.used + n_rows, int(self.span * GROWTH) + 1))
        tail = self._tail
        if not self.used:
            self.head = 0
        elif self.head == tail == 0:  # the held rows fill the ring exactly, unwrapped
            self.head = self.span
        elif self.head <= tail:  # they wrap: the older part moves to the end of the wider ring
            shift = new_span - self.span
            for v in self.steps.values():
                # last rows first, `shift` at a time: no copy overlaps its source, none is a temporary
                # as large as the part (which can be most of the buffer)
                end = self.span
                while end > tail:
                    start = max(tail, end - shift)
                    v[start + shift : end + shift] = v[start:end]
                    end = start
            live = self.offset[: self.episodes_in_buffer]
            live[live >= tail] += shift
        self.span = new_span

    def insert_episode_batch(self, ep_batch: EpisodeBatch) -> list[int]:
        """-> the slots the batch's episodes went to, in the batch's order."""
        n = ep_batch.batch_size
        if self.buffer_index + n > self.buffer_size:
            left = self.buffer_size - self.buffer_index
            return self.insert_episode_batch(ep_batch[0:left, :]) + self.insert_episode_batch(
                ep_batch[left:, :]
            )
        slots = slice(self.buffer_index, self.buffer_index + n)
        if self.episodes_in_buffer == self.buffer_size:  # the n oldest leave
            leaving = self.rows[slots]
            if self.used and int(self.offset[self.buffer_index]) != self._tail:
                raise RuntimeError("replay buffer: the leaving episode is not the oldest held")
            self.used -= int(leaving.sum())
        self._append(slots, ep_batch)
        self.buffer_index += n
        self.episodes_in_buffer = max(self.episodes_in_buffer, self.buffer_index)
        self.buffer_index %= self.buffer_size
        return list(range(slots.start, slots.stop))

    def _append(self, slots: slice, ep_batch: EpisodeBatch) -> None:
        """Write the batch's episodes to `slots`, their rows after the newest held."""
        filled = ep_batch.data.transition_data["filled"][:, :, 0].cpu().bool()
        rows = filled.sum(1)
        total = int(rows.sum())
        self._reserve(total)
        dst = self._wrap(torch.arange(self.head, self.head + total)).to(self.device)
        for k, v in ep_batch.data.transition_data.items():
            self.steps[k][dst] = v[filled.to(v.device)].to(self.device)  # episode by episode, in order
        for k, v in ep_batch.data.episode_data.items():
            self.consts[k][slots] = v.to(self.device)
        starts = self.head + torch.cumsum(rows, 0) - rows
        self.offset[slots] = self._wrap(starts)
        self.rows[slots] = rows
        self.head = (self.head + total) % self.span
        self.used += total

    def refill(self, slot: int, episode: EpisodeBatch) -> None:
        """Put `episode` (a batch of one) back in `slot` of a buffer emptied by clear(), the held
        episodes given oldest first (a log's replay, which then sets buffer_index); the rows go
        where they would have gone had the episodes entered in that order."""
        self._append(slice(slot, slot + 1), episode)
        self.episodes_in_buffer = max(self.episodes_in_buffer, slot + 1)

    def age_order(self, n: int, buffer_index: int) -> list:
        """The slots of n held episodes, oldest first, for a ring that goes on at buffer_index."""
        return (
            list(range(buffer_index, n)) + list(range(buffer_index))
            if n == self.buffer_size
            else list(range(n))
        )

    def clear(self) -> None:
        self.buffer_index = self.episodes_in_buffer = 0
        self.head = self.used = 0
        self.rows.zero_()

    # --- reading ------------------------------------------------------------------------------
    def _padded_index(self, ep_ids, length):
        """Pool rows of episodes ep_ids over `length` steps [B, length] (the zero row past each
        episode's end) and the steps' validity [B, length]."""
        ep_ids = torch.as_tensor(ep_ids, dtype=torch.long)
        t = torch.arange(length)
        idx = self._wrap(self.offset[ep_ids][:, None] + t)
        valid = t < self.rows[ep_ids][:, None]
        return torch.where(valid, idx, self.max_rows), valid

    def episodes(self, ep_ids, length: int | None = None, fields=None) -> EpisodeBatch:
        """Stored episodes as a batch padded with zeros to `length` steps (their longest: None),
        of every field or of `fields` only."""
        if not torch.is_tensor(ep_ids):
            ep_ids = torch.as_tensor(np.asarray(ep_ids))
        ep_ids = ep_ids.long().cpu()
        if length is None:
            length = int(self.rows[ep_ids].max())
        idx, _ = self._padded_index(ep_ids, length)
        idx = idx.to(self.device)
        ids = ep_ids.to(self.device)
        wanted = lambda k: fields is None or k in fields  # noqa: E731
        data = SimpleNamespace(
            transition_data={k: v[idx] for k, v in self.steps.items() if wanted(k)},
            episode_data={k: v[ids] for k, v in self.consts.items() if wanted(k)},
        )
        return EpisodeBatch(self.scheme, self.groups, len(ep_ids), length, data=data, device=self.device)

    def can_sample(self, batch_size: int) -> bool:
        return self.episodes_in_buffer >= batch_size

    def sample(self, batch_size: int, t_env: int = 0) -> EpisodeBatch:
        """batch_size distinct stored episodes, padded to the longest one's last filled step (what
        a learner reads). The batch carries the episodes' slots in the buffer as `ep_ids` [B]
        (what learn() takes back)."""
        assert self.can_sample(batch_size)
        if self.episodes_in_buffer == batch_size:
            ep_ids = np.arange(batch_size)
        else:
            ep_ids = np.random.choice(self.episodes_in_buffer, batch_size, replace=False)
        return self._episodes(ep_ids)

    def _episodes(self, ep_ids):
        ep_ids = torch.as_tensor(np.asarray(ep_ids), dtype=torch.long)
        batch = self.episodes(ep_ids)
        batch.ep_ids = ep_ids
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
        ep, t = torch.as_tensor(ep, dtype=torch.long).cpu(), torch.as_tensor(t, dtype=torch.long).cpu()
        idx = self._wrap(self.offset[ep][:, None] + t[:, None] + torch.arange(2)).to(self.device)
        new_data = SimpleNamespace(
            transition_data={k: v[idx] for k, v in self.steps.items()},
            episode_data={k: v[ep.to(self.device)] for k, v in self.consts.items()},
        )
        if episode_limit is not None:
            term = new_data.transition_data["terminated"]
            term[:, 0][(t == episode_limit - 1).to(self.device)] = 1
        return EpisodeBatch(self.scheme, self.groups, len(ep), 2, data=new_data, device=self.device)

    # --- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The held rows oldest first (as one or two views of the pool, no copy), each slot's
        first row among them and its row count, and the ring's position."""
        n = self.episodes_in_buffer
        tail = self._tail
        parts = [(tail, min(tail + self.used, self.span))]
        if tail + self.used > self.span:
            parts.append((0, self.head))
        steps = {}
        for k, v in self.steps.items():
            steps[k] = [row_range(v, a, b) for a, b in parts]
        offset = (self.offset[:n] - tail) % max(self.span, 1)
        return {
            "layout": "packed",
            "steps": steps,
            "episode_data": {k: first_rows(v, n) for k, v in self.consts.items()},
            "offset": offset.clone(),
            "rows": self.rows[:n].clone(),
            "buffer_index": self.buffer_index,
            "episodes_in_buffer": n,
            "buffer_size": self.buffer_size,
        }

    def load_state_dict(self, state: dict) -> None:
        if state["buffer_size"] != self.buffer_size:
            raise ValueError(
                f"it holds a buffer of buffer_size={state['buffer_size']}, this run's is {self.buffer_size}"
            )
        packed = state.get("layout") == "packed"
        theirs_steps = state["steps"] if packed else state["transition_data"]
        checks = ((self.steps, theirs_steps, 1 if packed else 2), (self.consts, state["episode_data"], 1))
        for mine, theirs, skip in checks:
            if set(mine) != set(theirs):
                raise ValueError(f"its buffer has fields {sorted(theirs)}, this run's {sorted(mine)}")
            for k, v in theirs.items():
                v = v[0] if isinstance(v, list) else v
                have, want = tuple(v.shape[skip:]), tuple(mine[k].shape[1:])
                if have != want:
                    raise ValueError(f"its buffer's '{k}' has shape {have}, this run's {want}")
        self.clear()
        n = state["episodes_in_buffer"]
        for k, v in state["episode_data"].items():
            self.consts[k][:n] = v.to(self.device)
        if packed:  # rows oldest first: they go to the pool's start
            for k, parts in state["steps"].items():
                at = 0
                for part in parts:
                    self.steps[k][at : at + len(part)] = part.to(self.device)
                    at += len(part)
            self.offset[:n] = state["offset"]
            self.rows[:n] = state["rows"]
            self.used = at
        else:  # a buffer saved padded (before packing): its filled rows, oldest first
            order = torch.tensor(self.age_order(n, state["buffer_index"]), dtype=torch.long)
            filled = state["transition_data"]["filled"][:, :, 0].bool()
            self.rows[:n] = filled.sum(1)
            rows = self.rows[order]
            self.offset[order] = torch.cumsum(rows, 0) - rows
            self.used = int(rows.sum())
            for k, v in state["transition_data"].items():
                at = 0
                for chunk in order.split(LOAD_CHUNK):  # a chunk at a time: no copy of the whole buffer
                    part = v[chunk][filled[chunk]]
                    self.steps[k][at : at + len(part)] = part.to(self.device)
                    at += len(part)
        self.span = self.used
        self.head = 0
        self.episodes_in_buffer = n
        self.buffer_index = state["buffer_index"]

    def __repr__(self):
        return (
            f"ReplayBuffer({self.episodes_in_buffer}/{self.buffer_size} episodes, {self.used} steps, "
            f"keys={list(self.scheme)}, groups={self.groups})"
        )
