"""The skirmish game loop: SC2's default unit behaviour resolved one game loop at a time.

One call advances the battle `n_loops` loops. Per loop, in order: target upkeep (agents drop dead
targets; enemies keep, release or acquire one, retaliate against agents that hit them, Medivacs
pick whom to heal), desired motion (orders, chasing, melee units going round to a free place
beside their target, path-following around walls), collisions,
weapons (cooldowns, shots of the loop resolved together, Colossus beam, Baneling bursts on
contact and on death), healing and regeneration. The kernel is compiled with numba when it is
installed (the loop is sequential, and at <= 66 units numpy's per-call overhead would cost more
than the work); without numba the same code runs as plain Python, slowly.
"""

import math

import numpy as np

try:
    from numba import njit

    NUMBA = True
except ImportError:  # pragma: no cover - the same code, interpreted
    NUMBA = False

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda f: f


def compile_cache():
    """Where numba keeps the compiled kernel: NUMBA_CACHE_DIR, else __pycache__ beside this file."""
    import os

    root = os.environ.get("NUMBA_CACHE_DIR")
    return root or os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")


def compiled_before():
    """True where numba has a compiled kernel of this file cached (or numba is absent)."""
    import glob
    import os

    # NUMBA_CACHE_DIR holds a folder per source folder (skirmish_<hash>/)
    pattern = ("skirmish*", "sim.*.nbi") if os.environ.get("NUMBA_CACHE_DIR") else ("sim.*.nbi",)
    return not NUMBA or bool(glob.glob(os.path.join(compile_cache(), *pattern)))


_told = False


def say_if_compiling():
    """A first run's one line: the simulator is compiled once, which takes a minute or two."""
    global _told
    if _told or compiled_before():
        return
    _told = True
    from utils.logger import get_console_logger

    get_console_logger().info(
        "compiling the skirmish simulator once (numba, about 2 min on 2 cores); "
        f"later runs load it from {compile_cache()}"
    )


# SC2 rates per game loop (Normal speed: 16 loops per game second)
SHIELD_REGEN_DELAY = 160.0  # loops without damage before shields regenerate (10 s)
SHIELD_REGEN = 0.125  # shield per loop (2/s)
ZERG_REGEN = 0.01709  # life per loop (0.2734/s)
ENERGY_REGEN = 0.03516  # Medivac energy per loop (0.5625/s)
MAX_ENERGY = 200.0
HEAL_RATE = 0.5625  # Medivac heal, HP per loop (9/s)
HEAL_PER_ENERGY = 3.0  # HP restored per point of energy
HEAL_RANGE = 4.0  # Medivac heal cast range (edge to edge)
ENEMY_HEAL_SCAN = 6.0  # how far an enemy Medivac looks for someone to heal (centre to centre)
BANELING_SPLASH = 2.2  # Baneling burst radius
BEAM_HALF_LENGTH = 1.4  # Colossus beam: a 2.8 x 0.3 bar across the line of fire
BEAM_HALF_WIDTH = 0.15
MIN_HIT = 0.5  # SC2's least damage a hit does to health
RETALIATE_LOOPS = 16  # an enemy hit within this many loops answers its attacker
AVOID_LOOKAHEAD = 1.0  # cells ahead within which a standing friend is steered around
AVOID_MARGIN = 0.05  # clearance kept when passing it
ARRIVE = 0.5  # enemies stop this close to their attack-move point
# Melee surround: SC2's melee units flow round the friends already striking their target to a
# free place beside it (the arrival behaviour of Blizzard's GDC 2011 navigation talk; some 6 to 8
# Zerglings surround a Marauder). A melee attacker near its target whose straight way in is
# taken heads for the nearest free place on the ring where it could strike, going round outside
# the ring of attackers.
MELEE_RANGE = 0.5  # weapon ranges up to this count as melee (Zealot, Zergling, Baneling)
SURROUND_NEAR = 3.0  # distance beyond the striking ring within which a melee attacker looks for a place
SURROUND_STEP = math.pi / 18  # angle between the candidate places on the ring
SURROUND_SLACK = 0.05  # overlap tolerated between a candidate place and a unit standing there
# the candidate places' turns from the attacker's bearing: k * SURROUND_STEP, k = 1..18
_TURNS = SURROUND_STEP * np.arange(1, int(round(math.pi / SURROUND_STEP)) + 1)
SURROUND_COS, SURROUND_SIN = np.cos(_TURNS), np.sin(_TURNS)

