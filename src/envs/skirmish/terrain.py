"""The maps' pathable cells (from the SMAC map files' cell flags, terrain.txt) and grid distance
fields for units that walk around walls."""

import os

import numpy as np

# corridor's choke: the cell flags join its two halves only through a 2x2 block that touches
# them diagonally, while in SC2 the cliff is diagonal and the passage about two cells wide.
# Opening the four cells beside the block lets units (agents with N/S/E/W moves too) pass.
CORRIDOR_CHOKE = ((13, 14), (14, 13), (11, 12), (12, 11))
# layouts where straight lines do not reach everywhere: walkers follow distance fields
NON_CONVEX = ("L4", "L6", "L7", "L8")

_GRIDS = None
_FIELDS = {}
_CLIFFS = None
_HEIGHTS = None
# terrain_height of a map without an entry in heights.txt: a monotone map of its cliff levels
HEIGHT_BASE, HEIGHT_PER_LEVEL = 0.5, 0.125


def _blocks(filename, width):
    """{name: [row strings]} of one of this folder's grid files: a line of `width` characters is a
    row of the block named by the last other line before it; blank lines and other # lines are
    comments (a row of terrain.txt may be all '#')."""
    blocks, rows = {}, None
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)) as f:
        for line in f:
            line = line.strip()
            if len(line) == width:
                rows.append(line)
            elif line and not line.startswith("#"):
                rows = blocks[line] = []
    return blocks


def load_layouts():
    """{layout name: bool grid[x, y]} from terrain.txt (rows from y = 31 down, '.' pathable)."""
    grids = {}
    for name, rows in _blocks("terrain.txt", 32).items():
        grid = np.array([[c == "." for c in row] for row in rows], dtype=bool)  # [y from 31 down, x]
        grids[name] = grid[::-1].T.copy()  # -> grid[x, y]
    for x, y in CORRIDOR_CHOKE:
        grids["L7"][x, y] = True
    return grids


def grid(layout):
    global _GRIDS
    if _GRIDS is None:
        _GRIDS = load_layouts()
    return _GRIDS[layout]


def fields(layout):
    """[1024, 32, 32] distances to every goal cell on a non-convex layout (computed once per
    process), or None where straight lines suffice."""
    if layout not in NON_CONVEX:
        return None
    if layout not in _FIELDS:
        from envs.skirmish.sim import path_fields

        _FIELDS[layout] = path_fields(grid(layout))
    return _FIELDS[layout]


def cliffs(layout):
    """[32, 32] cliff level of every cell (cliffs.txt, from the map files); ramps (r) take the mean
    of the lowest and highest level among their non-ramp neighbours."""
    global _CLIFFS
    if _CLIFFS is None:
        _CLIFFS = _blocks("cliffs.txt", 32)
    rows = _CLIFFS[layout]
    level = np.full((32, 32), np.nan)
    for k, row in enumerate(rows):  # rows from y = 31 down
        for x, c in enumerate(row):
            if c != "r":
                level[x, 31 - k] = float(c)
    ramps = np.argwhere(np.isnan(level))
    for x, y in ramps:
        near = level[max(x - 1, 0) : x + 2, max(y - 1, 0) : y + 2]
        near = near[~np.isnan(near)]
        level[x, y] = (near.min() + near.max()) / 2 if near.size else 0.0
    return level


def load_heights():
    """{map name: [32, 32] uint8 [x, y]} from heights.txt (bench/sc2map_facts.py --heights)."""
    return {
        name: np.array([list(bytes.fromhex(row)) for row in rows], dtype=np.uint8)[::-1].T.copy()
        for name, rows in _blocks("heights.txt", 64).items()
    }


def height(layout, map_name=None):
    """[32, 32] terrain_height in [0, 1] as SMAC exposes it (the game's terrain_height byte / 255):
    the map's own cell heights, read from its t3SyncHeightMap (heights.txt); for a map without
    them, 0.5 + 0.125 x the cliff level of the layout's cells (ramps halfway)."""
    global _HEIGHTS
    if _HEIGHTS is None:
        _HEIGHTS = load_heights()
    if map_name in _HEIGHTS:
        return _HEIGHTS[map_name] / 255.0
    return np.minimum(HEIGHT_BASE + HEIGHT_PER_LEVEL * cliffs(layout), 1.0)
