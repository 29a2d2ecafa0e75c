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
