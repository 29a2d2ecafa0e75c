"""Schedules: epsilon-style linear anneals, and the fractions-of-training schedules of DIFFER,
PER and experience sharing (over schedule_horizon steps, or t_max)."""


def horizon(args):
    """The step count DIFFER's, PER's and sharing's schedules are fractions of: schedule_horizon,
    or t_max where it is null (so a 1M run can follow a 2.05M run's schedule)."""
    return getattr(args, "schedule_horizon", None) or args.t_max


def annealed_beta(start, end, t_env, steps):
    """An importance-weight exponent from start to end over `steps` env steps, clamped to them."""
    beta = start + (end - start) * t_env / max(steps, 1)
    lo, hi = sorted((start, end))
    return min(max(beta, lo), hi)


class LinearSchedule:
    """Linear from `start` to `finish` over `time_length` steps, then flat."""

    def __init__(self, start, finish, time_length):
        self.start = start
        self.finish = finish
        self.time_length = max(time_length, 1)
        self.delta = (start - finish) / self.time_length

    def eval(self, t):
        if self.start >= self.finish:
            return max(self.finish, self.start - self.delta * t)
        return min(self.finish, self.start - self.delta * t)
