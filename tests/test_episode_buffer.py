import os

import numpy as np
import pytest
import torch

from components.episode_buffer import EpisodeBatch, ReplayBuffer
from components.transforms import OneHot

N, A = 3, 4


def scheme():
    return {
        "state": {"vshape": 5},
        "obs": {"vshape": 6, "group": "agents"},
        "avail_actions": {"vshape": (A,), "group": "agents", "dtype": torch.uint8},
        "actions": {"vshape": (1,), "group": "agents", "dtype": torch.long},
        "reward": {"vshape": (1,)},
        "terminated": {"vshape": (1,), "dtype": torch.uint8},
        "indi_terminated": {"vshape": (N,), "dtype": torch.uint8},
        "ep_id": {"vshape": (1,), "episode_const": True},
    }


def batch(bs=2, t=7):
    return EpisodeBatch(
        scheme(), {"agents": N}, bs, t, preprocess={"actions": ("actions_onehot", [OneHot(out_dim=A)])}
    )


def test_shapes_and_dtypes():
    b = batch()
    assert b["obs"].shape == (2, 7, N, 6)
    assert b["state"].shape == (2, 7, 5)
    assert b["indi_terminated"].shape == (2, 7, N) and b["indi_terminated"].dtype == torch.uint8
    assert b["actions"].dtype == torch.long
    assert b["actions_onehot"].shape == (2, 7, N, A) and b["actions_onehot"].dtype == torch.float32
    assert b["ep_id"].shape == (2, 1)
    assert b["filled"].shape == (2, 7, 1)


def test_filled_in_scheme_raises():
    s = scheme()
    s["filled"] = {"vshape": 1}
    with pytest.raises(ValueError, match="reserved"):
        EpisodeBatch(s, {"agents": N}, 1, 3)


def test_onehot_written_with_actions():
    b = batch()
    b.update({"actions": [[[2], [0], [3]]]}, bs=1, ts=4, mark_filled=False)
    assert b["actions_onehot"][1, 4].argmax(-1).tolist() == [2, 0, 3]
    assert b["actions_onehot"][1, 4].sum().item() == N
    assert b["actions_onehot"].sum().item() == N  # every other slot stays zero


def test_filled_marking():
    b = batch()
    b.update({"state": np.ones((1, 5))}, bs=0, ts=2)
    assert b["filled"][:, :, 0].tolist() == [[0, 0, 1, 0, 0, 0, 0], [0] * 7]
    b.update({"reward": [[1.0]]}, bs=0, ts=3, mark_filled=False)
    assert b["filled"][0, 3, 0] == 0
    assert b["reward"][0, 3, 0] == 1.0


def test_unsafe_shape_raises():
    b = batch()
    with pytest.raises(ValueError, match="cannot write 'obs'"):
        b.update({"obs": np.zeros((N, 5))}, bs=0, ts=0)
    with pytest.raises(ValueError):
        b.update({"state": np.zeros((2, 5))}, bs=0, ts=0)


def test_slicing_views_and_copies():
    b = batch(bs=4)
    b.update({"state": np.arange(4 * 7 * 5, dtype=np.float32).reshape(4, 7, 5)})
    view = b[1:3, 2:5]
    assert view.batch_size == 2 and view.max_seq_length == 3
    assert torch.equal(view["state"], b["state"][1:3, 2:5])
    view["state"][0, 0, 0] = -1.0  # slices are views
    assert b["state"][1, 2, 0] == -1.0
    copy = b[[0, 3]]
    assert copy.batch_size == 2 and torch.equal(copy["state"][1], b["state"][3])
    copy["state"][0, 0, 0] = -5.0  # index lists are copies
    assert b["state"][0, 0, 0] != -5.0
    sub = b[("state", "obs")]
    assert set(sub.data.transition_data) == {"state", "obs"}
    with pytest.raises(IndexError):
        b[0, [1, 2]]


