"""Cross-play tables for competitive envs: every good team against every adversary.

    python src/crossplay.py EXPERIMENT [--results results] [--archive DIR] [--test-nepisode 100] [--out PATH]

Finds the finished checkpoints of EXPERIMENT (a sweep with save_model=True, e.g.
sweeps/mpe_crossplay.yaml), and for each scenario evaluates every (good team's algorithm,
adversary's algorithm) pairing seed by seed: the good team of seed s's run of one algorithm
against the adversary of seed s's run of the other (evaluate=True team_checkpoints.good=...
team_checkpoints.adversary=...). Each evaluation is a Sacred run in EXPERIMENT_crossplay; a second
invocation skips the pairings already evaluated. Then it writes, per scenario and metric, the
paper-style table (rows: the good team's algorithm, columns: the adversary's; cells: mean over
seeds and its 95% Student-t interval) to <out>_<scenario>.csv and <out>.md, and prints it.
"""

import argparse
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from utils.errors import ConfigError  # noqa: E402
from utils.stats import markdown_table, t_interval  # noqa: E402

# Per scenario: the test metrics of the table (the teams' returns first, then the success figure)
METRICS = {
    "simple_adversary_v3": [
        "good_return_mean",
        "adversary_return_mean",
        "good_at_goal_mean",
        "adversary_at_goal_mean",
    ],
    "simple_tag_v3": ["good_return_mean", "adversary_return_mean", "touches_mean"],
    "simple_push_v3": [
        "good_return_mean",
        "adversary_return_mean",
        "good_goal_dist_mean",
        "adversary_goal_dist_mean",
    ],
    "simple_world_comm_v3": ["good_return_mean", "adversary_return_mean", "touches_mean"],
}
DEFAULT_METRICS = ["good_return_mean", "adversary_return_mean"]


def finished_checkpoints(results, experiment, archives=()):
    """{scenario: {algorithm: {seed: latest step folder}}} of the runs of `experiment` that
    reached t_max: in <results>/models, and in the final checkpoints a sweep archive keeps
    (archive_checkpoints), so cross-play works from a fresh checkout."""
    roots = sorted(glob.glob(os.path.join(results, "models", "*")))
    for archive in archives:
        roots += sorted(glob.glob(os.path.join(archive, "*", "checkpoint")))
    found = {}
    for root in roots:
        steps = [
            d for d in os.listdir(root) if d.isdigit() and os.path.isfile(os.path.join(root, d, "meta.json"))
        ]
        if not steps:
            continue
        folder = os.path.join(root, max(steps, key=int))
        with open(os.path.join(folder, "meta.json")) as f:
            meta = json.load(f)
        cfg = meta.get("config") or {}
        if cfg.get("experiment") != experiment or meta["t_env"] < cfg.get("t_max", 0):
            continue
        scenario = cfg["env_args"].get("scenario")
        found.setdefault(scenario, {}).setdefault(cfg["name"], {})[cfg["seed"]] = folder
    return found


def evaluated(results, experiment):
    """{(good folder, adversary folder): final test metrics} of the completed cross-play runs."""
    from utils.results import find_runs, read_run

    done = {}
    for path in find_runs([os.path.join(results, "sacred", experiment)]):
        try:
            info, metrics = read_run(path)
        except ValueError:
            continue
        teams = (info.get("team_checkpoints.good"), info.get("team_checkpoints.adversary"))
        if info["status"] == "COMPLETED" and None not in teams:
            done[teams] = {
                k[len("test_") :]: v["values"][-1] for k, v in metrics.items() if k.startswith("test_")
            }
    return done


def evaluate(env_config, scenario, good, adversary, seed, results, experiment, test_nepisode):
    import main

    argv = [
        "--config=maddpg",  # any config: each team's controller comes from its checkpoint
        f"--env-config={env_config}",
        "with",
        f"env_args.scenario={scenario}",
        "common_reward=False",
        "evaluate=True",
        f"team_checkpoints.good={good}",
        f"team_checkpoints.adversary={adversary}",
        f"test_nepisode={test_nepisode}",
        f"seed={seed}",
        f"experiment={experiment}",
        f"local_results_path={results}",
    ]
    if main.main(argv) != 0:
        raise SystemExit(f"error: cross-play evaluation failed: {' '.join(argv)}")


