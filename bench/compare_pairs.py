"""Pairwise differences between groups of completed Sacred runs at chosen step counts, with Welch
95% intervals: the per-step tables of bench/README.md (e.g. DIFFER against its base).

    python bench/compare_pairs.py bench/runs/mpe_differ_like_for_like \
        --pair differ_qmix:qmix_pymarl --pair differ_vdn:vdn_pymarl --pair differ_qplex:qplex_pymarl \
        [--metric test_return_mean] [--steps 100000,250000,500000,750000,1000000] [--last 5] \
        [--reach 0.5,0.8]

A run's value at a step count is its first logged value at or after it; "last K" is the mean of its
last K values. Groups are named by --group-by (default: the config name); as in src/plot.py,
runs whose configs differ in more than the seed and bookkeeping are never pooled: such a group
is split, each part named by the keys that differ (`differ_qmix (lr=0.001)`). The runs must be
of one task (map or scenario): --filter KEY=VALUE (repeatable, e.g. env_args.map_name=2s3z)
chooses it. Prints a markdown table:
each group's mean over seeds, then X minus Y with its Welch 95% interval, and the probability
that a run of X ends above a run of Y (last K values; ties count half) with its stratified-bootstrap
95% interval. "best" is each run's best logged value (best-of-run: the figure papers that report
one run a cell give), averaged over seeds. With --reach, a second table: for each group and level,
the median over seeds of the first step at which a run's value reached the level, and how many
seeds ever reached it (a median of seeds that never reached it is "not reached"). With --summary,
one row per group (every group, or those of the pairs): last K and best-of-run with their 95%
t-intervals over seeds, and the first-reach steps. With --curve, one row per group: its mean over
seeds at each step count with the 95% t-interval, for statistics logged during training (e.g.
--metric share_all_in_range, logged by the learner: pass --steps it reached). With --runs, one row
per run: its group, seed, last K, best and the first step at each --reach level.
"""

import argparse

import numpy as np
from scipy import stats

import plot
from plotting.grouping import task_key


def run_values(df, steps, last):
    """{run_dir: [value at each step..., mean of the last `last` values]}, one metric's rows."""
    out = {}
    for run, g in df.groupby("run_dir"):
        g = g.sort_values("t_env")
        t, v = g["t_env"].to_numpy(), g["value"].to_numpy(dtype=float)
        idx = np.searchsorted(t, steps)
        if idx.max() >= len(t):
            raise SystemExit(f"error: {run} logged up to t_env {t[-1]}, short of {max(steps)}")
        out[run] = list(v[idx]) + [v[-last:].mean(), v.max()]
    return out


def first_reach(df, level):
    """{run_dir: first t_env at which the run's value >= level, or None}."""
    out = {}
    for run, g in df.groupby("run_dir"):
        g = g.sort_values("t_env")
        hit = np.flatnonzero(g["value"].to_numpy(dtype=float) >= level)
        out[run] = int(g["t_env"].iloc[hit[0]]) if len(hit) else None
    return out


def median_reach(steps):
    """Median of first-reach steps where a run that never reached counts as later than any that
    did: -> (step or None, how many reached)."""
    reached = sorted(s for s in steps if s is not None)
    n = len(steps)
    ordered = reached + [None] * (n - len(reached))
    lo, hi = ordered[(n - 1) // 2], ordered[n // 2]
    if lo is None or hi is None:
        return None, len(reached)
    return (lo + hi) / 2, len(reached)


def reach_cells(g, levels):
    """One group's runs -> "<median first step> (k/n seeds)" per level."""
    n, cells = g["run_dir"].nunique(), []
    for level in levels:
        step, k = median_reach(list(first_reach(g, level).values()))
        cells.append(f"{'not reached' if step is None else f'{step / 1000:.0f}k'} ({k}/{n} seeds)")
    return cells


def run_rows(g, values, levels, nd):
    """One group's runs, by seed -> [seed, last K, best, first step at each level] (strings)."""
    reach = {level: first_reach(g, level) for level in levels}
    rows = []
    seeds = g.groupby("run_dir")["seed"].first()

    def order(kv):  # numbered seeds in numeric order, then any others
        digits = str(kv[1]).isdigit()
        return (not digits, int(kv[1]) if digits else 0, str(kv[1]), kv[0])

    for run, seed in sorted(seeds.items(), key=order):
        cells = [str(seed), f"{values[run][-2]:.{nd}f}", f"{values[run][-1]:.{nd}f}"]
        cells += ["not reached" if reach[v][run] is None else f"{reach[v][run] / 1000:.0f}k" for v in levels]
        rows.append(cells)
    return rows


def welch(x, y):
    """(mean x - mean y, half-width of its 95% Welch interval)."""
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if vx + vy == 0:  # no spread in either group (all runs at 0): Welch's df is 0/0, the width 0
        return x.mean() - y.mean(), 0.0
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    return x.mean() - y.mean(), stats.t.ppf(0.975, df) * np.sqrt(vx + vy)


def t_interval(x):
    """(mean, half-width of the 95% t-interval of the mean); the half-width is None under 2 runs."""
    if len(x) < 2:
        return x.mean(), None
    return x.mean(), stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))