def test_max_t_filled_and_truncation():
    b = batch(bs=3, t=9)
    for ep, length in enumerate([3, 6, 2]):
        b.update({"state": np.ones((length, 5))}, bs=ep, ts=slice(0, length))
    assert b.max_t_filled() == 6
    short = b[:, : b.max_t_filled()]
    assert short["filled"].sum() == b["filled"].sum()


def replay(size):
    return ReplayBuffer(
        scheme(), {"agents": N}, size, 7, preprocess={"actions": ("actions_onehot", [OneHot(out_dim=A)])}
    )


def held(buf, k):
    """Field k of every held episode, padded to the full length (slot order)."""
    return buf.episodes(range(buf.episodes_in_buffer), buf.max_seq_length)[k]


def fill(b, ids):
    for i, ep_id in enumerate(ids):
        b.update({"ep_id": [[ep_id]], "state": np.full((7, 5), ep_id)}, bs=i, ts=slice(0, 7))
    return b


def test_buffer_wraps_around():
    buf = replay(5)
    buf.insert_episode_batch(fill(batch(bs=3), [0, 1, 2]))
    assert buf.buffer_index == 3 and buf.episodes_in_buffer == 3
    buf.insert_episode_batch(fill(batch(bs=3), [3, 4, 5]))  # straddles the end
    assert buf.buffer_index == 1 and buf.episodes_in_buffer == 5
    assert held(buf, "ep_id")[:, 0].tolist() == [5, 1, 2, 3, 4]
    assert held(buf, "state")[0, 0, 0] == 5
    buf.insert_episode_batch(fill(batch(bs=2), [6, 7]))
    assert held(buf, "ep_id")[:, 0].tolist() == [5, 6, 7, 3, 4]
    assert buf.episodes_in_buffer == 5


class _Runner:
    """Gives the env states the coming episodes begin from, as the episode and parallel runners."""

    replayable_episodes = True

    def __init__(self):
        self.coming = []

    def env_rng_states(self):
        return self.coming


def test_each_slot_keeps_the_env_state_its_episode_began_from():
    # The run's state pairs each stored episode with its env's random state: across the wrap too.
    from resume import RunState

    buf, runner = replay(5), _Runner()
    state = RunState(buf, runner)
    for ids in ([0, 1, 2], [3, 4, 5]):
        runner.coming = [{"s": i} for i in ids]
        state.before_training_episodes(runner)
        state.stored(buf.insert_episode_batch(fill(batch(bs=3), ids)))
    assert [e["s"] for e in state.env_rng] == held(buf, "ep_id")[:, 0].long().tolist() == [5, 1, 2, 3, 4]
    assert buf.insert_episode_batch(fill(batch(bs=3), [6, 7, 8])) == [1, 2, 3]  # the slots, in order
    runner.replayable_episodes = False  # a runner whose episodes cannot be played again alone
    assert RunState(buf, runner).env_rng == []


@pytest.mark.parametrize("ids", [[0, 1, 2], [0, 1, 2, 3, 4, 5]])  # part filled; wrapped around
def test_buffer_state_round_trip(tmp_path, ids):
    buf = replay(5)
    buf.insert_episode_batch(fill(batch(bs=len(ids)), ids))
    torch.save(buf.state_dict(), tmp_path / "b.th")
    if len(ids) < 5:  # only the filled slots are written, not the storage they are views of
        full = replay(5)
        full.insert_episode_batch(fill(batch(bs=5), range(5)))
        torch.save(full.state_dict(), tmp_path / "full.th")
        assert os.path.getsize(tmp_path / "b.th") < 0.8 * os.path.getsize(tmp_path / "full.th")
    back = replay(5)
    back.load_state_dict(torch.load(tmp_path / "b.th", weights_only=True))
    assert (back.buffer_index, back.episodes_in_buffer) == (buf.buffer_index, buf.episodes_in_buffer)
    for k in ("ep_id", "state", "actions_onehot", "filled"):
        assert torch.equal(held(back, k), held(buf, k)), k
    assert torch.equal(back._transitions, buf._transitions)
    # and it goes on as the original does
    for b in (buf, back):
        b.insert_episode_batch(fill(batch(bs=2), [8, 9]))
    assert held(back, "ep_id")[:, 0].tolist() == held(buf, "ep_id")[:, 0].tolist()


