"""The block every run ends with: what it reached, where it stands, where its files are."""

from utils.logger import fmt_time

# The figure of merit, first found: StarCraft-like envs' test win rate, else the test return.
FIGURES = ("test_battle_won_mean", "test_return_mean")


def figure_of_merit(stats):
    return next((key for key in FIGURES if stats.get(key)), None)


def is_stale(at, t_env, t_start, test_interval):
    """Whether the last test no longer stands for the run: training went on after it, and either a
    test fell due since (by the schedule) or it came before a whole test interval of this
    process's training (the untrained test of a run shorter than test_interval, or a resumed
    run's carried test)."""
    if at >= t_env:
        return False
    if not test_interval:
        return True
    return (t_env // test_interval) * test_interval > at or at < (t_start or 0) + test_interval


def end_block(
    status, stats, t_env, t_start=None, seconds=0.0, record=None, models=None, kind="run", test_interval=None
):
    """-> (console lines, result dict for the record's run.json). stats: {key: [(t_env, value)]},
    the whole run's (a resumed run's include the values it carried). A figure that no longer
    stands for the run (is_stale) says so: "no test since t_env X"."""
    result = {"status": status, "t_env": t_env}
    head = f"{kind} {status} at t_env {t_env}"
    if t_start is not None and t_env > t_start and seconds > 0:
        rate = (t_env - t_start) / seconds
        head += f" after {fmt_time(seconds)}: {t_env - t_start} env steps here at {rate:.0f} steps/s"
        result["steps_per_s"] = round(rate, 1)
    lines = [head]
    key = figure_of_merit(stats)
    if key is None:
        lines.append("  no test phase was run")
    else:
        t, value = stats[key][-1]
        best_t, best = max(stats[key], key=lambda p: (p[1], -p[0]))  # the earliest of equal bests
        stale = is_stale(t, t_env, t_start, test_interval)
        if stale:
            when = f"no test since t_env {t}: {t_env - t} env steps of training after it"
        else:
            when = "the last test" + (f", {t_env - t} env steps before the end" if t < t_env else "")
        lines.append(f"  {key} {value:.4f} at t_env {t} ({when}); best {best:.4f} at t_env {best_t}")
        result.update(metric=key, value=value, at=t, stale=stale, best=best, best_at=best_t)
    lines.append(f"  record: {record or 'none (no Sacred record)'}")
    if models:
        lines.append(f"  models: {models}")
        result["models"] = models
    return lines, result