# unit order kinds
IDLE, MOVE, ATTACK, HEAL = 0, 1, 2, 3
# how the scripted side's units behave when they have no target (the map's trigger order).
# HUNT (SMACv2's map trigger): every clock[1] loops each unit without an order is ordered to
# attack the nearest living hostile unit, and keeps that target until it dies
ATTACK_MOVE, ATTACK_GROUP, STATIC, HUNT = 0, 1, 2, 3
ENEMY_MODES = {"attack_move": ATTACK_MOVE, "attack_group": ATTACK_GROUP, "static": STATIC, "hunt": HUNT}

# columns of the per-unit float table
RADIUS, SPEED, DMG, HITS, BONUS, ARMOUR, RANGE, COOLDOWN, ACQUIRE, HP_MAX, SH_MAX = range(11)
N_FLOAT = 11
# columns of the per-unit int table
TEAM, BONUS_VS, LIGHT, ARMORED, BIO, HITS_GROUND, HITS_AIR, FLYING, REGEN, KIND, CLASS, SCRIPTED = range(12)
N_INT = 12
# KIND values
K_PLAIN, K_MEDIVAC, K_COLOSSUS, K_BANELING = 0, 1, 2, 3
# BONUS_VS values
VS_NONE, VS_LIGHT, VS_ARMORED = 0, 1, 2


@njit(cache=True)
def _can_hit(ints, i, j):
    if ints[j, FLYING]:
        return ints[i, HITS_AIR] == 1
    return ints[i, HITS_GROUND] == 1


@njit(cache=True)
def _raw_damage(flt, ints, i, j):
    raw = flt[i, DMG]
    vs = ints[i, BONUS_VS]
    if (vs == VS_LIGHT and ints[j, LIGHT]) or (vs == VS_ARMORED and ints[j, ARMORED]):
        raw += flt[i, BONUS]
    return raw


@njit(cache=True)
def _hit(flt, hp, sh, quiet, j, raw, n_hits):
    """SC2's per-hit rule: shields absorb first (no armour on them); armour reduces what reaches
    health, never below MIN_HIT; each hit of a multi-hit weapon on its own."""
    for _ in range(n_hits):
        rest = raw
        if sh[j] > 0.0:
            absorbed = min(sh[j], rest)
            sh[j] -= absorbed
            rest -= absorbed
        if rest > 0.0:
            hp[j] -= max(rest - flt[j, ARMOUR], MIN_HIT)
    quiet[j] = 0.0


@njit(cache=True)
def _clear(grid, x0, y0, x1, y1):
    """Whether the straight segment between two points crosses only pathable cells."""
    dx, dy = x1 - x0, y1 - y0
    n = int(math.sqrt(dx * dx + dy * dy) / 0.25) + 1
    for k in range(n + 1):
        t = k / n
        cx, cy = int(x0 + dx * t), int(y0 + dy * t)
        if cx < 0 or cy < 0 or cx > 31 or cy > 31 or not grid[cx, cy]:
            return False
    return True


