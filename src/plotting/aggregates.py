"""Curves on a common grid with bootstrap bands, final/best tables, and rliable's aggregates (IQM,
probability of improvement, performance profiles)."""

import warnings

import numpy as np

BOOTSTRAP = 2000


def curves(df, smooth):
    """{run_dir: (steps, values)} with a trailing moving average over `smooth` points."""
    out = {}
    for run, g in df.groupby("run_dir"):
        g = g.sort_values("t_env")
        v = g["value"].to_numpy(dtype=float)
        if smooth > 1:
            v = np.array([v[max(0, i - smooth + 1) : i + 1].mean() for i in range(len(v))])
        out[run] = (g["t_env"].to_numpy(dtype=float), v)
    return out


def on_grid(grid, steps, values):
    """A run's curve at the group's grid of steps: interpolated between its logged points, NaN
    outside them, except that its last value stands for up to half its logging interval beyond
    it. Runs of one length end a few env steps apart (an episode overshoots t_max), and the
    mean of the last grid points would otherwise be of one or two runs: a jump at the end."""
    out = np.interp(grid, steps, values, left=np.nan, right=np.nan)
    if len(steps) > 1:
        tail = (grid > steps[-1]) & (grid <= steps[-1] + 0.5 * np.median(np.diff(steps)))
        out[tail] = values[-1]
    return out


def bootstrap_band(matrix, rng):
    """Mean over rows (seeds) and the 95% percentile bootstrap interval of that mean, per column."""
    n = matrix.shape[0]
    mean = np.nanmean(matrix, axis=0)
    if n < 2:
        return mean, mean, mean
    idx = rng.integers(0, n, size=(BOOTSTRAP, n))
    with warnings.catch_warnings():  # a resample of only runs that end earlier: NaN, on purpose
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(matrix[idx], axis=1)  # [BOOTSTRAP, columns]
    return mean, np.nanpercentile(means, 2.5, axis=0), np.nanpercentile(means, 97.5, axis=0)


def summary_table(df, metric, last=5):
    """Per (task, group): final value (the last logged), mean of the last `last` values and best
    value per run -> mean, std, n seeds; n_unfinished (runs not COMPLETED) and t_env_min (the
    shortest run's last step) say when a final value is not every run's value at the same step."""
    import pandas as pd

    rows = []
    for (task, group), g in df.groupby(["task", "group"], sort=True):
        finals, lasts, bests, ends, unfinished = [], [], [], [], 0
        for _, r in g.groupby("run_dir"):
            r = r.sort_values("t_env")
            finals.append(r["value"].iloc[-1])
            lasts.append(r["value"].iloc[-last:].mean())
            bests.append(r["value"].max())
            ends.append(int(r["t_env"].iloc[-1]))
            unfinished += "status" in r.columns and r["status"].iloc[0] != "COMPLETED"
        rows.append(
            {
                "task": task,
                "group": group,
                "metric": metric,
                "n_seeds": len(finals),
                "final_mean": np.mean(finals),
                "final_std": np.std(finals),
                f"last{last}_mean": np.mean(lasts),
                f"last{last}_std": np.std(lasts),
                "best_mean": np.mean(bests),
                "best_std": np.std(bests),
                "t_env_max": int(g["t_env"].max()),
                "t_env_min": min(ends),
                "n_unfinished": int(unfinished),
            }
        )
    return pd.DataFrame(rows)


def run_scores(df, window=1):
    """One row per run (run_dir, group, task, seed, final): its mean over its last `window` logged
    values, the score --aggregate bootstraps (window 1: rliable's final score)."""
    runs = df.sort_values("t_env", kind="stable").groupby("run_dir")
    scores = runs.agg(group=("group", "first"), task=("task", "first"), seed=("seed", "first"))
    scores["final"] = runs["value"].apply(lambda v: v.iloc[-window:].mean())
    return scores.reset_index()


def uneven_ends(table):
    """-> one line per (task, group) of a summary table whose runs are not all completed or end at
    different steps: their final and best values are not taken at the same point of training."""
    lines = []
    for _, row in table.iterrows():
        if row["n_unfinished"] or row["t_env_min"] < 0.99 * row["t_env_max"]:
            lines.append(
                f"{row['task']} / {row['group']}: {row['n_unfinished']} of {row['n_seeds']} runs not "
                f"completed, runs end between t_env {row['t_env_min']} and {row['t_env_max']}"
            )
    return lines


def _rliable():
    try:
        from rliable import library as rly
        from rliable import metrics
    except ImportError:
        raise SystemExit("error: --aggregate needs rliable: pip install rliable") from None
    return rly, metrics


