"""The one linear schedule, and the horizon that DIFFER's, PER's, sharing's and ICES's schedules
are fractions of (schedule_horizon, or t_max)."""


def linear(start, end, t, length):
    """start at t = 0, end from t = length on, linear in between (clamped to [start, end]). t and
    length in one unit: env steps, or shares of the schedule horizon."""
    if length <= 0 or t > length:
        return end
    value = start + (end - start) * t / length
    lo, hi = (start, end) if start <= end else (end, start)
    return min(max(value, lo), hi)


def horizon(args):
    """The step count DIFFER's, PER's and sharing's schedules are fractions of: schedule_horizon,
    or t_max where it is null (so a 1M run can follow a 2.05M run's schedule)."""
    return getattr(args, "schedule_horizon", None) or args.t_max


def horizon_share(args, t_env):
    """t_env as a share of the schedule horizon."""
    steps = horizon(args)
    return t_env / steps if steps > 0 else 1.0


class LinearSchedule:
    """linear() from `start` to `finish` over `time_length` env steps, held as an object (epsilon,
    action noise)."""

    def __init__(self, start, finish, time_length):
        self.start = start
        self.finish = finish
        self.time_length = max(time_length, 1)  # 0: one step of anneal, so t = 0 still gives start

    def eval(self, t):
        return linear(self.start, self.finish, t, self.time_length)
