"""Test returns of a saved run on MPE counted two ways: all 25 steps (ours), and without the last
step's reward, which is what EPyMARL reports on MPE: its PettingZoo wrapper reads the rewards of
the agents still in the env, and at the time limit PettingZoo has removed them all, so the last
step's rewards become 0.

    python bench/mpe_last_step.py <results>/models/<run token> --config mappo [--episodes 500] [key=value ...]

Plays the saved policy (test mode, as the run's tests do) with the config's settings plus the
given overrides; prints one JSON line with both means and their difference.
"""

import argparse
import json
from types import SimpleNamespace

import numpy as np
import torch


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", help="a run's models folder (the latest step is taken) or one step folder")
    p.add_argument("--config", default="mappo")
    p.add_argument("--episodes", type=int, default=500)
    p.add_argument("overrides", nargs="*")
    a = p.parse_intermixed_args()

    from assembly import build
    from config import load_config
    from utils.checkpoint import find_checkpoint, load_checkpoint
    from utils.logger import Logger, get_console_logger

    torch.manual_seed(0)
    np.random.seed(0)
    argv = [f"--config={a.config}", "--env-config=mpe", "with", "seed=0", "runner=vector", *a.overrides]
    args = SimpleNamespace(**load_config(argv))
    args.device, args.unique_token = "cpu", "bench"
    parts = build(args, Logger(get_console_logger()), buffer=False)
    runner, learner = parts.runner, parts.learner
    load_checkpoint(find_checkpoint(a.checkpoint), learner, "cpu")

    full, cut = [], []
    while len(full) < a.episodes:
        batch = runner.run(test_mode=True)
        rewards = batch["reward"][:, :-1].sum(-1)  # [B, T] team reward per step
        lengths = batch["filled"][:, :-1, 0].sum(1).long()
        for b in range(batch.batch_size):
            r = rewards[b, : lengths[b]]
            full.append(r.sum().item())
            cut.append(r[:-1].sum().item())
    runner.close_env()
    full, cut = np.array(full[: a.episodes]), np.array(cut[: a.episodes])
    print(
        json.dumps(
            {
                "episodes": len(full),
                "return_all_steps": round(full.mean(), 2),
                "return_without_last_step": round(cut.mean(), 2),
                "last_step_reward": round((full - cut).mean(), 2),
                "stderr": round(full.std() / np.sqrt(len(full)), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
