"""Sacred runs -> a figure (mean over seeds, 95% bootstrap band) and tables of final/best values.

    python src/plot.py results/sacred --metric test_return_mean --group-by name
        [--filter env_args.map_name=2s3z] [--smooth 3] [--out results/plots/qmix_vs_differ]
        [--aggregate iqm] [--aggregate poi] [--marl-eval runs.json]

Writes <out>.png, <out>.csv and <out>.md; with --aggregate iqm also <out>_iqm.csv/.md (rliable's
interquartile mean of the final values across tasks and seeds), with --aggregate poi
<out>_poi.csv/.md (rliable's probability that a run of X ends above a run of Y, for every ordered
pair of groups, averaged over tasks), with --aggregate profile <out>_profile.png/.csv (rliable's
performance profile: the fraction of runs whose final value, min-max normalised per task over all
runs shown, is above each threshold). All come with 95% stratified-bootstrap intervals.
--marl-eval writes the runs in marl-eval's JSON layout (the format of BenchMARL's and Mava's
evaluation tools). --reference CSV draws a reference band (columns t_env, low, high; optional
task, label, source) on each panel and writes <out>_reference.csv: for every run, at how many of
the band's steps it lies outside; and <out>_reference_mean.csv: for every group, at how many of
them the mean of its runs lies inside, above or below the band. One panel per task (map, scenario
or env key) when several are present. Runs on the built-in simulators (skirmish, skirmish_v2) get
a line on the figure and under the table saying they are not StarCraft II.
"""

import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from utils.results import load_runs  # noqa: E402
from utils.stats import markdown_table  # noqa: E402

BOOTSTRAP = 2000
# Columns of load_runs that are not config keys.
RUN_COLUMNS = {"run_dir", "run_id", "status", "start_time", "resumed_from", "metric", "t_env", "value"}
# Config keys in which runs of one experiment may differ: the seed, where results and checkpoints
# go, logging and test cadence, processes and threads. Any other difference is another experiment.
BOOKKEEPING = {
    "seed",
    "env_args.seed",
    "experiment",
    "sweep_key",
    "alg_config",
    "env_config",
    "local_results_path",
    "use_tensorboard",
    "use_wandb",
    "wandb_mode",
    "wandb_project",
    "wandb_entity",
    "save_model",
    "save_model_interval",
    "save_buffer",
    "save_replay",
    "checkpoint_path",
    "load_step",
    "evaluate",
    "test_interval",
    "test_nepisode",
    "log_interval",
    "runner_log_interval",
    "learner_log_interval",
    "device",
    "torch_threads",
    "env_workers",
    "buffer_cpu_only",
}
BOOKKEEPING_PREFIXES = ("team_checkpoints.",)
# Said on every figure and table of runs on the built-in simulators, so that no plot of them can
# pass for StarCraft II results.
SIMULATOR_NOTES = {
    "skirmish": "skirmish: the built-in StarCraft-style simulator with SMAC's interface, calibrated "
    "to published StarCraft II figures; not StarCraft II",
    "skirmish_v2": "skirmish_v2: the built-in simulator with SMACv2's interface, set against "
    "SMACv2's published curves; not StarCraft II",
}


