"""Does sharing's extra weight lean to one sign of the individual TD error? For each checkpoint of
a q_divide_learner run with sharing (inspire_qmix and its arms, super_qmix), resume it for a few
thousand steps with the learner logging every update, and print the means over those updates:
the agents' utility Q_i, rho (how much the mixer reads them), |delta_i| and |delta_tot|, delta_i's
plain mean and its mean under the extra weight, and their difference (the lean) with a 95% interval
over the updates, also in units of |delta_i|. A positive lean pushes the agents' utilities down on
every update.

    OMP_NUM_THREADS=1 python bench/share_lean.py results/models/<run folder> [...] [--step 300000]
        [--steps 12000]

The resumed run starts with an empty buffer (a final checkpoint keeps none), so its batches are
the last few dozen episodes of the resumed policy, not the 5000-episode buffer of training.
Prints one markdown table row per checkpoint.
"""

import argparse
import glob
import json
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

import main  # noqa: E402
from utils.checkpoint import check_checkpoint  # noqa: E402

KEYS = ("map_name", "reward_sparse")  # env_args the resumed run must share with the saved one
LOGGED = ("q_taken_mean", "rho_abs_mean", "q_td_error_abs", "mixer_td_error_abs")
RUN_KEYS = ("seed", "schedule_horizon", "share_control", "share_to", "share_weight", "share_rule", "selected")


def resume(folder, step, steps, out):
    with open(os.path.join(check_checkpoint(folder, step), "meta.json")) as f:  # main's own choice of step
        meta = json.load(f)
    chosen, cfg = meta["t_env"], meta["config"]
    argv = [f"--config={meta['name']}", f"--env-config={meta['env']}", "with"]
    argv += [f"env_args.{k}={cfg['env_args'][k]}" for k in KEYS if k in cfg["env_args"]]
    argv += [f"{k}={cfg[k]}" for k in RUN_KEYS if cfg.get(k) is not None]
    argv += [
        f"checkpoint_path={folder}", f"load_step={chosen}", f"t_max={chosen + steps}",
        "learner_log_interval=1", f"log_interval={steps}", f"runner_log_interval={steps}",
        f"test_interval={10 * steps}", "test_nepisode=1", "save_model=False",
        f"local_results_path={out}", "torch_threads=1", "use_tensorboard=False",
    ]  # fmt: skip
    if main.main(argv) != 0:
        raise SystemExit(f"{folder}: the resumed run failed ({' '.join(argv)})")
    (metrics,) = glob.glob(os.path.join(out, "sacred", "**", "metrics.json"), recursive=True)
    with open(metrics) as f:
        return chosen, cfg, json.load(f)


def after(metrics, key, start):
    m = metrics.get(key, {"steps": [], "values": []})
    return [v for s, v in zip(m["steps"], m["values"], strict=True) if s > start]


def mean(xs):
    return sum(xs) / len(xs)


def row(folder, chosen, cfg, metrics):
    plain, weighted = after(metrics, "delta_i_mean", chosen), after(metrics, "share_delta_i_mean", chosen)
    if not weighted:
        raise SystemExit(f"{folder}: no update logged share_delta_i_mean (a run without sharing?)")
    n = min(len(plain), len(weighted))
    diff = [w - p for w, p in zip(weighted[-n:], plain[-n:], strict=True)]
    d = mean(diff)
    half = 1.96 * math.sqrt(sum((x - d) ** 2 for x in diff) / max(n - 1, 1) / n)
    arm = f"{cfg['name']} ({cfg.get('share_control')}, {cfg.get('share_to')}, seed {cfg.get('seed')})"
    logged = {k: mean(after(metrics, k, chosen)) for k in LOGGED}
    scale = max(logged["q_td_error_abs"], 1e-12)  # the lean in units of |delta_i| (sparse rewards' are tiny)
    cells = [
        arm, f"{chosen // 1000}k", str(n), f"{logged['q_taken_mean']:.2f}", f"{logged['rho_abs_mean']:.3f}",
        f"{logged['q_td_error_abs']:.4f}", f"{logged['mixer_td_error_abs']:.3f}", f"{mean(plain):+.4f}",
        f"{mean(weighted):+.4f}", f"{d:+.4f} [{d - half:+.4f}, {d + half:+.4f}]",
        f"{d / scale:+.2f} [{(d - half) / scale:+.2f}, {(d + half) / scale:+.2f}]",
    ]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def main_(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", help="saved runs (results/models/<run>)")
    p.add_argument("--step", type=int, default=0, help="saved t_env to resume (0: latest; else closest)")
    p.add_argument("--steps", type=int, default=12000, help="env steps to run after it")
    args = p.parse_args(argv)
    rows = []
    for folder in args.folders:  # the runs print their own logs; the table comes at the end
        with tempfile.TemporaryDirectory() as out:
            rows.append(row(folder, *resume(folder, args.step, args.steps, out)))
    print("\n| run | from | updates | Q_i | rho | \\|delta_i\\| | \\|delta_tot\\| | delta_i mean | "
          "under the extra weight | lean [95%] | lean / \\|delta_i\\| |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main_()
