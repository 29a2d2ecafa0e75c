"""The packed replay buffer against a buffer of padded episodes (what it replaced, PyMARL's
layout, written here as the reference): the same sampled content for the same draws, through
wraps of the episode ring and widenings of the step pool; memory as the held steps; checkpoints
of either layout; a log's digest as the padded buffer's."""

import hashlib

import numpy as np
import pytest
import torch

from components.episode_buffer import GROWTH, EpisodeBatch, ReplayBuffer
from components.prioritised_buffer import PrioritisedReplayBuffer
from components.replay_log import digest
from components.transforms import OneHot

N, A, T = 3, 4, 9  # agents, actions, stored length (episode limit 8)


def scheme():
    return {
        "state": {"vshape": 5},
        "obs": {"vshape": 6, "group": "agents"},
        "avail_actions": {"vshape": (A,), "group": "agents", "dtype": torch.uint8},
        "actions": {"vshape": (1,), "group": "agents", "dtype": torch.long},
        "reward": {"vshape": (1,)},
        "terminated": {"vshape": (1,), "dtype": torch.uint8},
        "ep_id": {"vshape": (1,), "episode_const": True},
    }


PRE = {"actions": ("actions_onehot", [OneHot(out_dim=A)])}


def episodes(lengths, first_id, seed):
    """Random episodes of the given numbers of transitions (filled rows: one more)."""
    g = torch.Generator().manual_seed(seed)
    b = EpisodeBatch(scheme(), {"agents": N}, len(lengths), T, preprocess=PRE)
    for i, n in enumerate(lengths):
        rows = slice(0, n + 1)
        b.update(
            {
                "ep_id": [[first_id + i]],
                "state": torch.randn(n + 1, 5, generator=g),
                "obs": torch.randn(n + 1, N, 6, generator=g),
                "avail_actions": (torch.rand(n + 1, N, A, generator=g) > 0.3).to(torch.uint8),
                "actions": torch.randint(A, (n + 1, N, 1), generator=g),
            },
            bs=i,
            ts=rows,
        )
        term = torch.zeros(n, 1)
        term[-1] = float(n < T - 1)
        b.update(
            {"reward": torch.randn(n, 1, generator=g), "terminated": term},
            bs=i,
            ts=slice(0, n),
            mark_filled=False,
        )
    return b


class PaddedReference:
    """The layout the packed buffer replaced: every episode padded to T in a ring of slots."""

    def __init__(self, size):
        self.size, self.index, self.count = size, 0, 0
        self.data = EpisodeBatch(scheme(), {"agents": N}, size, T, preprocess=PRE)

    def insert(self, b):
        for i in range(b.batch_size):
            for store, mine in ((b.data.transition_data, self.data.data.transition_data),
                                (b.data.episode_data, self.data.data.episode_data)):  # fmt: skip
                for k, v in store.items():
                    mine[k][self.index] = v[i]
            self.index = (self.index + 1) % self.size
            self.count = min(self.count + 1, self.size)

    def sample(self, ids):
        rows = self.data.data.transition_data["filled"][ids, :, 0].sum(1)
        return self.data[ids, : int(rows.max())]

    def digest(self):
        h = hashlib.blake2b(digest_size=16)
        for part in (self.data.data.transition_data, self.data.data.episode_data):
            for k in sorted(part):
                h.update(k.encode())
                h.update(part[k][: self.count].contiguous().numpy())
        filled = self.data.data.transition_data["filled"][: self.count, :, 0].sum(1)
        h.update((filled - 1).clamp(min=0).float().numpy())
        return h.hexdigest()


def same(a, b):
    assert a.batch_size == b.batch_size and a.max_seq_length == b.max_seq_length
    for k in b.data.transition_data:
        assert torch.equal(a[k], b[k]), k
    for k in b.data.episode_data:
        assert torch.equal(a[k], b[k]), k


def stream(seed, n_batches=40, size=11):
    rng = np.random.default_rng(seed)
    first = 0
    for j in range(n_batches):
        k = int(rng.integers(1, 5))
        lengths = rng.integers(1, T, size=k).tolist()  # 1 .. T - 1 transitions
        yield episodes(lengths, first, seed * 1000 + j)
        first += k


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_same_batches_as_padded_episodes_through_wraps_and_widenings(seed):
    buf, ref = ReplayBuffer(scheme(), {"agents": N}, 11, T, preprocess=PRE), PaddedReference(11)
    spans = set()
    for b in stream(seed):
        buf.insert_episode_batch(b)
        ref.insert(b)
        spans.add(buf.span)
        assert (buf.buffer_index, buf.episodes_in_buffer) == (ref.index, ref.count)
        if buf.can_sample(4):
            np.random.seed(seed)
            s = buf.sample(4)
            np.random.seed(seed)
            ids = np.random.choice(ref.count, 4, replace=False) if ref.count > 4 else np.arange(4)
            same(s, ref.sample(ids))
        everything = buf.episodes(range(buf.episodes_in_buffer), T)
        same(everything, ref.data[: ref.count])
    assert len(spans) > 3  # the pool widened several times, the ring wrapped many times
    assert digest(buf) == ref.digest()  # a log written by either checks against the other
    torch.manual_seed(seed)
    ep = torch.multinomial(buf._transitions[:11], 50, replacement=True)
    t = (torch.rand(50) * buf._transitions[ep]).long()
    w = buf.transition_windows(ep, t)
    for k, v in ref.data.data.transition_data.items():
        assert torch.equal(w[k], v[ep[:, None], t[:, None] + torch.arange(2)]), k


