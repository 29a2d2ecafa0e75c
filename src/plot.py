"""Sacred runs -> a figure (mean over seeds, 95% bootstrap band) and tables of final/best values.

    python src/plot.py results/sacred --metric test_return_mean --group-by name
        [--filter env_args.map_name=2s3z] [--smooth 3] [--out results/plots/qmix_vs_differ]
        [--aggregate iqm] [--aggregate poi] [--marl-eval runs.json]

Writes <out>.png, <out>.csv and <out>.md (per group over seeds: the final value, the mean of the
last K values (--last, default 5) and the best; n_unfinished and t_env_min flag a group whose runs
are not all complete, and a warning names it); with --aggregate iqm also <out>_iqm.csv/.md
(rliable's interquartile mean of the final values across tasks and seeds; --aggregate-on lastK
scores each run by its last-K mean instead), with --aggregate poi <out>_poi.csv/.md (rliable's
probability that a run of X ends above a run of Y, for every ordered pair of groups, averaged over
tasks), with --aggregate profile <out>_profile.png/.csv (rliable's performance profile: the fraction
of runs whose final value, min-max normalised per task over all runs shown, is above each
threshold). All come with 95% stratified-bootstrap intervals. --marl-eval writes the runs in
marl-eval's JSON layout (the format of BenchMARL's and Mava's evaluation tools). --reference CSV
draws a reference band (columns t_env, low, high; optional task, label, source) on each panel and
writes <out>_reference.csv: for every run, at how many of the band's steps it lies outside; and
<out>_reference_mean.csv: for every group, at how many of them the mean of its runs lies inside,
above or below the band. One panel per task (map, scenario or env key) when several are present.
Runs on the built-in simulators (skirmish, skirmish_v2) get a line on the figure and under the table
saying they are not StarCraft II.
"""

import argparse
import os
import sys
import warnings

import numpy as np

from plotting.aggregates import (
    BOOTSTRAP,
    aggregate_iqm,
    bootstrap_band,
    curves,
    normalise_per_task,
    on_grid,
    performance_profile,
    plot_profile,
    probability_of_improvement,
    run_scores,
    summary_table,
    uneven_ends,
)
from plotting.export import markdown, marl_eval_name, to_marl_eval
from plotting.grouping import (
    BOOKKEEPING,
    apply_filters,
    differing_keys,
    simulator_note,
    split_groups,
    task_column,
)
from plotting.reference import (
    check_against_reference,
    check_mean_against_reference,
    load_reference,
    reference_for,
)
from utils.processes import exit_quietly_on_closed_pipe
from utils.results import load_runs

# what bench/ and the tests take from here besides main
__all__ = ["BOOTSTRAP", "BOOKKEEPING", "differing_keys", "marl_eval_name", "normalise_per_task", "main"]


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
        help="keep runs whose config KEY equals VALUE, or any of VALUE1,VALUE2 (repeatable: all must hold)",
    )
    p.add_argument("--smooth", type=int, default=1, help="moving average over K logged points")
    p.add_argument(
        "--status",
        default="COMPLETED,RUNNING,INTERRUPTED",
        help="run statuses to include (comma-separated; others: FAILED, and DIED "
        "for a run left RUNNING by a killed process)",
    )
    p.add_argument(
        "--evaluations",
        action="store_true",
        help="include evaluation records (evaluate=True, cross-play), left out of training curves by default",
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
    p.add_argument(
        "--last",
        type=int,
        default=5,
        metavar="K",
        help="the tables' lastK_mean/std: each run's mean over its last K logged values (as "
        "bench/compare_pairs.py --last), beside final (the last value alone) and best",
    )
    p.add_argument(
        "--aggregate-on",
        choices=["final", "lastK"],
        default="final",
        help="each run's score for --aggregate: final, its last logged value (rliable's final "
        "score), or lastK, its mean over the last K (--last) values, steadier where one test is "
        "a few dozen episodes",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    return p.parse_args(argv)


SKIP_REASONS = {
    "DIED": "killed without a record",
    "SUPERSEDED": "a run resumed from it carries its curve, or its sweep configuration completed",
    "EVALUATION": "a checkpoint's evaluation, not a training curve; --evaluations includes it",
}


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    df = runs_to_plot(a)
    out = a.out or os.path.join("results", "plots", a.metric)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    ref = load_reference(a.reference) if a.reference else None
    note = draw_figure(a, df, ref, out)

    table = summary_table(df, a.metric, a.last)
    uneven = uneven_ends(table)
    if uneven:
        print(
            "warning: final and best values below mix runs at different points of training "
            "(--status COMPLETED keeps the finished ones only):\n  " + "\n  ".join(uneven),
            file=sys.stderr,
        )
    table.to_csv(out + ".csv", index=False)
    with open(out + ".md", "w") as f:
        f.write(markdown(table) + (f"\n*{note}.*\n" if note else ""))
    written = [out + ".png", out + ".csv", out + ".md"]
    if a.aggregate:
        written += write_aggregates(a, df, out)
    if ref is not None:
        written += write_reference_checks(df, ref, out)
    if a.marl_eval:
        import json

        with open(a.marl_eval, "w") as f:
            json.dump(to_marl_eval(df, a.metric), f, indent=1)
        written.append(a.marl_eval)
    print(markdown(table), end="")
    print("wrote " + ", ".join(written))
    return 0


def runs_to_plot(a):
    """The runs the arguments select, with their group and task columns; SystemExit with one line
    when there are none."""
    if a.last < 1:
        raise SystemExit(f"error: --last must be 1 or more, not {a.last}")
    missing = [d for d in a.dirs if not os.path.isdir(d)]
    if missing:
        raise SystemExit(f"error: no such folder: {', '.join(missing)}")
    df = load_runs(a.dirs, metrics=[a.metric], status=set(a.status.split(",")), evaluations=a.evaluations)
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
    return df


def draw_figure(a, df, ref, out):
    """One panel per task, each group's mean with its 95% bootstrap band (and the reference band);
    writes out.png. -> the simulator note printed under it, or None."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    return note


def write_aggregates(a, df, out):
    """--aggregate: IQM, probability of improvement and the performance profile. -> files written."""
    written = []
    finals = run_scores(df, 1 if a.aggregate_on == "final" else a.last)
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
    return written


def write_reference_checks(df, ref, out):
    """--reference: each run's and each group's mean against the reference band. -> files written."""
    check = check_against_reference(df, ref)
    check.to_csv(f"{out}_reference.csv", index=False)
    for r in check[check["outside"] > 0].itertuples() if not check.empty else []:
        print(
            f"outside the reference: {r.group} seed {r.seed} ({r.task}) at {r.outside} of {r.points} "
            f"steps ({r.below} below), first at t_env {r.first_outside_t_env}: {r.run_dir}",
            file=sys.stderr,
        )
    mean_check = check_mean_against_reference(df, ref)
    mean_check.to_csv(f"{out}_reference_mean.csv", index=False)
    for r in mean_check.itertuples() if not mean_check.empty else []:
        print(
            f"mean of {r.runs} run(s) of {r.group} ({r.task}) inside the reference at {r.inside} of "
            f"{r.points} steps ({r.above} above, {r.below} below)",
            file=sys.stderr,
        )
    return [f"{out}_reference.csv", f"{out}_reference_mean.csv"]


if __name__ == "__main__":
    sys.exit(exit_quietly_on_closed_pipe(main))