def test_buffer_state_is_not_a_copy():
    # A checkpoint must not need a second buffer's worth of memory: its tensors share the pool's
    # memory, over storages that hold only the rows held.
    buf = replay(5)
    buf.insert_episode_batch(fill(batch(bs=3), [0, 1, 2]))
    state = buf.state_dict()
    for k, parts in state["steps"].items():
        own = buf.steps[k]
        (v,) = parts
        assert v.data_ptr() == own.data_ptr() and torch.equal(v, own[: buf.used]), k
        assert v.untyped_storage().nbytes() == own[: buf.used].numel() * own.element_size(), k


def test_buffer_state_of_another_shape_is_refused():
    buf = replay(5)
    buf.insert_episode_batch(fill(batch(bs=2), [0, 1]))
    with pytest.raises(ValueError, match="buffer_size=5, this run's is 6"):
        replay(6).load_state_dict(buf.state_dict())
    state = buf.state_dict()
    state["steps"]["obs"] = [v[..., :4] for v in state["steps"]["obs"]]
    with pytest.raises(ValueError, match="'obs' has shape"):
        replay(5).load_state_dict(state)


def test_buffer_sampling_uniform_and_distinct():
    buf = replay(10)
    buf.insert_episode_batch(fill(batch(bs=2), [0, 1]))
    assert not buf.can_sample(3) and buf.can_sample(2)
    buf.insert_episode_batch(fill(batch(bs=4), [2, 3, 4, 5]))
    counts = np.zeros(6)
    for _ in range(3000):
        ids = buf.sample(3)["ep_id"][:, 0].long().tolist()
        assert len(set(ids)) == 3
        counts[ids] += 1
    freq = counts / counts.sum()
    assert np.all(np.abs(freq - 1 / 6) < 0.02), freq


# "meta" is a real second device on every machine: moving to it changes where tensors live.
DEVICES = [
    "meta",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]


@pytest.mark.parametrize("device", DEVICES)
def test_buffer_stays_on_cpu_and_only_the_sample_moves(device):
    buf = replay(4)
    buf.insert_episode_batch(fill(batch(bs=4), [0, 1, 2, 3]))
    s = buf.sample(2)
    assert s["state"].device.type == "cpu"
    s.to(device)
    moved = [*s.data.transition_data.values(), *s.data.episode_data.values()]
    assert moved and all(v.device.type == device for v in moved)
    kept = [*buf.steps.values(), *buf.consts.values()]
    assert all(v.device.type == "cpu" for v in kept)


def test_transition_sampling_windows():
    """Single transitions: uniform over stored ones, as [t, t + 1] windows of one episode,
    never the final observation's row, and the limit marked terminal only when asked."""
    buf = replay(10)
    lengths = [6, 6, 3]  # filled rows 7, 7, 4 (the final observation has its own row)
    b = batch(bs=3)
    for i, n in enumerate(lengths):
        ts = slice(0, n + 1)
        b.update({"ep_id": [[i]], "state": np.arange(n + 1)[:, None] * np.ones(5) + 10 * i}, bs=i, ts=ts)
        b.update(
            {
                "reward": (np.arange(n) + 10.0 * i)[:, None],
                "terminated": np.eye(n, dtype=np.uint8)[-1:].T * (i == 2),
            },
            bs=i,
            ts=slice(0, n),
            mark_filled=False,
        )
    buf.insert_episode_batch(b)
    assert buf.can_sample_transitions(15) and not buf.can_sample_transitions(16)
    torch.manual_seed(0)
    s = buf.sample_transitions(6000, episode_limit=6)
    assert s.max_seq_length == 2 and s.batch_size == 6000 and s["filled"][:, 0].all()
    state = s["state"][:, :, 0]
    ep, t = s["ep_id"][:, 0].long(), (state[:, 0] - 10 * s["ep_id"][:, 0]).long()
    assert torch.equal(state[:, 1], state[:, 0] + 1)  # consecutive steps of one episode
    assert torch.equal(s["reward"][:, 0, 0], state[:, 0])  # the reward of step t
    assert (t < torch.tensor(lengths)[ep]).all()  # a transition, not the final observation
    counts = torch.bincount(ep * 6 + t, minlength=18).float()
    valid = counts[torch.tensor([e * 6 + k for e, n in enumerate(lengths) for k in range(n)])]
    assert valid.sum() == 6000 and (valid / 6000 - 1 / 15).abs().max() < 0.015
    term = s["terminated"][:, 0, 0].bool()
    assert torch.equal(term, (t == 5) | ((ep == 2) & (t == 2)))  # the limit and a true end
    s = buf.sample_transitions(2000)
    t = (s["state"][:, 0, 0] - 10 * s["ep_id"][:, 0]).long()
    assert not s["terminated"][:, 0, 0][t == 5].any()  # bootstrapping through the limit
    assert held(buf, "terminated").sum() == 1  # samples are copies


