"""The replay buffer kept as what it takes to play its episodes again.

For each stored episode: the env's random state before the episode began and what the agents
chose (their actions, and what the controller drew for the episode). Played again in the same
env, these give the same episodes, so a checkpoint can keep its buffer in a few MB where the
buffer itself (buffer.th, up to several GiB) is not kept: a sweep's archive, a fresh checkout. A
digest of the whole buffer, taken when the log is written, says whether the rebuilt buffer is
the saved one to the last bit; a buffer that is not is not used.

Runs with the episode or the parallel runner keep a log where their env can give its random state
(not the vector runner, whose envs share one stream); runners/replay.py plays it again."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import torch

from components.episode_buffer import POST_FIELDS, PRE_FIELDS, first_rows

LOG = "buffer_log.npz"


def agent_fields(buffer):
    """The fields a log keeps: what the controller wrote, not what the env wrote (the scheme's
    from_env fields, and `filled`) nor the fields derived on writing (one-hot actions).
    -> (transition fields, episode fields)."""
    derived = {new for new, _ in buffer.preprocess.values()}
    from_env = {k for k, info in buffer.scheme.items() if info.get("from_env")}
    from_env |= {*PRE_FIELDS, *POST_FIELDS, "filled"}
    keep = lambda store: sorted(k for k in store if k not in from_env and k not in derived)  # noqa: E731
    return keep(buffer.steps), keep(buffer.consts)


DIGEST_CHUNK = 256  # episodes laid out at a time for the digest


def digest(buffer):
    """A hash of the stored episodes: every field of every slot as a buffer of padded episodes
    holds it (the episodes at the full length, zeros past their end: what buffers before the
    packed one stored, so their logs still check), and each episode's length."""
    n = buffer.episodes_in_buffer
    h = hashlib.blake2b(digest_size=16)
    for k in sorted(buffer.steps):
        h.update(k.encode())
        for start in range(0, n, DIGEST_CHUNK):
            ids = range(start, min(n, start + DIGEST_CHUNK))
            chunk = buffer.episodes(ids, buffer.max_seq_length, fields=(k,))
            h.update(chunk[k].cpu().contiguous().numpy())
    for k in sorted(buffer.consts):
        h.update(k.encode())
        h.update(first_rows(buffer.consts[k], n).cpu().contiguous().numpy())
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


def save_log(buffer, env_rng, path):
    """Write the log of `buffer` to path; env_rng: per slot, the random state its episode's env
    began from (None: not known). -> False (nothing written) when some stored episode's is not
    known or the controller wrote fields a replay cannot give back."""
    n = buffer.episodes_in_buffer
    states = list(env_rng[:n])
    steps, consts = agent_fields(buffer)
    if n == 0 or len(states) < n or steps != ["actions"] or any(s is None for s in states):
        return False
    stored = buffer.episodes(range(n), fields=steps)  # padded to the longest
    arrays, fields = {}, {}
    for k in steps + consts:
        a = (stored[k] if k in buffer.steps else first_rows(buffer.consts[k], n)).cpu().numpy()
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
    if hasattr(buffer, "priorities"):  # prioritised replay: what it learned of each episode
        arrays["priorities"] = buffer.priorities[:n].copy()
        meta["max_priority"] = buffer.max_priority
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)
    return True


def read_log(folder):
    """-> (meta, {field: tensor}) of the step folder's log, or None when it has none. A prioritised
    buffer's priorities come as meta["priorities"] (a list)."""
    path = os.path.join(folder, LOG)
    if not os.path.isfile(path):
        return None
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        fields = {k: torch.from_numpy(z[f"field_{k}"].astype(dtype)) for k, dtype in meta["fields"].items()}
        if "priorities" in z.files:
            meta["priorities"] = z["priorities"].tolist()
    return meta, fields
