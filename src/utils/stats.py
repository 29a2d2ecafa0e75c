"""Interval statistics and Markdown tables shared by the results tools (plot, cross-play)."""

import numpy as np


def t_interval(values):
    """Mean and 95% Student-t interval of a few values (the mean alone for one)."""
    v = np.asarray(values, dtype=float)
    mean = float(v.mean())
    if len(v) < 2:
        return mean, mean, mean
    from scipy import stats

    half = float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return mean, mean - half, mean + half


def markdown_table(columns, rows):
    """Lines of a Markdown table: the header, the rule, then one line per row of cell strings."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in rows]