def interval_cell(x, nd):
    """ "mean [lo, hi]" of runs' values x with the 95% t-interval of the mean; the mean alone for one run."""
    m, h = t_interval(x)
    return f"{m:.{nd}f}" + ("" if h is None else f" [{m - h:.{nd}f}, {m + h:.{nd}f}]")


def improvement(x, y, reps=2000, seed=0):
    """P(a run of X above a run of Y), ties half, over every pair of runs, and the 95% percentile
    interval of a bootstrap that resamples each group's runs apart (rliable's estimator)."""

    def p(a, b):
        d = a[..., :, None] - b[..., None, :]
        return ((d > 0) + 0.5 * (d == 0)).mean(axis=(-2, -1))

    rng = np.random.default_rng(seed)
    xs = x[rng.integers(0, len(x), size=(reps, len(x)))]
    ys = y[rng.integers(0, len(y), size=(reps, len(y)))]
    boot = p(xs, ys)
    return float(p(x, y)), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


def pairable(df, group_by, filters):
    """The runs of one task, each row's "group" its --group-by value, split where configs differ
    (src/plot.py's rule); a folder that holds several tasks needs a --filter."""
    df = plot.apply_filters(df, filters)
    if df.empty:
        raise SystemExit("error: no runs left after the filters")
    if group_by not in df.columns:
        raise SystemExit(f"error: --group-by {group_by!r} is not a config key of these runs")
    df = df.copy()
    df["task"] = plot.task_column(df)
    tasks = sorted(df["task"].unique())
    if len(tasks) > 1:
        raise SystemExit(
            f"error: these runs are of {len(tasks)} tasks ({', '.join(tasks)}); compare one at a "
            f"time, e.g. --filter {task_key(df)}={tasks[0]}"
        )
    df["group"] = df[group_by].astype(str)
    df["group"] = plot.split_groups(df, explicit=False)
    return df


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dirs", nargs="+", help="folders holding Sacred runs (searched recursively)")
    p.add_argument("--pair", action="append", default=[], help="X:Y, two group names (repeatable)")
    p.add_argument("--summary", action="store_true", help="one row per group: last K, best, reach")
    p.add_argument("--runs", action="store_true", help="one row per run: last K, best, reach")
    p.add_argument("--curve", action="store_true", help="one row per group: mean [95%%] at each step")
    p.add_argument("--metric", default="test_return_mean")
    p.add_argument("--group-by", default="name")
    p.add_argument("--steps", default="100000,250000,500000,750000,1000000")
    p.add_argument("--last", type=int, default=5)
    p.add_argument("--reach", default=None, help="levels, comma-separated (e.g. 0.5,0.8)")
    p.add_argument("--filter", action="append", default=[], help="KEY=VALUE or KEY=V1,V2 (any; repeatable)")
    p.add_argument("--digits", type=int, default=None, help="decimals (default: 2 for values in [0, 1])")
    a = p.parse_args()

    from utils.results import load_runs

    steps = [int(s) for s in a.steps.split(",")]
    df = load_runs(a.dirs, metrics=[a.metric], status=["COMPLETED"])
    if df.empty:
        raise SystemExit(f"error: no completed run under {a.dirs} logged {a.metric}")
    df = pairable(df, a.group_by, a.filter)
    groups = {name: run_values(g, steps, a.last) for name, g in df.groupby("group")}
    values = df["value"].to_numpy(dtype=float)
    nd = a.digits if a.digits is not None else (2 if ((values >= 0) & (values <= 1)).all() else 1)

    if not (a.pair or a.summary or a.curve or a.runs):
        raise SystemExit("error: give --pair X:Y (repeatable), --summary, --curve or --runs")
    levels = [float(v) for v in a.reach.split(",")] if a.reach else []
    head = [f"{s // 1000}k" if s < 1_000_000 else f"{s / 1e6:g}M" for s in steps] + [f"last {a.last}", "best"]
    if a.pair:
        print("| group | seeds | " + " | ".join(head) + f" | P(X > Y), last {a.last} |")
        print("|---|---|" + "---|" * (len(head) + 1))
    for pair in a.pair:
        x_name, _, y_name = pair.partition(":")
        for name in (x_name, y_name):
            if name not in groups:
                raise SystemExit(f"error: no group {name!r}; groups: {', '.join(sorted(map(str, groups)))}")
        x, y = (np.array(list(groups[n].values())) for n in (x_name, y_name))
        if min(len(x), len(y)) < 2:
            raise SystemExit(f"error: {pair} needs at least two runs in each group")
        for name, vals in ((y_name, y), (x_name, x)):
            print(f"| {name} | {len(vals)} | " + " | ".join(f"{m:.{nd}f}" for m in vals.mean(0)) + " | |")
        cells = []
        for j in range(x.shape[1]):
            d, h = welch(x[:, j], y[:, j])
            cells.append(f"{d:+.{nd}f} [{d - h:+.{nd}f}, {d + h:+.{nd}f}]")
        poi, lo, hi = improvement(x[:, -2], y[:, -2])
        print(f"| *{x_name} - {y_name}* | | " + " | ".join(cells) + f" | {poi:.2f} [{lo:.2f}, {hi:.2f}] |")
    names = list(dict.fromkeys(n for pair in a.pair for n in reversed(pair.split(":", 1))))
    shown = names or sorted(groups)  # the per-group tables: the pairs' groups, else every group
    if a.summary:
        print()
        reach_head = "".join(f" first reaches {v:g} |" for v in levels)
        print(f"| group | seeds | last {a.last} [95%] | best-of-run [95%] |" + reach_head)
        print("|---|---|---|---|" + "---|" * len(levels))
        for name in shown:  # pair names were checked above
            vals = np.array(list(groups[name].values()))
            cells = [interval_cell(vals[:, col], nd) for col in (-2, -1)]
            cells += reach_cells(df[df["group"] == name], levels)
            print(f"| {name} | {len(vals)} | " + " | ".join(cells) + " |")
    elif levels and names:  # the pairs' groups; --runs and --curve print their own
        print()
        print("| group | seeds | " + " | ".join(f"first reaches {v:g}" for v in levels) + " |")
        print("|---|---|" + "---|" * len(levels))
        for name in names:
            g = df[df["group"] == name]
            print(f"| {name} | {g['run_dir'].nunique()} | " + " | ".join(reach_cells(g, levels)) + " |")
    if a.curve:
        print()
        print("| group | seeds | " + " | ".join(head[: len(steps)]) + " |")
        print("|---|---|" + "---|" * len(steps))
        for name in shown:
            vals = np.array(list(groups[name].values()))
            cells = [interval_cell(vals[:, j], nd) for j in range(len(steps))]
            print(f"| {name} | {len(vals)} | " + " | ".join(cells) + " |")
    if a.runs:
        print()
        print(f"| group | seed | last {a.last} | best |" + "".join(f" first {v:g} |" for v in levels))
        print("|---|---|---|---|" + "---|" * len(levels))
        for name in shown:
            for row in run_rows(df[df["group"] == name], groups[name], levels, nd):
                print(f"| {name} | " + " | ".join(row) + " |")
    note = plot.simulator_note(df)
    if note:
        print(f"\n*{note}.*")


if __name__ == "__main__":
    main()
