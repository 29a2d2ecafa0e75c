"""Start positions as SC2 makes them: the map's trigger creates units one after another at a
point and each one takes the nearest free spot, so a group packs into a tight blob in creation
order. Both teams pack the same way, each facing the other, so the layouts are mirror images."""

import math

import numpy as np

from envs.skirmish.sim import njit

RING_STEP = 0.25  # distance between candidate rings and between candidates on a ring


@njit(cache=True)
def _fits(x, y, r, grid, flying):
    if not (r <= x <= 32 - r and r <= y <= 32 - r):
        return False
    if flying:
        return True
    for px, py in ((x, y), (x - r, y), (x + r, y), (x, y - r), (x, y + r)):
        if not grid[min(int(px), 31), min(int(py), 31)]:
            return False
    return True


@njit(cache=True)
def _free(x, y, r, cls, placed, n_placed):
    for k in range(n_placed):
        if placed[k, 3] == cls:
            dx, dy = x - placed[k, 0], y - placed[k, 1]
            rr = r + placed[k, 2]
            if dx * dx + dy * dy < rr * rr - 1e-9:
                return False
    return True


@njit(cache=True)
def _pack(radius, cls, flying, points, facing, grid, max_rings):
    """Candidate centres in order of distance from each unit's point; on each ring, starting from
    the direction the group faces and alternating to either side of it. -1 rows: no free spot."""
    n = len(radius)
    out = np.full((n, 2), -1.0)
    placed = np.zeros((n, 4))
    for u in range(n):
        r, c, px, py = radius[u], float(cls[u]), points[u, 0], points[u, 1]
        found = False
        if _fits(px, py, r, grid, flying[u]) and _free(px, py, r, c, placed, u):
            found, x, y = True, px, py
        k = 1
        while not found and k < max_rings:
            rad = k * RING_STEP
            m = max(6, math.ceil(2 * math.pi * rad / RING_STEP))
            for j in range(m):
                step = (j + 1) // 2 * (1 if j % 2 else -1)
                a = facing[u] + 2 * math.pi * step / m
                x, y = px + rad * math.cos(a), py + rad * math.sin(a)
                if _fits(x, y, r, grid, flying[u]) and _free(x, y, r, c, placed, u):
                    found = True
                    break
            k += 1
        if not found:
            return out
        out[u, 0], out[u, 1] = x, y
        placed[u, 0], placed[u, 1], placed[u, 2], placed[u, 3] = x, y, r, c
    return out


def pack(units, grid, max_rings=80):
    """units: [(radius, collision class, flying, point, facing angle)] in creation order;
    returns [len(units), 2] positions."""
    radius = np.array([u[0] for u in units], dtype=np.float64)
    cls = np.array([u[1] for u in units], dtype=np.int64)
    flying = np.array([bool(u[2]) for u in units])
    points = np.array([u[3] for u in units], dtype=np.float64).reshape(-1, 2)
    facing = np.array([u[4] for u in units], dtype=np.float64)
    out = _pack(radius, cls, flying, points, facing, np.asarray(grid, dtype=np.bool_), max_rings)
    bad = np.flatnonzero(out[:, 0] < 0)
    if len(bad):
        raise RuntimeError(f"no free spot near {tuple(points[bad[0]])}")
    return out
