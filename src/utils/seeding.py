"""Seeds of the copies of an env that one run plays side by side."""

import numpy as np


def env_seed(seed, i):
    """Env i's seed in a run seeded `seed`: the run's own for env 0 (as the episode runner), one
    drawn from (seed, i) for the others. PyMARL's seed + i gives runs with neighbouring seeds
    nearly the same envs (runs 1 and 2 of 10 envs would share 9), so their tests would not be
    independent samples."""
    if i == 0:
        return seed
    return int(np.random.SeedSequence([seed, i]).generate_state(1)[0]) % 2**31