def score_matrices(table_df):
    """{group: final values [runs, tasks]}; every group keeps as many runs per task as its
    smallest task has (seeds in order)."""
    scores = {}
    for group, g in table_df.groupby("group"):
        per_task = [r.sort_values("seed")["final"].to_numpy() for _, r in g.groupby("task")]
        n = min(len(t) for t in per_task)
        scores[group] = np.stack([t[:n] for t in per_task], axis=1)
    return scores


def aggregate_iqm(table_df, rng_seed):
    """IQM of final values across tasks and seeds per group, with rliable's stratified bootstrap."""
    import pandas as pd

    rly, metrics = _rliable()
    scores = score_matrices(table_df)
    np.random.seed(rng_seed)
    point, interval = rly.get_interval_estimates(
        scores, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=BOOTSTRAP
    )
    return pd.DataFrame(
        [
            {
                "group": g,
                "iqm": float(point[g][0]),
                "ci_low": float(interval[g][0][0]),
                "ci_high": float(interval[g][1][0]),
                "n_runs": scores[g].shape[0],
                "n_tasks": scores[g].shape[1],
            }
            for g in scores
        ]
    )


def probability_of_improvement(table_df, rng_seed):
    """P(X > Y) for every ordered pair of groups: the chance that a run of X ends above a run of
    Y on the same task (ties count half), averaged over tasks; rliable's estimate and its
    stratified-bootstrap 95% interval. Groups must cover the same tasks."""
    import pandas as pd

    rly, metrics = _rliable()
    scores = score_matrices(table_df)
    tasks = {g: sorted(d["task"].unique()) for g, d in table_df.groupby("group")}
    groups = sorted(scores)
    if len(groups) < 2:
        raise SystemExit("error: --aggregate poi compares groups and needs at least two")
    if len({tuple(t) for t in tasks.values()}) > 1:
        raise SystemExit(f"error: --aggregate poi needs every group on the same tasks, got {tasks}")
    pairs = {f"{x} > {y}": (scores[x], scores[y]) for x in groups for y in groups if x != y}
    np.random.seed(rng_seed)
    point, interval = rly.get_interval_estimates(pairs, metrics.probability_of_improvement, reps=BOOTSTRAP)
    rows = []
    for x in groups:
        for y in groups:
            if x != y:
                k = f"{x} > {y}"
                rows.append(
                    {
                        "x": x,
                        "y": y,
                        "p_x_above_y": float(np.squeeze(point[k])),
                        "ci_low": float(np.squeeze(interval[k][0])),
                        "ci_high": float(np.squeeze(interval[k][1])),
                        "n_runs_x": scores[x].shape[0],
                        "n_runs_y": scores[y].shape[0],
                        "n_tasks": scores[x].shape[1],
                    }
                )
    return pd.DataFrame(rows)


def normalise_per_task(table_df):
    """Finals min-max scaled to [0, 1] within each task over every run shown (a task where all
    runs end equal maps to 1), so that tasks of different scales can share one profile."""
    out = table_df.copy()
    lo = out.groupby("task")["final"].transform("min")
    hi = out.groupby("task")["final"].transform("max")
    span = (hi - lo).where(hi > lo, 1.0)
    out["final"] = ((out["final"] - lo) / span).where(hi > lo, 1.0)
    return out


def performance_profile(table_df, rng_seed, taus=None):
    """rliable's score distribution: for each threshold tau, the fraction of runs (all tasks)
    whose normalised final value exceeds tau, with its interval. -> DataFrame(group, tau, ...)."""
    import pandas as pd

    rly, _ = _rliable()
    scores = score_matrices(normalise_per_task(table_df))
    taus = np.linspace(0.0, 1.0, 21) if taus is None else np.asarray(taus)
    np.random.seed(rng_seed)
    profiles, cis = rly.create_performance_profile(scores, taus, reps=BOOTSTRAP)
    return pd.DataFrame(
        [
            {
                "group": g,
                "tau": float(t),
                "fraction_above": float(profiles[g][k]),
                "ci_low": float(cis[g][0][k]),
                "ci_high": float(cis[g][1][k]),
            }
            for g in sorted(scores)
            for k, t in enumerate(taus)
        ]
    )


def plot_profile(profile, path):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for group, g in profile.groupby("group"):
        ax.plot(g["tau"], g["fraction_above"], label=group)
        ax.fill_between(g["tau"], g["ci_low"], g["ci_high"], alpha=0.25)
    ax.set_xlabel("normalised final value (per task, min-max over runs) tau")
    ax.set_ylabel("fraction of runs above tau")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
