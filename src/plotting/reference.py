"""Reference bands: read them, and say where each run and each group's mean lies against them."""

import numpy as np


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