@njit(cache=True)
def _waypoint(grid, fields, x, y, gx, gy):
    """Where a ground unit at (x, y) heads to reach (gx, gy): straight there when the segment is
    clear, else the centre of the neighbouring cell closest to the goal along the grid."""
    if _clear(grid, x, y, gx, gy):
        return gx, gy
    g = min(max(int(gx), 0), 31) * 32 + min(max(int(gy), 0), 31)
    cx, cy = min(max(int(x), 0), 31), min(max(int(y), 0), 31)
    here = fields[g, cx, cy]
    best, bx, by = here, -1, -1
    for ddx in range(-1, 2):
        for ddy in range(-1, 2):
            nx, ny = cx + ddx, cy + ddy
            if (ddx == 0 and ddy == 0) or nx < 0 or ny < 0 or nx > 31 or ny > 31:
                continue
            if ddx != 0 and ddy != 0 and not (grid[cx + ddx, cy] and grid[cx, cy + ddy]):
                continue
            if fields[g, nx, ny] < best:
                best, bx, by = fields[g, nx, ny], nx, ny
    if bx < 0:
        return gx, gy
    return bx + 0.5, by + 0.5


@njit(cache=True)
def _burst(flt, ints, pos, hp, sh, quiet, alive, hit_by, hit_age, b):
    """A Baneling's burst: one hit on every living hostile ground unit the disc touches."""
    for j in range(len(hp)):
        if not alive[j] or ints[j, TEAM] == ints[b, TEAM] or ints[j, FLYING]:
            continue
        d = math.hypot(pos[j, 0] - pos[b, 0], pos[j, 1] - pos[b, 1])
        if d <= BANELING_SPLASH + flt[j, RADIUS]:
            _hit(flt, hp, sh, quiet, j, _raw_damage(flt, ints, b, j), 1)
            hit_by[j], hit_age[j] = b, 0


