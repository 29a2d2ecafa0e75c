"""Seeds of the copies of an env that one run plays side by side, and the random states a
checkpoint keeps."""

import random

import numpy as np


def env_seed(seed, i):
    """Env i's seed in a run seeded `seed`: the run's own for env 0 (as the episode runner), one
    drawn from (seed, i) for the others. PyMARL's seed + i gives runs with neighbouring seeds
    nearly the same envs (runs 1 and 2 of 10 envs would share 9), so their tests would not be
    independent samples."""
    if i == 0:
        return seed
    return int(np.random.SeedSequence([seed, i]).generate_state(1)[0]) % 2**31


# --- random states that a checkpoint keeps, so that a resumed run repeats the uninterrupted one -
# They are saved with torch.save and read back with weights_only=True, which takes tensors and
# plain Python values only: NumPy arrays and scalars travel as tagged lists and come back as such.

_ARRAY = "__ndarray__"


def plain(obj):
    """A state with NumPy arrays and scalars turned into Python values (see unplain)."""
    if isinstance(obj, np.ndarray):
        return {_ARRAY: obj.tolist(), "dtype": obj.dtype.str}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(plain(v) for v in obj)
    return obj


def unplain(obj):
    if isinstance(obj, dict):
        if _ARRAY in obj:
            return np.asarray(obj[_ARRAY], dtype=np.dtype(obj["dtype"]))
        return {k: unplain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(unplain(v) for v in obj)
    return obj


def generator_state(g):
    """The state of a NumPy Generator."""
    return plain(g.bit_generator.state)


def set_generator_state(g, state):
    """Put `state` (from generator_state) into the Generator g in place: whatever holds g draws
    from it."""
    g.bit_generator.state = unplain(state)


def generator_from_state(state):
    """A new NumPy Generator with `state` (from generator_state)."""
    g = np.random.Generator(getattr(np.random, state["bit_generator"])())
    set_generator_state(g, state)
    return g


def process_rng_state(device=None):
    """This process's global streams: random, numpy.random, torch (and CUDA on a GPU run)."""
    import torch  # here: env worker processes import this module and never need torch

    state = {
        "python": random.getstate(),
        "numpy": plain(np.random.get_state(legacy=False)),
        "torch": torch.get_rng_state(),
    }
    if device is not None and str(device).startswith("cuda") and torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_process_rng_state(state):
    import torch

    random.setstate(state["python"])
    np.random.set_state(unplain(state["numpy"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])