def tables(found, done, metrics_for):
    """-> rows {scenario, metric, good, adversary, n, mean, ci_low, ci_high}."""
    rows = []
    for scenario, algs in sorted(found.items()):
        names = sorted(algs)
        seeds = sorted(set.intersection(*(set(algs[a]) for a in names)))
        for metric in metrics_for(scenario):
            for g in names:
                for a in names:
                    vals = [
                        done[(algs[g][s], algs[a][s])][metric]
                        for s in seeds
                        if (algs[g][s], algs[a][s]) in done and metric in done[(algs[g][s], algs[a][s])]
                    ]
                    if vals:
                        mean, lo, hi = t_interval(vals)
                        rows.append(
                            dict(
                                scenario=scenario,
                                metric=metric,
                                good=g,
                                adversary=a,
                                n=len(vals),
                                mean=mean,
                                ci_low=lo,
                                ci_high=hi,
                            )
                        )
    return rows


def cell(r):
    return "" if r is None else f"{r['mean']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"


def markdown(rows):
    lines = []
    for scenario in sorted({r["scenario"] for r in rows}):
        for metric in dict.fromkeys(r["metric"] for r in rows if r["scenario"] == scenario):
            cells = {
                (r["good"], r["adversary"]): r
                for r in rows
                if r["scenario"] == scenario and r["metric"] == metric
            }
            goods = sorted({g for g, _ in cells})
            advs = sorted({a for _, a in cells})
            n = max(r["n"] for r in cells.values())
            lines += [
                f"{scenario}: test {metric} (rows: good team, columns: adversary; {n} seeds, 95% t interval)",
                "",
            ]
            lines += markdown_table(
                ["good \\ adversary", *advs],
                [[g, *(cell(cells.get((g, a))) for a in advs)] for g in goods],
            )
            lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("experiment", help="the sweep experiment whose checkpoints play each other")
    p.add_argument("--results", default=os.path.join(ROOT, "results"), help="local_results_path of the runs")
    p.add_argument("--env-config", default="mpe")
    p.add_argument("--test-nepisode", type=int, default=100, help="episodes per pairing and seed")
    p.add_argument("--out", help="write <out>_<scenario>.csv and <out>.md")
    p.add_argument(
        "--archive",
        action="append",
        default=[],
        help="also a sweep archive holding final checkpoints (archive_checkpoints: true), e.g. "
        "bench/runs/mpe_crossplay_2 (repeatable)",
    )
    a = p.parse_args(argv)
    try:
        found = finished_checkpoints(a.results, a.experiment, a.archive)
        if not found:
            where = " or ".join([f"{a.results}/models", *a.archive])
            raise ConfigError(
                f"no finished checkpoints of experiment {a.experiment!r} under {where} "
                "(train them with save_model=True, e.g. python src/sweep.py sweeps/mpe_crossplay.yaml)"
            )
        xp = f"{a.experiment}_crossplay"
        done = evaluated(a.results, xp)
        for scenario, algs in sorted(found.items()):
            seeds = sorted(set.intersection(*(set(v) for v in algs.values())))
            for g in sorted(algs):
                for adv in sorted(algs):
                    for s in seeds:
                        if (algs[g][s], algs[adv][s]) not in done:
                            print(f"cross-play {scenario} seed {s}: good {g} vs adversary {adv}", flush=True)
                            evaluate(
                                a.env_config,
                                scenario,
                                algs[g][s],
                                algs[adv][s],
                                s,
                                a.results,
                                xp,
                                a.test_nepisode,
                            )
        done = evaluated(a.results, xp)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = tables(found, done, lambda sc: METRICS.get(sc, DEFAULT_METRICS))
    text = markdown(rows)
    print(text)
    if a.out:
        import csv

        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        for scenario in sorted({r["scenario"] for r in rows}):
            with open(f"{a.out}_{scenario}.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(r for r in rows if r["scenario"] == scenario)
        with open(f"{a.out}.md", "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