@njit(cache=True)
def run_loops(
    n_loops,
    jitter,
    flt,
    ints,
    grid,
    fields,
    use_paths,
    modes,
    goals,
    facing,
    clock,
    pos,
    hp,
    sh,
    energy,
    cd,
    quiet,
    alive,
    target,
    order,
    opoint,
    hit_by,
    hit_age,
    burst,
):
    """Advances the battle n_loops game loops in place. jitter [n_loops, N]: loops added to each
    cooldown that starts in that loop. Units under orders (agents) follow them; scripted units
    (enemies; agents too when both sides play the built-in behaviour) follow SC2's default unit
    behaviour under their team's map order modes[team] toward goals[team]. facing [2, 2]: the
    direction each team faces the other; equally near targets are told apart by the side they
    stand on relative to it, which the mirror image of a battle leaves unchanged. clock [3]:
    loops since the units were created (advanced here), HUNT's tick period and its phase."""
    n = len(hp)
    shooters = np.empty(n, np.int64)
    by_target = np.empty(n, np.int64)  # _surround's buffer
    in_range = np.zeros(n, np.bool_)
    moving = np.zeros(n, np.bool_)
    dest = np.empty((n, 2))
    new = np.empty((n, 2))
    push = np.empty((n, 2))
    before = np.empty(n, np.int64)
    for loop in range(n_loops):
        clock[0] += 1
        tick = clock[1] > 0 and clock[0] >= clock[1] and (clock[0] - clock[2]) % clock[1] == 0
        # 1. target upkeep (every unit reads the targets as they were at the start of the loop,
        # so the result does not depend on unit order)
        before[:] = target
        for i in range(n):
            if not alive[i]:
                continue
            t = target[i]
            if t >= 0 and not alive[t]:
                t = -1
            team = ints[i, TEAM]
            mode = modes[team]
            if not ints[i, SCRIPTED]:
                if t < 0 and order[i] >= ATTACK:
                    order[i] = IDLE
                target[i] = t
                continue
            if ints[i, KIND] == K_MEDIVAC:  # autocast heal: lowest-health damaged friendly nearby
                if t >= 0 and hp[t] >= flt[t, HP_MAX]:
                    t = -1
                if t < 0:
                    low = np.inf
                    for j in range(n):
                        if (
                            j != i
                            and alive[j]
                            and ints[j, TEAM] == team
                            and ints[j, BIO]
                            and hp[j] < flt[j, HP_MAX]
                            and hp[j] < low
                            and math.hypot(pos[j, 0] - pos[i, 0], pos[j, 1] - pos[i, 1]) <= ENEMY_HEAL_SCAN
                        ):
                            low, t = hp[j], j
                target[i] = t
                continue
            if flt[i, DMG] <= 0.0:
                continue
            if mode == HUNT:
                if t < 0:
                    order[i] = IDLE
                elif order[i] == ATTACK:  # an ordered target is kept, in range or not
                    target[i] = t
                    continue
                if tick:  # ordered onto the nearest living hostile; refused if it cannot be hit
                    best, bj = np.inf, -1
                    for j in range(n):
                        if alive[j] and ints[j, TEAM] != team:
                            d = math.hypot(pos[j, 0] - pos[i, 0], pos[j, 1] - pos[i, 1])
                            if d < best - 1e-9:
                                best, bj = d, j
                    if bj >= 0 and _can_hit(ints, i, bj):
                        order[i] = ATTACK
                        target[i] = bj
                        continue
            if t >= 0:
                d = math.hypot(pos[t, 0] - pos[i, 0], pos[t, 1] - pos[i, 1])
                reach = flt[i, RANGE] + flt[i, RADIUS] + flt[t, RADIUS]
                attacking_me = before[t] == i and (ints[t, SCRIPTED] or order[t] == ATTACK)
                if not (d <= reach or (attacking_me and mode != STATIC)):
                    t = -1
            if t < 0:
                best, side = np.inf, -np.inf
                for j in range(n):
                    if not alive[j] or ints[j, TEAM] == team or not _can_hit(ints, i, j):
                        continue
                    d = math.hypot(pos[j, 0] - pos[i, 0], pos[j, 1] - pos[i, 1])
                    if mode == STATIC:
                        ok = d <= flt[i, RANGE] + flt[i, RADIUS] + flt[j, RADIUS]
                    else:
                        ok = (
                            mode == ATTACK_GROUP
                            or d < flt[i, ACQUIRE] + flt[j, RADIUS]
                            or (hit_by[i] == j and hit_age[i] <= RETALIATE_LOOPS)
                        )
                    if not ok or d > best + 1e-9:
                        continue
                    c = facing[team, 0] * (pos[j, 1] - pos[i, 1]) - facing[team, 1] * (pos[j, 0] - pos[i, 0])
                    if d < best - 1e-9 or c > side:
                        best, side, t = d, c, j
            target[i] = t

        # 2. desired motion
        for i in range(n):
            moving[i] = False
            in_range[i] = False
            if not alive[i]:
                continue
            t = target[i]
            team = ints[i, TEAM]
            engaged = t >= 0 and (ints[i, SCRIPTED] or order[i] >= ATTACK)
            if engaged:
                d = math.hypot(pos[t, 0] - pos[i, 0], pos[t, 1] - pos[i, 1])
                if ints[i, KIND] == K_MEDIVAC:
                    reach = HEAL_RANGE + flt[i, RADIUS] + flt[t, RADIUS]
                else:
                    reach = flt[i, RANGE] + flt[i, RADIUS] + flt[t, RADIUS]
                if d <= reach:
                    in_range[i] = True
                else:
                    moving[i] = True
                    dest[i, 0], dest[i, 1] = pos[t, 0], pos[t, 1]
            elif not ints[i, SCRIPTED]:
                if order[i] == MOVE:
                    moving[i] = True
                    dest[i, 0], dest[i, 1] = opoint[i, 0], opoint[i, 1]
            elif ints[i, KIND] == K_MEDIVAC:  # follow the army
                cx = cy = 0.0
                k = 0
                near = math.inf
                hunt = modes[team] == HUNT  # hunters scatter: stay with the nearest, not between them
                for j in range(n):
                    if alive[j] and ints[j, TEAM] == team and ints[j, KIND] != K_MEDIVAC:
                        if hunt:
                            dj = math.hypot(pos[j, 0] - pos[i, 0], pos[j, 1] - pos[i, 1])
                            if dj < near:
                                near, cx, cy, k = dj, pos[j, 0], pos[j, 1], 1
                        else:
                            cx += pos[j, 0]
                            cy += pos[j, 1]
                            k += 1
                if k > 0 and math.hypot(cx / k - pos[i, 0], cy / k - pos[i, 1]) > ARRIVE:
                    moving[i] = True
                    dest[i, 0], dest[i, 1] = cx / k, cy / k
            elif modes[team] == ATTACK_MOVE:
                gx, gy = goals[team, 0], goals[team, 1]
                if math.hypot(gx - pos[i, 0], gy - pos[i, 1]) > ARRIVE:
                    moving[i] = True
                    dest[i, 0], dest[i, 1] = gx, gy
            if moving[i] and flt[i, SPEED] <= 0.0:
                moving[i] = False

        # 3. integrate, collide, keep ground units on pathable cells
        for i in range(n):
            new[i, 0], new[i, 1] = pos[i, 0], pos[i, 1]
            if not moving[i]:
                continue
            tx, ty = dest[i, 0], dest[i, 1]
            t = target[i]
            around = False
            if t >= 0 and flt[i, RANGE] <= MELEE_RANGE and tx == pos[t, 0] and ty == pos[t, 1]:
                around, tx, ty = _surround(flt, ints, alive, grid, pos, i, t, by_target)
            if not around and use_paths and not ints[i, FLYING] and ints[i, KIND] != K_COLOSSUS:
                tx, ty = _waypoint(grid, fields, pos[i, 0], pos[i, 1], tx, ty)
            dx, dy = tx - pos[i, 0], ty - pos[i, 1]
            length = math.hypot(dx, dy)
            if length > 1e-9 and not around:
                dx, dy = _steer(flt, ints, alive, moving, facing, pos, i, dx / length, dy / length)
                dx, dy = dx * length, dy * length
            step = flt[i, SPEED]
            if not ints[i, SCRIPTED] and order[i] == MOVE and target[i] < 0:
                left = math.hypot(dest[i, 0] - pos[i, 0], dest[i, 1] - pos[i, 1])
                if left <= step:  # the move order completes this loop
                    order[i] = IDLE
            if length > 1e-9:
                f = min(step, length) / length
                new[i, 0] += dx * f
                new[i, 1] += dy * f
        for _ in range(2):  # pushes of a pass computed from the same positions, then applied
            push[:] = 0.0
            for i in range(n):
                if not alive[i]:
                    continue
                for j in range(i + 1, n):
                    if not alive[j] or ints[i, CLASS] != ints[j, CLASS]:
                        continue
                    dx, dy = new[j, 0] - new[i, 0], new[j, 1] - new[i, 1]
                    d = math.hypot(dx, dy)
                    overlap = flt[i, RADIUS] + flt[j, RADIUS] - d
                    if overlap <= 0.0:
                        continue
                    if d < 1e-9:
                        dx, dy, d = 1.0, 0.0, 1.0
                    hostile = ints[i, TEAM] != ints[j, TEAM]
                    wi = _give(flt, i, moving[i], in_range[i], hostile)
                    wj = _give(flt, j, moving[j], in_range[j], hostile)
                    if wi + wj <= 0.0:
                        continue
                    si, sj = overlap * wi / (wi + wj) / d, overlap * wj / (wi + wj) / d
                    push[i, 0] -= dx * si
                    push[i, 1] -= dy * si
                    push[j, 0] += dx * sj
                    push[j, 1] += dy * sj
            new += push
        for i in range(n):
            if not alive[i]:
                continue
            x, y = min(max(new[i, 0], 0.0), 31.999), min(max(new[i, 1], 0.0), 31.999)
            if not ints[i, FLYING] and ints[i, KIND] != K_COLOSSUS and not grid[int(x), int(y)]:
                if grid[int(x), int(pos[i, 1])]:
                    y = pos[i, 1]
                elif grid[int(pos[i, 0]), int(y)]:
                    x = pos[i, 0]
                else:
                    x, y = pos[i, 0], pos[i, 1]
            pos[i, 0], pos[i, 1] = x, y

        # 4. weapons: every ready unit in range shoots; the shots of the loop land together
        n_shots = 0
        for i in range(n):
            fired = False
            ready = alive[i] and in_range[i] and ints[i, KIND] != K_MEDIVAC and flt[i, DMG] > 0.0
            if ready and cd[i] <= 0.0 and _can_hit(ints, i, target[i]):
                shooters[n_shots] = i
                n_shots += 1
                fired = True
                cd[i] += flt[i, COOLDOWN] + jitter[loop, i]  # keeps the fraction of a loop
            if not fired and cd[i] < 0.0:
                cd[i] = 0.0
            if cd[i] > 0.0:
                cd[i] -= 1.0
        was_alive = alive.copy()
        for s in range(n_shots):
            i = shooters[s]
            t = target[i]
            kind = ints[i, KIND]
            if kind == K_BANELING:
                _burst(flt, ints, pos, hp, sh, quiet, was_alive, hit_by, hit_age, i)
                hp[i] = 0.0
                burst[i] = True
            elif kind == K_COLOSSUS:
                ux, uy = pos[t, 0] - pos[i, 0], pos[t, 1] - pos[i, 1]
                u = max(math.hypot(ux, uy), 1e-9)
                ux, uy = ux / u, uy / u
                for j in range(n):
                    if not was_alive[j] or ints[j, TEAM] == ints[i, TEAM] or ints[j, FLYING]:
                        continue
                    rx, ry = pos[j, 0] - pos[t, 0], pos[j, 1] - pos[t, 1]
                    across = abs(rx * ux + ry * uy)
                    along = abs(-rx * uy + ry * ux)
                    r = flt[j, RADIUS]
                    if j == t or (along <= BEAM_HALF_LENGTH + r and across <= BEAM_HALF_WIDTH + r):
                        _hit(flt, hp, sh, quiet, j, _raw_damage(flt, ints, i, j), int(flt[i, HITS]))
                        hit_by[j], hit_age[j] = i, 0
            else:
                _hit(flt, hp, sh, quiet, t, _raw_damage(flt, ints, i, t), int(flt[i, HITS]))
                hit_by[t], hit_age[t] = i, 0
        # deaths; a Baneling that dies bursts, which may kill more (chains resolve this loop)
        changed = True
        while changed:
            changed = False
            for i in range(n):
                if alive[i] and hp[i] <= 0.0:
                    alive[i] = False
                    hp[i] = 0.0
                    sh[i] = 0.0
                    target[i] = -1
                    if ints[i, KIND] == K_BANELING and not burst[i]:
                        burst[i] = True
                        _burst(flt, ints, pos, hp, sh, quiet, alive, hit_by, hit_age, i)
                        changed = True

        # 5. healing, regeneration, energy
        for i in range(n):
            if not alive[i]:
                continue
            if ints[i, KIND] == K_MEDIVAC:
                t = target[i]
                if (
                    in_range[i]
                    and t >= 0
                    and alive[t]
                    and ints[t, BIO]
                    and (ints[i, SCRIPTED] or order[i] == HEAL)
                ):
                    amount = min(HEAL_RATE, flt[t, HP_MAX] - hp[t], energy[i] * HEAL_PER_ENERGY)
                    if amount > 0.0:
                        hp[t] += amount
                        energy[i] -= amount / HEAL_PER_ENERGY
                energy[i] = min(energy[i] + ENERGY_REGEN, MAX_ENERGY)
            quiet[i] += 1.0
            hit_age[i] += 1
            if quiet[i] >= SHIELD_REGEN_DELAY and sh[i] < flt[i, SH_MAX]:
                sh[i] = min(sh[i] + SHIELD_REGEN, flt[i, SH_MAX])
            if ints[i, REGEN] and hp[i] < flt[i, HP_MAX]:
                hp[i] = min(hp[i] + ZERG_REGEN, flt[i, HP_MAX])