def simulator_note(df):
    """-> one line naming the built-in simulators these runs used, or "" if none."""
    envs = sorted(set(df["env"].dropna().astype(str))) if "env" in df.columns else []
    return "; ".join(SIMULATOR_NOTES[e] for e in envs if e in SIMULATOR_NOTES)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dirs", nargs="+", help="folders holding Sacred runs (searched recursively)")
    p.add_argument("--metric", default="test_return_mean")
    p.add_argument(
        "--group-by",
        default=None,
        help="config key(s), comma-separated, that name a curve (default: name, then split by every "
        "other config key the runs of a name differ in; an explicit choice that pools different "
        "configs is warned about)",
    )
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep runs whose config KEY equals VALUE (repeatable)",
    )
    p.add_argument("--smooth", type=int, default=1, help="moving average over K logged points")
    p.add_argument(
        "--status",
        default="COMPLETED,RUNNING,INTERRUPTED",
        help="run statuses to include (comma-separated; others: FAILED, and DIED "
        "for a run left RUNNING by a killed process)",
    )
    p.add_argument("--out", default=None, help="output path without extension")
    p.add_argument(
        "--aggregate",
        choices=["iqm", "poi", "profile"],
        action="append",
        default=[],
        help="also aggregate final values across tasks: iqm (interquartile mean), poi "
        "(probability of improvement), profile (performance profile); rliable, stratified "
        "bootstrap (repeatable)",
    )
    p.add_argument("--marl-eval", default=None, metavar="PATH", help="also write the runs as marl-eval JSON")
    p.add_argument(
        "--reference",
        default=None,
        metavar="CSV",
        help="a reference band to draw and check runs against "
        "(columns t_env, low, high; optional task, label)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    return p.parse_args(argv)


def task_column(df):
    for key in ("env_args.map_name", "env_args.key", "env_args.scenario"):
        if key in df.columns:
            col = df[key].where(df[key].notna() & (df[key] != ""), None)
            if col.notna().any():
                return col.fillna(df["env"]).astype(str)
    return df["env"].astype(str)


def apply_filters(df, filters):
    for f in filters:
        if "=" not in f:
            raise SystemExit(f"error: --filter '{f}' must look like KEY=VALUE")
        key, value = f.split("=", 1)
        if key not in df.columns:
            raise SystemExit(
                f"error: --filter key '{key}' is not a config key of these runs; "
                f"some valid ones: {', '.join(sorted(c for c in df.columns if '.' in c)[:12])}"
            )
        df = df[df[key].astype(str) == value]
    return df


# What a record that lacks a key ran with, where that is not the key's default today: a default
# that changed after records were made without the key.
ABSENT_MEANS = {"env_args.placement": "toward"}


def absent_value(key, defaults):
    return ABSENT_MEANS[key] if key in ABSENT_MEANS else defaults.get(key)


def differing_keys(runs, defaults):
    """Config keys (not bookkeeping) whose values differ among `runs` (one row per run). A key a
    run lacks (recorded before the key existed) counts as its default.yaml value, or as what
    ABSENT_MEANS says it ran with."""
    out = []
    for col in runs.columns:
        if (
            col in RUN_COLUMNS
            or col in BOOKKEEPING
            or col in ("group", "task")
            or col.startswith(BOOKKEEPING_PREFIXES)
        ):
            continue
        values = runs[col].map(lambda v, c=col: _plain(absent_value(c, defaults) if _missing(v) else v))
        if values.nunique() > 1:
            out.append(col)
    return out


def flat_defaults():
    from config import load_defaults
    from utils.results import flatten

    return flatten(load_defaults())


def _plain(v):
    """A comparable text of a config value: 1 and 1.0 are one value (older records kept YAML's
    int where the key's default is a float)."""
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return repr(float(v))
    return str(v)


def _missing(v):
    if isinstance(v, (list, tuple, dict, np.ndarray)):  # list-valued keys (record_fields: [])
        return False
    try:
        return v is None or bool(np.isnan(v))
    except TypeError:
        return False


def split_groups(df, explicit):
    """-> the group of every row. Runs are never pooled unless their configs differ only in
    bookkeeping: by default a group whose runs differ in other keys is split, each part named
    by them (`differ_qmix_transformer (transformer_n_layers=1)`); with an explicit --group-by the
    pooling is kept and warned about, naming the keys."""
    runs = df.groupby("run_dir").first()
    label = runs["group"].copy()
    defaults = flat_defaults()
    for (group, _), members in runs.groupby(["group", "task"]):  # a task is a panel of its own
        keys = differing_keys(members, defaults)
        if not keys:
            continue
        if explicit:
            print(
                f"warning: group {group!r} averages {len(members)} runs whose configs differ in "
                f"{', '.join(keys)}, as if they were seeds of one config (leave out --group-by to "
                "split them, or add those keys to it)",
                file=sys.stderr,
            )
            continue
        for run, row in members.iterrows():
            shown = ", ".join(f"{k}={_show(row[k], absent_value(k, defaults))}" for k in keys)
            label[run] = f"{group} ({shown})"
    return df["run_dir"].map(label)


def _show(v, default):
    """A value for a legend: the default where the run lacks the key, 64 rather than 64.0."""
    v = default if _missing(v) else v
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    return "-" if v is None else v


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


def summary_table(df, metric):
    """Per (task, group): final and best value per run -> mean, std, n seeds."""
    import pandas as pd

    rows = []
    for (task, group), g in df.groupby(["task", "group"], sort=True):
        finals, bests = [], []
        for _, r in g.groupby("run_dir"):
            r = r.sort_values("t_env")
            finals.append(r["value"].iloc[-1])
            bests.append(r["value"].max())
        rows.append(
            {
                "task": task,
                "group": group,
                "metric": metric,
                "n_seeds": len(finals),
                "final_mean": np.mean(finals),
                "final_std": np.std(finals),
                "best_mean": np.mean(bests),
                "best_std": np.std(bests),
                "t_env_max": int(g["t_env"].max()),
            }
        )
    return pd.DataFrame(rows)


def markdown(table, float_format="{:.2f}"):
    rows = [
        [float_format.format(v) if isinstance(v, float) else str(v) for v in row]
        for _, row in table.iterrows()
    ]
    return "\n".join(markdown_table(list(table.columns), rows)) + "\n"


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


def load_reference(path):
    """The reference band: DataFrame(t_env, low, high[, task, label, source]), sorted by t_env."""
    import pandas as pd

    try:
        ref = pd.read_csv(path, comment="#")
    except (OSError, ValueError) as e:
        raise SystemExit(f"error: --reference {path}: {e}") from None
    missing = {"t_env", "low", "high"} - set(ref.columns)
    if missing:
        raise SystemExit(
            f"error: --reference {path} lacks column(s) {sorted(missing)} (needs t_env, low, high)"
        )
    if (ref["low"] > ref["high"]).any():
        raise SystemExit(f"error: --reference {path} has rows with low above high")
    return ref.sort_values("t_env")


def reference_for(ref, task):
    """The band's rows for a task (all rows when the band names no task)."""
    if "task" not in ref.columns:
        return ref
    return ref[ref["task"].astype(str) == str(task)]


def value_at(run, steps):
    """One run's values (rows sorted by t_env) at the given steps, interpolated between its logged
    points."""
    return np.interp(
        np.asarray(steps, dtype=float), run["t_env"].to_numpy(dtype=float), run["value"].to_numpy(dtype=float)
    )


def check_against_reference(df, ref):
    """Per run: the band's steps it covers, how many of them it lies outside, and the first such
    step. A run's value at a band step is interpolated between its logged points."""
    import pandas as pd

    rows = []
    for run, g in df.groupby("run_dir"):
        band = reference_for(ref, g["task"].iloc[0])
        g = g.sort_values("t_env")
        inside = band[(band["t_env"] >= g["t_env"].iloc[0]) & (band["t_env"] <= g["t_env"].iloc[-1])]
        if inside.empty:
            continue
        v = value_at(g, inside["t_env"])
        out = (v < inside["low"].to_numpy()) | (v > inside["high"].to_numpy())
        rows.append(
            {
                "run_dir": run,
                "group": g["group"].iloc[0],
                "task": g["task"].iloc[0],
                "seed": g["seed"].iloc[0],
                "points": len(v),
                "outside": int(out.sum()),
                "below": int((v < inside["low"].to_numpy()).sum()),
                "first_outside_t_env": int(inside["t_env"].to_numpy()[out][0]) if out.any() else None,
            }
        )
    return pd.DataFrame(rows)


def check_mean_against_reference(df, ref):
    """Per group and task: the mean over its runs at each band step (each run interpolated between
    its logged points; only steps every run covers), and at how many of them that mean lies inside
    the band, above or below it. This is the check of a published curve against a group's seeds."""
    import pandas as pd

    rows = []
    for (group, task), g in df.groupby(["group", "task"], sort=True):
        band = reference_for(ref, task)
        runs = [r.sort_values("t_env") for _, r in g.groupby("run_dir")]
        start = max(r["t_env"].iloc[0] for r in runs)
        end = min(r["t_env"].iloc[-1] for r in runs)
        band = band[(band["t_env"] >= start) & (band["t_env"] <= end)]
        if band.empty:
            continue
        at = band["t_env"].to_numpy(dtype=float)
        mean = np.mean([value_at(r, at) for r in runs], axis=0)
        above = mean > band["high"].to_numpy()
        below = mean < band["low"].to_numpy()
        rows.append(
            {
                "group": group,
                "task": task,
                "runs": len(runs),
                "points": len(at),
                "inside": int((~above & ~below).sum()),
                "above": int(above.sum()),
                "below": int(below.sum()),
                "steps_outside": " ".join(str(int(t)) for t in at[above | below]),
            }
        )
    return pd.DataFrame(rows)


def marl_eval_name(metric):
    """test_return_mean -> return, test_battle_won_mean -> win_rate (marl-eval's names)."""
    name = metric.removeprefix("test_").removesuffix("_mean")
    return {"battle_won": "win_rate"}.get(name, name)


def to_marl_eval(df, metric):
    """{env: {task: {group: {run_<i>: {step_<k>: {step_count, name: [value]}, absolute_metrics}}}}}.
    Each evaluation holds one value, the mean over its test episodes (Sacred keeps no
    per-episode test returns); absolute_metrics repeats the last evaluation."""
    name = marl_eval_name(metric)
    out = {}
    for (env, task, group), g in df.groupby(["env", "task", "group"], sort=True):
        algo = out.setdefault(str(env), {}).setdefault(str(task), {}).setdefault(str(group), {})
        for i, (_, r) in enumerate(sorted(g.groupby("run_dir"), key=lambda x: (x[1]["seed"].iloc[0], x[0]))):
            r = r.sort_values("t_env")
            run = {
                f"step_{k}": {"step_count": int(t), name: [float(v)]}
                for k, (t, v) in enumerate(zip(r["t_env"], r["value"], strict=True))
            }
            run["absolute_metrics"] = {name: [float(r["value"].iloc[-1])]}
            algo[f"run_{i}"] = run
    return out


SKIP_REASONS = {
    "DIED": "killed without a record",
    "SUPERSEDED": "another run of the same sweep configuration completed",
}


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    missing = [d for d in a.dirs if not os.path.isdir(d)]
    if missing:
        raise SystemExit(f"error: no such folder: {', '.join(missing)}")
    df = load_runs(a.dirs, metrics=[a.metric], status=set(a.status.split(",")))
    skipped = df.attrs.get("skipped", {})
    if skipped:
        print(
            "left out: "
            + ", ".join(f"{n} {k}" for k, n in sorted(skipped.items()))
            + "".join(f" ({k}: {why})" for k, why in SKIP_REASONS.items() if k in skipped),
            file=sys.stderr,
        )
    if df.empty:
        raise SystemExit(f"error: no runs with metric '{a.metric}' under {', '.join(a.dirs)}")
    df = apply_filters(df, a.filter)
    if df.empty:
        raise SystemExit("error: no runs left after the filters")
    keys = [k.strip() for k in (a.group_by or "name").split(",")]
    missing = [k for k in keys if k not in df.columns]
    if missing:
        raise SystemExit(f"error: --group-by key(s) {missing} are not config keys of these runs")
    df = df.copy()
    df["group"] = df[keys].astype(str).agg(", ".join, axis=1)
    df["task"] = task_column(df)
    df["group"] = split_groups(df, explicit=a.group_by is not None)
    out = a.out or os.path.join("results", "plots", a.metric)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)

    ref = load_reference(a.reference) if a.reference else None
    rng = np.random.default_rng(a.seed)
    tasks = sorted(df["task"].unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for group, g in sorted(df[df["task"] == task].groupby("group"), key=lambda x: x[0]):
            runs = curves(g, a.smooth)
            grid = np.unique(np.concatenate([s for s, _ in runs.values()]))
            matrix = np.array([on_grid(grid, s, v) for s, v in runs.values()])
            mean, lo, hi = bootstrap_band(matrix, rng)
            ax.plot(grid, mean, label=f"{group} (n={len(runs)})")
            ax.fill_between(grid, lo, hi, alpha=0.25)
        if ref is not None:
            band = reference_for(ref, task)
            if not band.empty:
                label = str(band["label"].iloc[0]) if "label" in band.columns else "reference"
                ax.fill_between(
                    band["t_env"], band["low"], band["high"], color="grey", alpha=0.3, label=label
                )
        ax.set_title(task)
        ax.set_xlabel("env steps")
        ax.set_ylabel(a.metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    note = simulator_note(df)
    if note:
        import textwrap

        note = textwrap.fill(note, width=int(fig.get_figwidth() * 16))  # about 16 characters an inch at 7 pt
        lines = note.count("\n") + 1
        fig.tight_layout(rect=(0, 0.035 * lines + 0.01, 1, 1))
        fig.text(0.01, 0.01, note, fontsize=7, style="italic")
    else:
        fig.tight_layout()
    fig.savefig(out + ".png", dpi=120)
    plt.close(fig)

    table = summary_table(df, a.metric)
    table.to_csv(out + ".csv", index=False)
    with open(out + ".md", "w") as f:
        f.write(markdown(table) + (f"\n*{note}.*\n" if note else ""))
    written = [out + ".png", out + ".csv", out + ".md"]

    if a.aggregate:
        finals = (
            df.sort_values("t_env")
            .groupby("run_dir")
            .agg(
                group=("group", "first"),
                task=("task", "first"),
                seed=("seed", "first"),
                final=("value", "last"),
            )
            .reset_index()
        )
        for kind, fn in (("iqm", aggregate_iqm), ("poi", probability_of_improvement)):
            if kind not in a.aggregate:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = fn(finals, a.seed)
            result.to_csv(f"{out}_{kind}.csv", index=False)
            with open(f"{out}_{kind}.md", "w") as f:
                f.write(markdown(result))
            written += [f"{out}_{kind}.csv", f"{out}_{kind}.md"]
        if "profile" in a.aggregate:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                profile = performance_profile(finals, a.seed)
            profile.to_csv(f"{out}_profile.csv", index=False)
            plot_profile(profile, f"{out}_profile.png")
            written += [f"{out}_profile.csv", f"{out}_profile.png"]
    if ref is not None:
        check = check_against_reference(df, ref)
        check.to_csv(f"{out}_reference.csv", index=False)
        written.append(f"{out}_reference.csv")
        for r in check[check["outside"] > 0].itertuples() if not check.empty else []:
            print(
                f"outside the reference: {r.group} seed {r.seed} ({r.task}) at {r.outside} of {r.points} "
                f"steps ({r.below} below), first at t_env {r.first_outside_t_env}: {r.run_dir}",
                file=sys.stderr,
            )
        mean_check = check_mean_against_reference(df, ref)
        mean_check.to_csv(f"{out}_reference_mean.csv", index=False)
        written.append(f"{out}_reference_mean.csv")
        for r in mean_check.itertuples() if not mean_check.empty else []:
            print(
                f"mean of {r.runs} run(s) of {r.group} ({r.task}) inside the reference at {r.inside} of "
                f"{r.points} steps ({r.above} above, {r.below} below)",
                file=sys.stderr,
            )
    if a.marl_eval:
        import json

        with open(a.marl_eval, "w") as f:
            json.dump(to_marl_eval(df, a.metric), f, indent=1)
        written.append(a.marl_eval)
    print(markdown(table), end="")
    print("wrote " + ", ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
