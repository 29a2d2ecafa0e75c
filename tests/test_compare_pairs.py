"""bench/compare_pairs.py's first-reach table (issue: the step at which each group reaches a level)."""

import pandas as pd

from helpers import load_bench


def load():
    return load_bench("compare_pairs")


def test_first_reach_is_the_first_logged_step_at_or_above_the_level():
    cp = load()
    df = pd.DataFrame(
        {
            "run_dir": ["a"] * 4 + ["b"] * 4,
            "t_env": [30, 10, 20, 40, 10, 20, 30, 40],  # unsorted rows are sorted by step
            "value": [0.9, 0.1, 0.5, 0.2, 0.0, 0.1, 0.2, 0.3],
        }
    )
    assert cp.first_reach(df, 0.5) == {"a": 20, "b": None}
    assert cp.first_reach(df, 0.0) == {"a": 10, "b": 10}


def test_median_reach_counts_runs_that_never_reached_as_latest():
    cp = load()
    assert cp.median_reach([100, 300, 200]) == (200, 3)
    assert cp.median_reach([100, None, 200]) == (200, 2)
    assert cp.median_reach([100, 200, None, None]) == (None, 2)
    assert cp.median_reach([100, 200, 300, None]) == (250, 3)
    assert cp.median_reach([None, None]) == (None, 0)


def _runs(**columns):
    """One row per run (one logged value each): run_dir a, b, c, ... and the given config columns."""
    n = len(next(iter(columns.values())))
    rows = {"run_dir": [chr(ord("a") + i) for i in range(n)], "t_env": [10] * n, "value": [0.5] * n}
    return pd.DataFrame({**rows, "env": ["skirmish"] * n, **columns})


def test_runs_of_several_maps_are_not_compared_as_one():
    import pytest

    cp = load()
    maps = {"env_args.map_name": ["2s3z", "2s3z", "MMM2", "MMM2"]}
    df = _runs(name=["qmix"] * 4, seed=[1, 2, 1, 2], **maps)
    with pytest.raises(SystemExit, match=r"2 tasks \(2s3z, MMM2\).*--filter env_args.map_name=2s3z"):
        cp.pairable(df, "name", [])
    kept = cp.pairable(df, "name", ["env_args.map_name=MMM2"])
    assert list(kept["run_dir"]) == ["c", "d"] and set(kept["group"]) == {"qmix"}


def test_a_name_shared_by_different_configs_is_split_by_the_keys_that_differ():
    cp = load()
    df = _runs(name=["differ_qmix"] * 4, seed=[1, 2, 1, 2], lr=[0.0005, 0.0005, 0.001, 0.001])
    groups = cp.pairable(df, "name", [])["group"].tolist()
    assert groups == ["differ_qmix (lr=0.0005)"] * 2 + ["differ_qmix (lr=0.001)"] * 2
    same = _runs(name=["differ_qmix"] * 2, seed=[1, 2], lr=[0.0005, 0.0005])
    assert set(cp.pairable(same, "name", [])["group"]) == {"differ_qmix"}  # seeds of one config


def test_welch_interval_has_zero_width_when_neither_group_varies_and_widens_otherwise():
    import numpy as np

    cp = load()
    assert cp.welch(np.zeros(2), np.zeros(3)) == (0.0, 0.0)
    diff, half = cp.welch(np.array([0.2, 0.3]), np.zeros(3))
    assert np.isclose(diff, 0.25) and np.isfinite(half) and half > 0.25  # 2 seeds: a wide interval


def test_probability_of_improvement_counts_ties_half_and_its_interval_covers_it():
    import numpy as np

    cp = load()
    x, y = np.array([0.9, 0.5, 0.7]), np.array([0.5, 0.1])
    p, lo, hi = cp.improvement(x, y)
    assert np.isclose(p, 5.5 / 6)  # 6 pairs of runs, one a tie (0.5 against 0.5)
    assert lo <= p <= hi and lo >= 0 and hi <= 1
    assert np.isclose(cp.improvement(y, x)[0], 1 - p)  # the reverse order is the complement
    assert cp.improvement(np.ones(3), np.zeros(3)) == (1.0, 1.0, 1.0)


def test_t_interval_of_seeds():
    import numpy as np

    cp = load()
    m, h = cp.t_interval(np.array([0.2, 0.4, 0.6]))
    assert np.isclose(m, 0.4) and np.isclose(h, 4.302653 * 0.2 / np.sqrt(3), rtol=1e-5)
    assert cp.t_interval(np.array([0.3])) == (0.3, None)


def test_interval_cells_give_the_mean_and_its_t_interval_or_the_mean_alone():
    import numpy as np

    cp = load()
    assert cp.interval_cell(np.array([0.2, 0.4, 0.6]), 2) == "0.40 [-0.10, 0.90]"
    assert cp.interval_cell(np.array([0.25]), 2) == "0.25"


def test_run_rows_list_each_run_by_seed_with_last_k_best_and_first_reach():
    cp = load()
    df = pd.DataFrame(
        {
            "run_dir": ["x"] * 3 + ["y"] * 3,
            "seed": [10] * 3 + [2] * 3,
            "t_env": [10000, 20000, 30000] * 2,
            "value": [0.2, 0.9, 0.6, 0.1, 0.3, 0.4],
        }
    )
    values = {"x": [0.75, 0.9], "y": [0.35, 0.4]}  # [last K, best], as run_values ends each list
    assert cp.run_rows(df, values, [0.5], 2) == [
        ["2", "0.35", "0.40", "not reached"],  # seed 2 before seed 10 (numbers, not strings)
        ["10", "0.75", "0.90", "20k"],
    ]


def test_the_several_tasks_hint_names_the_key_that_holds_the_task():
    import pytest

    cp = load()
    keys = {"env_args.key": ["lbforaging:F-v3", "rware:tiny-v2"], "env_args.map_name": [None, None]}
    df = _runs(name=["iql"] * 2, seed=[1, 1], **keys)
    with pytest.raises(SystemExit, match=r"--filter env_args.key=lbforaging:F-v3"):
        cp.pairable(df, "name", [])