@njit(cache=True)
def _free_place(flt, grid, pos, i, near, m, x, y):
    """Whether unit i could stand at (x, y): a pathable cell, none of the m units in near[:m]
    overlapping it by more than the slack."""
    if x < 0.0 or y < 0.0 or x >= 32.0 or y >= 32.0 or not grid[int(x), int(y)]:
        return False
    for k in range(m):
        j = near[k]
        gap = flt[i, RADIUS] + flt[j, RADIUS] - SURROUND_SLACK
        dx, dy = pos[j, 0] - x, pos[j, 1] - y
        if dx * dx + dy * dy < gap * gap:
            return False
    return True


@njit(cache=True)
def _surround(flt, ints, alive, grid, pos, i, t, near):
    """-> (whether melee unit i goes round to a place beside its target t, where it heads).

    The places are points of the ring at which i would strike t, every SURROUND_STEP from i's own
    bearing; the nearest free one is chosen: no other living unit of i's collision class (either
    team, the target aside) overlaps it. Far from t (beyond SURROUND_NEAR), or with the place
    straight ahead free, i heads at t as before; with every place taken it waits behind. near: a
    buffer for the units close enough to t to cover a place."""
    rx, ry = pos[i, 0] - pos[t, 0], pos[i, 1] - pos[t, 1]
    d = math.hypot(rx, ry)
    ring = flt[t, RADIUS] + flt[i, RADIUS] + 0.5 * flt[i, RANGE]
    if d < 1e-9 or d > ring + SURROUND_NEAR:
        return False, pos[t, 0], pos[t, 1]
    # only a unit nearer t than the ring plus both radii can overlap a place on the ring
    m = 0
    for j in range(pos.shape[0]):
        if j == i or j == t or not alive[j] or ints[j, CLASS] != ints[i, CLASS]:  # noqa: SIM109 (numba)
            continue
        reach = ring + flt[i, RADIUS] + flt[j, RADIUS] - SURROUND_SLACK
        if math.hypot(pos[j, 0] - pos[t, 0], pos[j, 1] - pos[t, 1]) < reach:
            near[m] = j
            m += 1
    ux, uy = rx / d, ry / d  # the attacker's bearing from its target
    if _free_place(flt, grid, pos, i, near, m, pos[t, 0] + ring * ux, pos[t, 1] + ring * uy):
        return False, pos[t, 0], pos[t, 1]
    # equals: counter-clockwise first, for both teams (a mirrored battle is the same battle turned
    # half a circle, which keeps the sense of rotation)
    for k in range(SURROUND_COS.shape[0]):
        c, s_ = SURROUND_COS[k], SURROUND_SIN[k]
        for sign in (1.0, -1.0):
            # the bearing turned by sign * (k + 1) * SURROUND_STEP
            bx, by = ux * c - sign * uy * s_, uy * c + sign * ux * s_
            px, py = pos[t, 0] + ring * bx, pos[t, 1] + ring * by
            if not _free_place(flt, grid, pos, i, near, m, px, py):
                continue
            # near the place's bearing: step into it; else go round outside the attackers
            if (k + 1) * SURROUND_STEP * d <= 2.0 * flt[i, RADIUS] + flt[i, SPEED]:
                return True, px, py
            outside = ring + 2.0 * flt[i, RADIUS]
            vx = -sign * uy + (outside - d) * ux
            vy = sign * ux + (outside - d) * uy
            norm = math.hypot(vx, vy)
            return True, pos[i, 0] + vx / norm * d, pos[i, 1] + vy / norm * d
    return False, pos[t, 0], pos[t, 1]


