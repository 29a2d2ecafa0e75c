"""Peak memory of a training run and what its replay buffer holds (issue 100).

Runs `python src/main.py ARGS` in a child process and prints its peak resident memory (the
largest of the run's processes: the training process) and the console's buffer lines.

    python bench/buffer_memory.py --config=qmix_pymarl --env-config=skirmish with \\
        env_args.map_name=2s3z t_max=400000 buffer_size=5000 torch_threads=1

With --fill, the run's own episodes are not needed: the script fills a buffer of the env's
scheme with episodes of uniformly random available actions until it holds buffer_size episodes,
and prints its bytes against a buffer of padded episodes (what it held before):

    python bench/buffer_memory.py --fill skirmish MMM2 5000
"""

import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(argv):
    started = time.time()
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "src", "main.py"), *argv], capture_output=True, text=True
    )
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    lines = (proc.stdout + proc.stderr).splitlines()
    for line in lines:
        if "replay buffer" in line or "run completed" in line:
            print(line.strip())
    print(f"rc {proc.returncode}; peak RSS {peak_kib / 2**20:.2f} GiB; {time.time() - started:.0f} s")


def fill(env_config, map_name, size):
    import numpy as np
    import torch

    from components.episode_buffer import EpisodeBatch, ReplayBuffer
    from components.transforms import OneHot
    from envs import REGISTRY as env_REGISTRY

    env = env_REGISTRY[env_config](map_name=map_name, seed=0)
    info = env.get_env_info()
    n, a, limit = info["n_agents"], info["n_actions"], info["episode_limit"]
    scheme = {
        "state": {"vshape": info["state_shape"]},
        "obs": {"vshape": info["obs_shape"], "group": "agents"},
        "actions": {"vshape": (1,), "group": "agents", "dtype": torch.long},
        "avail_actions": {"vshape": (a,), "group": "agents", "dtype": torch.uint8},
        "reward": {"vshape": (1,)},
        "terminated": {"vshape": (1,), "dtype": torch.uint8},
        "indi_terminated": {"vshape": (n,), "dtype": torch.uint8},
    }
    pre = {"actions": ("actions_onehot", [OneHot(out_dim=a)])}
    buf = ReplayBuffer(scheme, {"agents": n}, size, limit + 1, preprocess=pre)
    rng = np.random.default_rng(0)
    lengths = []
    while buf.episodes_in_buffer < size or buf.buffer_index != 0:
        b = EpisodeBatch(scheme, {"agents": n}, 1, limit + 1, preprocess=pre)
        env.reset()
        t, done = 0, False
        while not done:
            avail = np.array(env.get_avail_actions())
            actions = np.array([rng.choice(np.flatnonzero(row)) for row in avail])
            b.update({"state": [env.get_state()], "obs": [env.get_obs()], "avail_actions": [avail]}, ts=t)
            b.update({"actions": actions.reshape(1, n, 1)}, ts=t)
            reward, done, _ = env.step(actions)
            b.update({"reward": [[reward]], "terminated": [[int(done)]]}, ts=t, mark_filled=False)
            t += 1
        b.update(
            {"state": [env.get_state()], "obs": [env.get_obs()], "avail_actions": [env.get_avail_actions()]},
            ts=t,
        )
        buf.insert_episode_batch(b)
        lengths.append(t)
        if buf.episodes_in_buffer == size and buf.buffer_index == 0:
            break
    held, full = buf.nbytes(), buf.full_nbytes()
    print(
        f"{env_config} {map_name}: {size} episodes of random play, mean length {np.mean(lengths):.1f} of "
        f"{limit}; holds {buf.used * buf.row_bytes() / 2**30:.3f} GiB, takes {held / 2**30:.3f} GiB "
        f"(span {buf.span} rows for {buf.used}); padded episodes took {full / 2**30:.3f} GiB: "
        f"{held / full:.2f} of it"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fill"]:
        fill(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        run(sys.argv[1:])
