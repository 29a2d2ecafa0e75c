"""Start positions as SC2 makes them: the map's trigger creates units one after another at a
point and each one takes the nearest free spot, so a group packs into a tight blob in creation
order. Both teams pack the same way, each facing the other, so the layouts are mirror images."""

import math

import numpy as np

RING_STEP = 0.25  # distance between candidate rings and between candidates on a ring


def _candidates(point, facing, max_rings=80):
    """Candidate centres in order of distance from point; on each ring, starting from the
    direction the group faces and alternating to either side of it."""
    yield point[0], point[1]
    for k in range(1, max_rings):
        r = k * RING_STEP
        m = max(6, math.ceil(2 * math.pi * r / RING_STEP))
        for j in range(m):
            step = (j + 1) // 2 * (1 if j % 2 else -1)
            a = facing + 2 * math.pi * step / m
            yield point[0] + r * math.cos(a), point[1] + r * math.sin(a)


def _fits(x, y, r, grid, flying):
    if not (r <= x <= 32 - r and r <= y <= 32 - r):
        return False
    if flying:
        return True
    for px, py in ((x, y), (x - r, y), (x + r, y), (x, y - r), (x, y + r)):
        if not grid[min(int(px), 31), min(int(py), 31)]:
            return False
    return True


def pack(units, grid):
    """units: [(radius, collision class, flying, point, facing angle)] in creation order;
    returns [len(units), 2] positions."""
    placed = []  # (x, y, r, class)
    for r, cls, flying, point, facing in units:
        for x, y in _candidates(point, facing):
            if not _fits(x, y, r, grid, flying):
                continue
            if all(
                c != cls or (x - px) ** 2 + (y - py) ** 2 >= (r + pr) ** 2 - 1e-9 for px, py, pr, c in placed
            ):
                placed.append((x, y, r, cls))
                break
        else:
            raise RuntimeError(f"no free spot near {point}")
    return np.array([(x, y) for x, y, _, _ in placed], dtype=np.float64)