@njit(cache=True)
def _steer(flt, ints, alive, moving, facing, pos, i, ux, uy):
    """Local avoidance: the direction in which unit i, heading (ux, uy), passes the nearest
    standing friend in its way (same collision class, centre within one cell ahead and less than
    the sum of radii to the side), aiming at the point beside it; (ux, uy) when nothing blocks.
    SC2's units flow around allies that stopped to shoot, so a column attack-moving into a fight
    spreads into a concave; pushing through them instead jams the rear units behind the front."""
    team, best, best_side, bj = ints[i, TEAM], np.inf, -np.inf, -1
    for j in range(pos.shape[0]):
        if j == i or not alive[j] or moving[j] or ints[j, TEAM] != team or ints[j, CLASS] != ints[i, CLASS]:
            continue
        rx, ry = pos[j, 0] - pos[i, 0], pos[j, 1] - pos[i, 1]
        ahead = rx * ux + ry * uy
        side = ux * ry - uy * rx
        reach = flt[i, RADIUS] + flt[j, RADIUS]
        if not (0.0 < ahead <= reach + AVOID_LOOKAHEAD and abs(side) < reach):
            continue
        # nearest first; equals by side, never by unit order (which differs between the teams)
        if ahead < best - 1e-6 or (ahead <= best + 1e-6 and side > best_side + 1e-6):
            best, best_side, bj = ahead, side, j
    if bj < 0:
        return ux, uy
    rx, ry = pos[bj, 0] - pos[i, 0], pos[bj, 1] - pos[i, 1]
    side = ux * ry - uy * rx  # > 0: the friend is on the left of the heading
    if abs(side) < 1e-6:  # dead ahead (to rounding): pass on its right, as the mirrored unit does
        side = 1.0
    reach = flt[i, RADIUS] + flt[bj, RADIUS] + AVOID_MARGIN
    # the point beside the friend, on the side away from it
    px = pos[bj, 0] + uy * reach * (1.0 if side > 0.0 else -1.0)
    py = pos[bj, 1] - ux * reach * (1.0 if side > 0.0 else -1.0)
    vx, vy = px - pos[i, 0], py - pos[i, 1]
    norm = math.hypot(vx, vy)
    if norm < 1e-9:
        return ux, uy
    return vx / norm, vy / norm


