"""Short learning checks: QMIX must clearly beat a random team."""

import glob
import json
import os

import main


def return_curve(results):
    path = glob.glob(os.path.join(str(results), "sacred", "*", "*", "*", "1", "metrics.json"))[0]
    with open(path) as f:
        return json.load(f)["test_return_mean"]["values"]


def test_qmix_learns_small_cooperative_task(tmp_path):
    # Each agent gets the team's hit and the mean keeps it at 1 per step: a random team scores
    # about 10/9 per episode, the best team 10.
    argv = [
        "--config=qmix",
        "--env-config=mpe",
        "with",
        "env_args.key=pz_coop",
        "env_args.max_cycles=10",
        "reward_scalarisation=mean",
        "agent=mlp",
        "t_max=6000",
        "epsilon_anneal_time=2000",
        "test_interval=2000",
        "test_nepisode=32",
        "batch_size=16",
        "target_update_interval=50",
        "seed=3",
        f"local_results_path={tmp_path}",
    ]
    assert main.main(argv) == 0
    curve = return_curve(tmp_path)
    assert curve[-1] >= 8.0, curve
