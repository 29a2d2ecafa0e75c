"""One run of ours beside a peer's run (EPyMARL, PyMARL: their Sacred info.json) on the same task:
the test metric at chosen step counts and the training return over a final window, as a markdown
table. The anchor tables of bench/README.md (RWARE MAPPO against EPyMARL's) come from it.

    python bench/anchor_curves.py \
        "ours=bench/runs/gymma_rware_onpolicy/unfinished/mappo_seed1_*/record" \
        "EPyMARL=bench/runs/epymarl_anchors/rware_tiny_2ag_mappo_seed1" \
        [--every 500000] [--until 4300000] [--window 500000]

A record folder holds our metrics.json ({name: {steps, values}}) or a peer's info.json ({name:
[values], name_T: [steps]}). A run's value at a step count is its first test at or after it
(within 1% of --every: a peer's tests fall at 505k where ours fall at 500k). --until defaults to
the shortest run's last test.
"""

import argparse
import glob
import json
import os


def load_curve(folder, name):
    """-> [(t_env, value)] of one metric, from our metrics.json or a peer's info.json."""
    ours = os.path.join(folder, "metrics.json")
    if os.path.isfile(ours):
        with open(ours) as f:
            series = json.load(f)[name]
        return list(zip(series["steps"], series["values"], strict=True))
    with open(os.path.join(folder, "info.json")) as f:
        info = json.load(f)
    values = [v["value"] if isinstance(v, dict) else v for v in info[name]]
    return list(zip(info[name + "_T"], values, strict=True))


def first_at(curve, t, slack):
    later = [v for s, v in curve if s >= t - slack]
    return later[0] if later else None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="LABEL=FOLDER (a glob naming one folder)")
    p.add_argument("--metric", default="test_return_mean")
    p.add_argument("--train-metric", default="return_mean")
    p.add_argument("--every", type=int, default=500000)
    p.add_argument("--until", type=int, default=None)
    p.add_argument("--window", type=int, default=500000)
    a = p.parse_args(argv)
    runs = {}
    for spec in a.runs:
        label, _, pattern = spec.partition("=")
        found = sorted(glob.glob(pattern))
        if len(found) != 1:
            p.error(f"{spec!r} names {len(found)} folders; give a pattern that names one")
        runs[label] = (load_curve(found[0], a.metric), load_curve(found[0], a.train_metric))
    until = a.until or min(max(t for t, _ in test) for test, _ in runs.values())
    slack = a.every // 100
    marks = list(range(a.every, until + slack + 1, a.every))
    print(
        "| run | "
        + " | ".join(f"{m / 1e6:g}M" for m in marks)
        + f" | {a.train_metric}, last {a.window / 1e6:g}M |"
    )
    print("|---" * (len(marks) + 2) + "|")
    for label, (test, train) in runs.items():
        cells = [first_at(test, m, slack) for m in marks]
        window = [v for t, v in train if until - a.window < t <= until + slack]
        mean = f"{sum(window) / len(window):.3f}" if window else ""
        print(f"| {label} | " + " | ".join("" if v is None else f"{v:.2f}" for v in cells) + f" | {mean} |")
    print(f"\n(tests up to t_env {until})")


if __name__ == "__main__":
    main()