@njit(cache=True)
def _give(flt, i, moving, holding, hostile):
    """How much of an overlap unit i yields: rooted units none; a unit on the move all of it; a
    unit standing its ground yields little to hostiles and some to friends while it shoots."""
    if flt[i, SPEED] <= 0.0:
        return 0.0
    if moving:
        return 1.0
    if hostile:
        return 0.1
    if holding:
        return 0.25
    return 1.0


@njit(cache=True)
def path_fields(grid):
    """[32 * 32 goals, 32, 32] grid distances (8-connected, diagonals sqrt 2, no corner cutting)
    from every cell to every goal cell; inf where unreachable."""
    fields = np.full((1024, 32, 32), np.inf, np.float32)
    qx = np.empty(1024 * 32, np.int64)
    qy = np.empty(1024 * 32, np.int64)
    for g in range(1024):
        gx, gy = g // 32, g % 32
        if not grid[gx, gy]:
            continue
        f = fields[g]
        f[gx, gy] = 0.0
        # label-correcting sweeps with a FIFO queue (small grid: cheap and exact)
        head, tail = 0, 0
        qx[tail], qy[tail] = gx, gy
        tail += 1
        while head != tail:
            x, y = qx[head], qy[head]
            head = (head + 1) % len(qx)
            for dx in range(-1, 2):
                for dy in range(-1, 2):
                    nx, ny = x + dx, y + dy
                    if (dx == 0 and dy == 0) or nx < 0 or ny < 0 or nx > 31 or ny > 31 or not grid[nx, ny]:
                        continue
                    if dx != 0 and dy != 0:
                        if not (grid[x + dx, y] and grid[x, y + dy]):
                            continue
                        c = f[x, y] + 1.4142135
                    else:
                        c = f[x, y] + 1.0
                    if c < f[nx, ny] - 1e-6:
                        f[nx, ny] = c
                        qx[tail], qy[tail] = nx, ny
                        tail = (tail + 1) % len(qx)
    return fields
