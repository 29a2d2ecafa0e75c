"""The replay buffer kept as what it takes to play its episodes again.

For each stored episode: the env's random state before the episode began and what the agents
chose (their actions, and what the controller drew for the episode). Played again in the same
env, these give the same episodes, so a checkpoint can keep its buffer in a few MB where the
buffer itself (buffer.th, up to several GiB) is not kept: a sweep's archive, a fresh checkout. A
digest of the whole buffer, taken when the log is written, says whether the rebuilt buffer is
the saved one to the last bit; a buffer that is not is not used.

Runs with the episode or the parallel runner keep a log where their env can give its random state
(not the vector runner, whose envs share one stream); each episode is played again on its own."""

from __future__ import annotations

import hashlib
import json
import os
from types import SimpleNamespace

import numpy as np
import torch

from components.episode_buffer import first_rows

LOG = "buffer_log.npz"
# What the runner writes from the env (and `filled`); preprocessed fields are derived on writing.
ENV_FIELDS = ("state", "obs", "avail_actions", "reward", "terminated", "indi_terminated", "filled")


def agent_fields(buffer):
    """The fields a log keeps: what the controller wrote. -> (transition fields, episode fields)."""
    derived = {new for new, _ in buffer.preprocess.values()}
    keep = lambda store: sorted(k for k in store if k not in ENV_FIELDS and k not in derived)  # noqa: E731
    return keep(buffer.data.transition_data), keep(buffer.data.episode_data)


def digest(buffer):
    """A hash of the stored episodes: every field, and each episode's length."""
    n = buffer.episodes_in_buffer
    h = hashlib.blake2b(digest_size=16)
    for part in (buffer.data.transition_data, buffer.data.episode_data):
        for k in sorted(part):
            h.update(k.encode())
            h.update(first_rows(part[k], n).cpu().contiguous().numpy())
    h.update(first_rows(buffer._transitions, n).numpy())
    return h.hexdigest()


def _compact(a):
    """Integer fields in the smallest type that holds them (actions: one byte)."""
    if a.dtype.kind in "iu" and a.size:
        for t in (np.uint8, np.int16, np.int32):
            info = np.iinfo(t)
            if a.min() >= info.min and a.max() <= info.max:
                return a.astype(t)
    return a


def save_log(buffer, path):
    """Write the log of `buffer` to path. -> False (nothing written) when some stored episode has
    no env random state or the controller wrote fields a replay cannot give back."""
    n = buffer.episodes_in_buffer
    states = buffer.env_rng[:n]
    steps, consts = agent_fields(buffer)
    if n == 0 or steps != ["actions"] or any(s is None for s in states):
        return False
    longest = int(buffer._transitions[:n].max()) + 1
    arrays, fields = {}, {}
    for k in steps + consts:
        v = buffer.data.transition_data.get(k)
        v = first_rows(v, n)[:, :longest] if v is not None else first_rows(buffer.data.episode_data[k], n)
        a = v.cpu().numpy()
        arrays[f"field_{k}"] = _compact(a)
        fields[k] = str(a.dtype)
    meta = {
        "version": 1,
        "episodes_in_buffer": n,
        "buffer_index": buffer.buffer_index,
        "buffer_size": buffer.buffer_size,
        "fields": fields,
        "digest": digest(buffer),
        "env_rng": states,
    }
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)
    return True


def read_log(folder):
    """-> (meta, {field: tensor}) of the step folder's log, or None when it has none."""
    path = os.path.join(folder, LOG)
    if not os.path.isfile(path):
        return None
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        fields = {k: torch.from_numpy(z[f"field_{k}"].astype(dtype)) for k, dtype in meta["fields"].items()}
    return meta, fields


class _ScriptedController:
    """Plays the logged episode: the stored actions, step by step, and the stored draws."""

    action_selector = None

    def __init__(self, mac, fields, action_shape):
        self.mac, self.fields, self.action_shape, self.i = mac, fields, action_shape, 0

    def init_hidden(self, batch_size):
        pass

    def episode_data(self):
        return {k: v[self.i : self.i + 1] for k, v in self.fields.items() if k != "actions"}

    def select_actions(self, batch, t_ep, t_env, bs=slice(None), test_mode=False):
        return self.fields["actions"][self.i, t_ep].reshape(1, *self.action_shape)

    def env_actions(self, actions, batch, t, bs):
        return self.mac.env_actions(actions, batch, t, bs)


class _Silent:
    def log_stat(self, *args, **kwargs):
        pass


def rebuild(folder, buffer, args, runner):
    """Fill `buffer` by playing again the episodes that the step folder's log keeps, in a fresh
    env built as the run's. -> None when it worked, else why not (the buffer is then left empty)."""
    from runners.episode_runner import EpisodeRunner

    log = read_log(folder)
    if log is None:
        return f"the checkpoint keeps neither buffer.th nor {LOG}"
    meta, fields = log
    if meta["buffer_size"] != buffer.buffer_size:
        have, want = meta["buffer_size"], buffer.buffer_size
        return f"its log is of a buffer of buffer_size={have}, this run's is {want}"
    steps, consts = agent_fields(buffer)
    if sorted(fields) != sorted(steps + consts):
        return f"its log keeps fields {sorted(fields)}, this run's controller writes {sorted(steps + consts)}"
    vshape = buffer.scheme["actions"]["vshape"]
    n_agents = buffer.data.transition_data["actions"].shape[2]
    action_shape = (n_agents,) if tuple(vshape) == (1,) else (n_agents, *vshape)
    scheme, groups = runner.new_batch.args[0], runner.new_batch.args[1]
    player = EpisodeRunner(SimpleNamespace(**{**vars(args), "device": "cpu"}), _Silent())
    scripted = _ScriptedController(runner.mac, fields, action_shape)
    player.setup(scheme, groups, buffer.preprocess, scripted)
    try:
        buffer.buffer_index = buffer.episodes_in_buffer = 0
        for i, state in enumerate(meta["env_rng"]):
            scripted.i = i
            player.env.set_rng_state(state)
            buffer.insert_episode_batch(player.run(test_mode=False), [state])
    finally:
        player.close_env()
    buffer.buffer_index = meta["buffer_index"]
    if digest(buffer) != meta["digest"]:
        buffer.buffer_index = buffer.episodes_in_buffer = 0
        buffer.env_rng[:] = [None] * buffer.buffer_size
        return "the episodes played again differ from the saved ones"
    return None
