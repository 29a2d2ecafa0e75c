"""Pairwise differences between groups of completed Sacred runs at chosen step counts, with Welch
95% intervals: the per-step tables of bench/README.md (e.g. DIFFER against its base).

    python bench/compare_pairs.py bench/runs/mpe_differ_like_for_like \
        --pair differ_qmix:qmix_pymarl --pair differ_vdn:vdn_pymarl --pair differ_qplex:qplex_pymarl \
        [--metric test_return_mean] [--steps 100000,250000,500000,750000,1000000] [--last 5]

A run's value at a step count is its first logged value at or after it; "last K" is the mean of its
last K values. Groups are named by --group-by (default: the config name). Prints a markdown table:
each group's mean over seeds, then X minus Y with its Welch 95% interval.
"""

import argparse
import os
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))


def run_values(df, steps, last):
    """{run_dir: [value at each step..., mean of the last `last` values]}, one metric's rows."""
    out = {}
    for run, g in df.groupby("run_dir"):
        g = g.sort_values("t_env")
        t, v = g["t_env"].to_numpy(), g["value"].to_numpy(dtype=float)
        idx = np.searchsorted(t, steps)
        if idx.max() >= len(t):
            raise SystemExit(f"error: {run} logged up to t_env {t[-1]}, short of {max(steps)}")
        out[run] = list(v[idx]) + [v[-last:].mean()]
    return out


def welch(x, y):
    """(mean x - mean y, half-width of its 95% Welch interval)."""
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    return x.mean() - y.mean(), stats.t.ppf(0.975, df) * np.sqrt(vx + vy)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dirs", nargs="+", help="folders holding Sacred runs (searched recursively)")
    p.add_argument("--pair", action="append", required=True, help="X:Y, two group names (repeatable)")
    p.add_argument("--metric", default="test_return_mean")
    p.add_argument("--group-by", default="name")
    p.add_argument("--steps", default="100000,250000,500000,750000,1000000")
    p.add_argument("--last", type=int, default=5)
    a = p.parse_args()

    from utils.results import load_runs

    steps = [int(s) for s in a.steps.split(",")]
    df = load_runs(a.dirs, metrics=[a.metric], status=["COMPLETED"])
    if df.empty:
        raise SystemExit(f"error: no completed run under {a.dirs} logged {a.metric}")
    if a.group_by not in df.columns:
        raise SystemExit(f"error: --group-by {a.group_by!r} is not a config key of these runs")
    groups = {name: run_values(g, steps, a.last) for name, g in df.groupby(a.group_by)}

    head = [f"{s // 1000}k" if s < 1_000_000 else f"{s / 1e6:g}M" for s in steps] + [f"last {a.last}"]
    print("| group | seeds | " + " | ".join(head) + " |")
    print("|---|---|" + "---|" * len(head))
    for pair in a.pair:
        x_name, _, y_name = pair.partition(":")
        for name in (x_name, y_name):
            if name not in groups:
                raise SystemExit(f"error: no group {name!r}; groups: {', '.join(sorted(map(str, groups)))}")
        x, y = (np.array(list(groups[n].values())) for n in (x_name, y_name))
        if min(len(x), len(y)) < 2:
            raise SystemExit(f"error: {pair} needs at least two runs in each group")
        for name, vals in ((y_name, y), (x_name, x)):
            print(f"| {name} | {len(vals)} | " + " | ".join(f"{m:.1f}" for m in vals.mean(0)) + " |")
        cells = []
        for j in range(x.shape[1]):
            d, h = welch(x[:, j], y[:, j])
            cells.append(f"{d:+.1f} [{d - h:+.1f}, {d + h:+.1f}]")
        print(f"| *{x_name} - {y_name}* | | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
