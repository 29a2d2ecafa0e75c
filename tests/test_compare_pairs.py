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