def test_sampled_episodes_end_at_the_longest_ones_last_step():
    """sample() copies only up to the longest sampled episode's last filled step: the same data
    as copying whole episodes and cutting them there, and nothing filled is cut off."""
    buf = replay(10)
    lengths = [2, 7, 4, 3, 5]
    b = batch(bs=5)
    for i, n in enumerate(lengths):
        b.update({"ep_id": [[i]], "state": np.full((n, 5), i + 1)}, bs=i, ts=slice(0, n))
    buf.insert_episode_batch(b)
    seen = set()
    for seed in range(40):
        np.random.seed(seed)
        s = buf.sample(2)
        ids = s["ep_id"][:, 0].long().tolist()
        assert s.max_seq_length == max(lengths[i] for i in ids)
        whole = buf.episodes(ids, buf.max_seq_length)
        for key in whole.data.transition_data:
            assert torch.equal(s[key], whole[key][:, : s.max_seq_length]), key
        assert s["filled"].sum() == whole["filled"].sum()
        seen.add(s.max_seq_length)
    assert seen == {3, 4, 5, 7}  # the larger of two of the five lengths: any but the shortest
    assert buf.sample(5).max_seq_length == 7  # the whole buffer at once


def test_buffer_log_keeps_what_the_agents_chose_and_a_digest_of_the_rest(tmp_path):
    from components.replay_log import digest, read_log, save_log

    buf = replay(5)
    b = fill(batch(bs=3), [0, 1, 2])
    for i in range(3):
        chosen = (np.arange(7)[:, None, None] + np.arange(N)[None, :, None] + i) % A
        b.update({"actions": chosen}, bs=i, ts=slice(0, 7))
    states = [{"s": 0}, {"s": 1}, {"s": 2}, None, None]  # per slot
    assert buf.insert_episode_batch(b) == [0, 1, 2]
    assert save_log(buf, states, str(tmp_path / "buffer_log.npz"))
    meta, fields = read_log(str(tmp_path))
    assert meta["env_rng"] == [{"s": 0}, {"s": 1}, {"s": 2}] and meta["digest"] == digest(buf)
    assert torch.equal(fields["actions"], held(buf, "actions")) and fields["actions"].dtype == torch.long
    assert torch.equal(fields["ep_id"], held(buf, "ep_id"))
    assert sorted(fields) == ["actions", "ep_id"]  # nothing the env wrote, nothing derived
    buf.steps["obs"][int(buf.offset[1]) + 2, 0, 0] += 1e-6
    assert digest(buf) != meta["digest"]  # any bit of any field

    buf.insert_episode_batch(fill(batch(bs=1), [3]))  # an episode whose env state is unknown
    assert not save_log(buf, states, str(tmp_path / "other.npz")) and not (tmp_path / "other.npz").exists()
    assert not save_log(buf, [], str(tmp_path / "other.npz"))  # no states kept (vector runner)