def test_memory_follows_the_steps_held():
    buf = ReplayBuffer(scheme(), {"agents": N}, 200, T, preprocess=PRE)
    for j in range(60):  # episodes of 2 transitions: 3 rows of the 9 a padded buffer takes
        buf.insert_episode_batch(episodes([2, 2, 2, 2], 4 * j, j))
    assert buf.used == 200 * 3
    assert buf.span <= GROWTH * buf.used + 4 * T
    padded = buf.full_nbytes()
    assert buf.nbytes() < 0.45 * padded  # 3 of 9 rows, and the pool's slack


def test_a_prioritised_buffer_draws_the_same_episodes_as_before():
    kw = dict(alpha=0.6, epsilon=1e-6, beta=lambda t: 0.4, preprocess=PRE)
    buf = PrioritisedReplayBuffer(scheme(), {"agents": N}, 11, T, **kw)
    ref = PaddedReference(11)
    for j, b in enumerate(stream(5, 20)):
        buf.insert_episode_batch(b)
        ref.insert(b)
        if buf.can_sample(4):
            np.random.seed(j)
            s = buf.sample(4)
            buf.learn(s.ep_ids, {"priorities": torch.rand(4)})
            same(s, ref.sample(s.ep_ids.numpy()))


@pytest.mark.parametrize("n_batches", [2, 40])  # part filled; wrapped many times
def test_a_padded_checkpoint_loads_and_goes_on_as_the_packed_buffer(n_batches):
    batches = list(stream(7, n_batches))
    buf, ref = ReplayBuffer(scheme(), {"agents": N}, 11, T, preprocess=PRE), PaddedReference(11)
    for b in batches:
        buf.insert_episode_batch(b)
        ref.insert(b)
    n = ref.count
    old = {  # what buffers before the packed one saved
        "transition_data": {k: v[:n] for k, v in ref.data.data.transition_data.items()},
        "episode_data": {k: v[:n] for k, v in ref.data.data.episode_data.items()},
        "transitions": (ref.data.data.transition_data["filled"][:n, :, 0].sum(1) - 1).float(),
        "buffer_index": ref.index,
        "episodes_in_buffer": n,
        "buffer_size": 11,
    }
    for state in (old, buf.state_dict()):
        back = ReplayBuffer(scheme(), {"agents": N}, 11, T, preprocess=PRE)
        back.load_state_dict(state)
        assert digest(back) == digest(buf)
        for b in stream(8, 10):
            back.insert_episode_batch(b)
        other = ReplayBuffer(scheme(), {"agents": N}, 11, T, preprocess=PRE)
        other.load_state_dict(buf.state_dict())
        for b in stream(8, 10):
            other.insert_episode_batch(b)
        same(
            back.episodes(range(back.episodes_in_buffer), T),
            other.episodes(range(other.episodes_in_buffer), T),
        )


def test_refilled_oldest_first_it_goes_on_as_the_original():
    # A log's replay puts each episode back in its slot, oldest first, then sets the ring's
    # position: the buffer is the original, and the oldest episode still leaves first.
    batches = list(stream(3, 30))
    buf = ReplayBuffer(scheme(), {"agents": N}, 11, T, preprocess=PRE)
    for b in batches:
        buf.insert_episode_batch(b)
    assert buf.episodes_in_buffer == 11 and buf.buffer_index != 0
    whole = buf.episodes(range(11), T)
    again = ReplayBuffer(scheme(), {"agents": N}, 11, T, preprocess=PRE)
    again.insert_episode_batch(whole[:3, :])  # what was there before is cleared
    again.clear()
    for i in again.age_order(11, buf.buffer_index):
        again.refill(i, whole[i : i + 1, :])
    again.buffer_index = buf.buffer_index
    assert digest(again) == digest(buf)
    for b in stream(4, 12):
        buf.insert_episode_batch(b)
        again.insert_episode_batch(b)
        same(again.episodes(range(11), T), buf.episodes(range(11), T))
