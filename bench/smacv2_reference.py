"""SMACv2's published learning curves as reference bands for src/plot.py --reference.

SMACv2's repository ships its baselines' test win rates (smacv2/examples/results/
smac2_training_results.pkl: per scenario, per algorithm, per seed, a table of step,
mean_test_win_rate, mean_test_return). This reads that file from a SMACv2 checkout and writes,
for one algorithm, a band per scenario on a regular step grid: each seed's curve interpolated
linearly, low/high = the lowest/highest seed. It also prints mean [min, max] at chosen steps.

    python bench/smacv2_reference.py ~/smacv2/smacv2/examples/results/smac2_training_results.pkl \\
        --algorithm QMIX --scenarios protoss_5_vs_5 terran_5_vs_5 zerg_5_vs_5 --out qmix_ref.csv
    python src/plot.py results/sacred/skirmish_v2_5v5 --metric test_battle_won_mean --reference qmix_ref.csv
"""

import argparse

import numpy as np
import pandas as pd


def bands(results, algorithm, scenarios, every, metric):
    rows = []
    for sc in scenarios:
        runs = results[sc][algorithm]
        end = min(int(r["step"].max()) for r in runs)
        for t in range(every, end + 1, every):
            v = [np.interp(t, r["step"], r[metric]) for r in runs]
            rows.append(
                dict(
                    t_env=t,
                    low=min(v),
                    high=max(v),
                    mean=float(np.mean(v)),
                    task=sc,
                    label=f"SMACv2 {algorithm} ({len(runs)} seeds)",
                    source="oxwhirl/smacv2 smacv2/examples/results/smac2_training_results.pkl",
                )
            )
    return pd.DataFrame(rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pkl", help="smac2_training_results.pkl from a SMACv2 checkout")
    p.add_argument("--algorithm", default="QMIX", help="QMIX, MAPPO or 'open-loop MAPPO'")
    p.add_argument("--scenarios", nargs="+", default=["protoss_5_vs_5", "terran_5_vs_5", "zerg_5_vs_5"])
    p.add_argument("--metric", default="mean_test_win_rate", help="or mean_test_return")
    p.add_argument("--every", type=int, default=50_000, help="grid step in env steps")
    p.add_argument("--at", type=int, nargs="+", default=[500_000, 1_000_000, 2_000_000, 10_000_000])
    p.add_argument("--out", help="CSV to write (columns t_env, low, high, mean, task, label, source)")
    a = p.parse_args()
    results = pd.read_pickle(a.pkl)
    df = bands(results, a.algorithm, a.scenarios, a.every, a.metric)
    for sc, g in df.groupby("task", sort=False):
        cells = []
        for t in a.at:
            row = g.iloc[(g["t_env"] - t).abs().argmin()]
            cells.append(f"{t // 1000}k {row['mean']:.2f} [{row['low']:.2f}, {row['high']:.2f}]")
        print(f"{sc} {a.algorithm}: " + " | ".join(cells))
    if a.out:
        df.to_csv(a.out, index=False)
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
