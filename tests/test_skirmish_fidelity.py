"""Skirmish plays out as SC2 does: fair mirror matches, outcomes independent of step_mul, duels
that end at the game loop SC2's rules give, the built-in unit behaviour, terrain, SMAC's API."""

import math
from collections import deque

import numpy as np
import pytest

from envs.skirmish import sim
from envs.skirmish.api import Direction
from envs.skirmish.env import SkirmishEnv

MARINE_CD, STALKER_CD, ZEALOT_CD = 0.8608 * 16, 1.8701 * 16, 1.2 * 16


def clear_scene(env, keep):
    """Kills every unit not in keep (indices), so a duel is fought alone."""
    for i in range(env.n):
        if i not in keep:
            env.hp[i] = env.sh[i] = 0.0
            env.alive[i] = False
    env._cache = None


def hand_shots_to_kill(hp, sh, armour, raw, hits):
    """Attacks needed to kill, by SC2's per-hit rule (shields first, no armour on them; armour on
    what reaches health, at least 0.5), written out independently of the simulator."""
    attacks = 0
    while hp > 0:
        attacks += 1
        for _ in range(hits):
            rest = raw
            if sh > 0:
                absorbed = min(sh, rest)
                sh -= absorbed
                rest -= absorbed
            if rest > 0:
                hp -= max(rest - armour, 0.5)
    return attacks


def hold(env, **orders):
    """Actions that keep every living agent standing (stop), dead ones no-op; orders: a{i}=action."""
    actions = [1 if alive else 0 for alive in env.alive[: env.n_agents]]
    for k, v in orders.items():
        actions[int(k[1:])] = v
    return actions


def loops_until_dead(env, unit, orders, limit=2000):
    """Steps env one loop at a time (step_mul 1), agents holding except orders, until unit dies."""
    for loop in range(1, limit):
        env.step(hold(env, **orders))
        if not env.alive[unit]:
            return loop
    raise AssertionError("no death")


# --- mirror matches ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["3m", "8m", "25m", "2s3z", "3s5z", "MMM", "1c3s5z", "bane_vs_bane"])
def test_mirror_matches_are_fair(name):
    """Both teams play SC2's built-in behaviour from mirrored spawns: each wins about as often."""
    env = SkirmishEnv(map_name=name, seed=3, builtin_agents=True)
    wins = losses = 0
    for _ in range(60):
        env.reset()
        done = False
        while not done:
            _, done, info = env.step([0] * env.n_agents)
        alive_a, alive_e = env.alive[: env.n_agents].any(), env.alive[env.n_agents :].any()
        wins += info["battle_won"]
        losses += (not info["battle_won"]) and alive_e and (not alive_a or env.only_medivac_left(True))
    decisive = wins + losses
    assert decisive >= 20, (wins, losses)
    # 99.9% two-sided binomial interval around one half
    assert abs(wins - decisive / 2) <= 3.3 * math.sqrt(decisive) / 2, (wins, losses)


def test_spawns_are_mirror_images_in_creation_order():
    """The toward rule: one layout, the enemy's the agents' turned half a circle (the random rule
    draws each team's layout apart; its fairness is the mirror matches' test)."""
    for name in ("2s3z", "MMM", "1c3s5z", "bane_vs_bane"):
        env = SkirmishEnv(map_name=name, seed=0, placement="toward")
        na = env.n_agents
        ally = sorted(zip(env.kinds[:na], map(tuple, np.round(env._spawn[:na], 6)), strict=True))
        enemy = sorted(zip(env.kinds[na:], map(tuple, np.round(32.0 - env._spawn[na:], 6)), strict=True))
        assert ally == enemy
    # the first unit created stands on the spawn point; the Medivac flies above the infantry
    env = SkirmishEnv(map_name="MMM", seed=0, placement="toward")
    assert np.allclose(env._spawn[env.n_agents], (23.0, 16.0))  # first enemy Marine
    assert np.allclose(env._spawn[env.n - 1], (23.0, 16.0))  # the enemy Medivac, created last
    # no two ground units overlap at the start
    g = ~env.flying
    d = np.sqrt(((env._spawn[g][:, None] - env._spawn[g][None]) ** 2).sum(-1))
    r = env.radius[g][:, None] + env.radius[g][None]
    assert (d + 1e-9 >= r)[~np.eye(g.sum(), dtype=bool)].all()


# --- time -------------------------------------------------------------------------------------
def test_outcome_does_not_depend_on_step_mul():
    """The same match sliced into steps of 1, 3, 8 or 16 loops is the same match, loop for loop."""
    finals = []
    for step_mul in (1, 3, 8, 16):
        env = SkirmishEnv(map_name="2s3z", seed=5, builtin_agents=True, step_mul=step_mul)
        for _ in range(48 // step_mul * 10):  # 480 loops
            env.step([0] * env.n_agents)
        finals.append(np.concatenate([env.hp, env.sh, env.pos.ravel()]))
    for f in finals[1:]:
        assert np.array_equal(finals[0], f)


@pytest.mark.parametrize("step_mul", range(1, 17))
def test_step_displacement_is_speed_times_loops(step_mul):
    env = SkirmishEnv(map_name="3s_vs_3z", seed=0, step_mul=step_mul)
    top = int(np.argmax(env.pos[:3, 1]))  # the northernmost Stalker walks north, alone
    start = env.pos[top].copy()
    actions = [1, 1, 1]
    actions[top] = 2
    env.step(actions)
    expected = min(2.9531 * step_mul / 16, env.move_amount)
    assert env.pos[top, 0] == pytest.approx(start[0], abs=1e-12)
    assert env.pos[top, 1] - start[1] == pytest.approx(expected, abs=1e-9)


def test_reset_runs_two_loops():
    env = SkirmishEnv(map_name="2m_vs_1z", seed=0)  # one Zealot attack-moving, nothing in its way
    env.reset()
    moved = np.linalg.norm(env.pos[2] - env._spawn[2])
    assert moved == pytest.approx(2 * 2.25 / 16, abs=1e-9)


@pytest.mark.parametrize("offset", [0.0, 0.3, -0.3])
def test_a_unit_walks_around_a_friend_that_stands(offset):
    # SC2's local avoidance: a Marine ordered east past a standing Marine goes round it; pushing
    # through would shove the standing one (this jammed attack-moving columns, and a trained QMIX
    # policy won 5m_vs_6m 0.9 of the time by fighting the jammed enemy in detail).
    env = SkirmishEnv(map_name="3m", seed=0, attack_jitter=False)
    clear_scene(env, {0, 1})
    env.pos[0], env.pos[1] = (12.0, 16.0 + offset), (10.8, 16.0)
    for _ in range(3):
        env.step([1, 2 + Direction.EAST, 0])  # agent 0 stops, agent 1 moves east
    # pushing through shoved it 1.46 (dead ahead) or 0.33 cells and stalled behind it
    assert np.linalg.norm(env.pos[0] - (12.0, 16.0 + offset)) < 0.15
    assert env.pos[1, 0] > env.pos[0, 0] + 1.0  # the walker got past it
    assert np.linalg.norm(env.pos[1] - env.pos[0]) >= 0.75 - 1e-6  # never overlapping


# --- duels against SC2's rules worked by hand ---------------------------------------------------
def duel_env(name, a, e, pa, pe):
    env = SkirmishEnv(map_name=name, seed=0, attack_jitter=False, step_mul=1)
    clear_scene(env, {a, e})
    env.pos[a], env.pos[e] = pa, pe
    env.cooldown[:] = 0.0
    return env


def test_marine_duel_ends_in_a_mutual_kill_at_the_eighth_shot():
    env = SkirmishEnv(map_name="3m", seed=0)
    na = env.n_agents
    env = duel_env("3m", 0, na, (14.0, 16.0), (19.0, 16.0))
    shots = hand_shots_to_kill(45, 0, 0, 6, 1)
    assert shots == 8
    loop = loops_until_dead(env, 0, {"a0": 6})
    assert loop == math.ceil((shots - 1) * MARINE_CD) + 1  # first shot in the first loop
    assert not env.alive[na]  # the enemy's eighth shot lands in the same loop


def test_stalker_loses_to_a_zealot_at_the_loop_sc2_gives():
    env = duel_env("2s3z", 0, 5 + 2, (14.0, 16.0), (15.2, 16.0))  # agent Stalker, enemy Zealot
    assert env.kinds[0] == "stalker" and env.kinds[7] == "zealot"
    zealot_attacks = hand_shots_to_kill(80, 80, 1, 8, 2)
    loop = loops_until_dead(env, 0, {"a0": 6 + 2})
    assert loop == math.ceil((zealot_attacks - 1) * ZEALOT_CD) + 1
    stalker_shots = sum(1 for k in range(40) if math.ceil(k * STALKER_CD) < loop)
    hp, sh = 100.0, 50.0
    for _ in range(stalker_shots):  # what the Zealot is left with, by hand
        rest = 13.0
        absorbed = min(sh, rest)
        sh, rest = sh - absorbed, rest - absorbed
        if rest > 0:
            hp -= max(rest - 1, 0.5)
    assert env.alive[7] and env.hp[7] == pytest.approx(hp) and env.sh[7] == pytest.approx(sh)


def test_zealot_kills_a_zergling_with_its_third_attack():
    env = SkirmishEnv(map_name="corridor", seed=0)
    na = env.n_agents
    env = duel_env("corridor", 0, na, (20.0, 20.0), (20.8, 20.0))
    assert hand_shots_to_kill(35, 0, 0, 8, 2) == 3
    loop = loops_until_dead(env, na, {"a0": 6})
    assert loop == math.ceil(2 * ZEALOT_CD) + 1


def test_colossus_beam_hits_the_zerglings_across_its_line_of_fire():
    env = SkirmishEnv(map_name="2c_vs_64zg", seed=0, attack_jitter=False, step_mul=1)
    na = env.n_agents
    row = [na + k for k in range(7)]
    clear_scene(env, {0, *row})
    env.pos[0] = (16.0, 20.0)
    offsets = np.array([0.0, -0.75, 0.75, -1.5, 1.5, -2.25, 2.25])
    env.pos[row] = np.stack([16.0 + offsets, np.full(7, 26.0)], 1)
    env._flt[na:, sim.SPEED] = 0.0  # the Zerglings hold still and do not strike back
    env._flt[na:, sim.DMG] = 0.0
    env.cooldown[:] = 0.0
    env.step(hold(env, a0=6))
    env.step(hold(env, a0=6))
    hit = np.abs(offsets) <= 1.4 + 0.375
    # both lances, 10 + 5 vs Light, then two loops of Zerg regeneration
    assert np.allclose(env.hp[row][hit], 35 - 2 * 15 + 2 * 0.01709)
    assert np.allclose(env.hp[row][~hit], 35)
    for _ in range(math.ceil(1.5 * 16) - 1):
        env.step(hold(env, a0=6))
    assert not env.alive[row][hit].any() and env.alive[row][~hit].all()


def test_baneling_burst_on_a_clump_and_on_death():
    env = SkirmishEnv(map_name="bane_vs_bane", seed=0, attack_jitter=False, step_mul=1)
    na = env.n_agents
    bane = int(np.flatnonzero(env.is_baneling[:na])[0])
    lings = [na + k for k in range(6)]  # enemy Zerglings
    friend = int(np.flatnonzero(~env.is_baneling[:na])[0])
    clear_scene(env, {bane, friend, *lings})
    env.pos[bane] = (16.0, 14.0)
    env.pos[friend] = (15.0, 13.2)
    env.pos[lings] = [(16.0, 14.9), (17.0, 15.2), (15.0, 15.4), (16.0, 16.1), (18.2, 15.0), (16.0, 17.5)]
    env._flt[na:, sim.SPEED] = 0.0
    env._flt[na:, sim.DMG] = 0.0
    env.step(hold(env, **{f"a{bane}": 6}))
    d = np.linalg.norm(env.pos[lings] - (16.0, 14.0), axis=1)
    inside = d <= 2.2 + 0.375
    assert not env.alive[bane]
    assert not env.alive[lings][inside].any() and env.alive[lings][~inside].all()
    assert env.alive[friend] and env.hp[friend] == 35  # no friendly fire
    # killed, a Baneling still bursts
    env = SkirmishEnv(map_name="bane_vs_bane", seed=0, attack_jitter=False, step_mul=1)
    clear_scene(env, {bane, *lings})
    env.pos[bane] = (16.0, 14.0)
    env.pos[lings] = [(16.0, 15.5), (14.5, 14.0), (16.0, 18.0), (20.0, 14.0), (12.0, 14.0), (16.0, 10.0)]
    env._flt[na:, sim.SPEED] = 0.0
    env._flt[na:, sim.DMG] = 0.0
    env.hp[bane] = 0.0  # killed before the loop resolves
    env.step(hold(env))
    assert not env.alive[lings[0]] and not env.alive[lings[1]] and env.alive[lings[2:]].all()


def zerglings_striking(env, target, lings, loops):
    """Per loop, how many of `lings` stand within striking reach of `target` (which stands)."""
    reach = UNIT_RANGE_ZERGLING + 0.375 + env.radius[target]
    counts = []
    for _ in range(loops):
        env.step(hold(env))
        d = np.hypot(*(env.pos[lings] - env.pos[target]).T)
        counts.append(int(((d <= reach + 1e-6) & env.alive[lings]).sum()))
    return np.array(counts)


UNIT_RANGE_ZERGLING = 0.1


def test_zerglings_surround_a_standing_zealot():
    """SC2's melee units flow round the friends already striking a target to the free places
    beside it: some 6 to 8 Zerglings surround a unit of the Zealot's size. Twelve Zerglings run
    at a standing Zealot that cannot die, in the open: after they arrive, at least 6 strike on
    average and the ring fills to 7 or 8 (it holds 8: its circumference over a Zergling's
    width); lined up behind the first few, they would strike 3 or 4 at a time."""
    env = SkirmishEnv(map_name="corridor", seed=0, attack_jitter=False, step_mul=1)
    na = env.n_agents
    lings = [na + k for k in range(12)]
    clear_scene(env, {0, *lings})
    env.pos[0] = (21.0, 20.0)
    for k, z in enumerate(lings):
        env.pos[z] = (24.0 + 0.8 * (k % 4), 23.0 + 0.8 * (k // 4))
    env.cooldown[:] = 0.0
    env.hp[0] = 1e6
    counts = zerglings_striking(env, 0, lings, 160)
    first = int(np.flatnonzero(counts)[0])
    settled = counts[first + 32 :]  # two seconds after the first strike
    ring = 2 * math.pi * (0.5 + 0.375 + UNIT_RANGE_ZERGLING) / (2 * 0.375)
    assert counts.max() <= int(ring)
    assert settled.mean() >= 6.0 and settled.max() >= 7, (settled.mean(), settled.max())
    # where the way in is free, a Zergling goes straight at its target, as before
    env = SkirmishEnv(map_name="corridor", seed=0, attack_jitter=False, step_mul=1)
    clear_scene(env, {0, na})
    env.pos[0], env.pos[na] = (21.0, 20.0), (25.0, 20.0)
    start = env.pos[na].copy()
    env.step(hold(env))
    moved = env.pos[na] - start
    assert moved[0] < 0 and abs(moved[1]) < 1e-9


def test_shields_absorb_a_hit_without_armour():
    env = duel_env("2s3z", 2, 5, (14.0, 16.0), (15.1, 16.0))  # agent Zealot, enemy Stalker
    assert env.kinds[2] == "zealot" and env.kinds[5] == "stalker"
    env.sh[5] = 10.0
    env._flt[5, sim.DMG] = 0.0
    env.step(hold(env, a2=6))
    assert env.hp[5] == 75.0 and env.sh[5] == 0.0  # 8 to shields, then 2 + (6 - 1) to health


# --- built-in behaviour -----------------------------------------------------------------------
def test_enemy_retaliates_against_an_attacker_beyond_its_acquisition_radius():
    env = SkirmishEnv(map_name="6h_vs_8z", seed=0, attack_jitter=False)
    na = env.n_agents
    zealot = na
    clear_scene(env, {0, zealot})
    env.pos[zealot] = env._goals[1]  # idle at its attack-move point
    env.pos[0] = env._goals[1] + (0.0, 5.95)  # Hydralisk reach 6.125 > Zealot acquisition 5.625
    env.step(hold(env, a0=6))
    assert env.hp[zealot] + env.sh[zealot] < 150  # shot
    assert env.target[zealot] == 0
    assert np.linalg.norm(env.pos[zealot] - env.pos[0]) < 5.95  # and coming for the attacker


def test_enemy_medivac_heals_its_wounded():
    env = SkirmishEnv(map_name="MMM", seed=0, attack_jitter=False)
    na = env.n_agents
    medivac = na + int(np.flatnonzero(env.is_medivac[na:])[0])
    marine = na
    env.hp[marine] = 20.0
    energy = env.energy[medivac]
    env.step([1] * na)  # the agents hold; the armies are still far apart
    assert env.hp[marine] == pytest.approx(20.0 + 8 * 0.5625)
    assert env.energy[medivac] == pytest.approx(energy - 8 * 0.5625 / 3 + 8 * 0.03516)


def test_2m_vs_1z_attack_point_is_drawn_each_episode():
    env = SkirmishEnv(map_name="2m_vs_1z", seed=0)
    goals = []
    for _ in range(5):
        env.reset()
        goals.append(env._goals[1].copy())
    goals = np.array(goals)
    assert np.all(goals[:, 1] == 12.0) and np.all((goals[:, 0] >= 13.0) & (goals[:, 0] <= 19.0))
    assert len(np.unique(goals[:, 0])) == 5


# --- terrain ----------------------------------------------------------------------------------
def reachable(grid, start):
    """Cells an agent reaches with SMAC's N/S/E/W moves (a move needs the next cell pathable)."""
    seen, queue = {start}, deque([start])
    while queue:
        x, y = queue.popleft()
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            n = (x + dx, y + dy)
            if 0 <= n[0] < 32 and 0 <= n[1] < 32 and grid[n] and n not in seen:
                seen.add(n)
                queue.append(n)
    return seen


@pytest.mark.parametrize(
    "name",
    ["3m", "3s_vs_5z", "bane_vs_bane", "2c_vs_64zg", "corridor", "so_many_baneling", "2s_vs_1sc", "6h_vs_8z"],
)
def test_every_pathable_cell_is_reachable(name):
    env = SkirmishEnv(map_name=name, seed=0)
    cells = reachable(env.grid, tuple(env.pos[0].astype(int)))
    if name in ("2s_vs_1sc", "6h_vs_8z"):
        # the low ground outside the plateau's wall is pathable in the map files but walled off
        outside = np.zeros_like(env.grid)
        outside[[c[0] for c in cells], [c[1] for c in cells]] = True
        assert outside.sum() in (168, 152) and not any(
            (x + dx, y + dy) in cells
            for x, y in zip(*np.nonzero(env.grid & ~outside), strict=True)
            for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))
        )
    else:
        assert len(cells) == env.grid.sum()


def test_a_zealot_walks_through_corridors_choke_with_legal_moves():
    env = SkirmishEnv(map_name="corridor", seed=0)
    na = env.n_agents
    env._flt[na:, sim.SPEED] = 0.0  # the Zerglings stay in their corner
    env._flt[na:, sim.DMG] = 0.0
    goal = (5, 5)
    dist = {goal: 0}
    queue = deque([goal])
    while queue:
        c = queue.popleft()
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            n = (c[0] + dx, c[1] + dy)
            if 0 <= n[0] < 32 and 0 <= n[1] < 32 and env.grid[n] and n not in dist:
                dist[n] = dist[c] + 1
                queue.append(n)
    probe = {2: (0, 1), 3: (0, -1), 4: (1, 0), 5: (-1, 0)}
    for _ in range(120):
        avail = env.get_avail_agent_actions(0)
        x, y = env.pos[0]
        moves = [a for a in probe if avail[a]]
        best = min(moves, key=lambda a: dist.get((int(x + probe[a][0]), int(y + probe[a][1])), 1e9))
        env.step([best] + [1] * (na - 1))
        if np.linalg.norm(env.pos[0] - (5.5, 5.5)) < 1.0:
            break
    assert np.linalg.norm(env.pos[0] - (5.5, 5.5)) < 1.0


def test_zerglings_path_through_corridors_choke():
    env = SkirmishEnv(map_name="corridor", seed=0)
    na = env.n_agents
    env.pos[:na] = [(3.0 + k, 3.0) for k in range(na)]  # the agents wait in the south-west pocket
    for _ in range(80):
        env.step([1] * na)
        lings = env.pos[na:][env.alive[na:]]
        if ((lings[:, 0] < 11) & (lings[:, 1] < 11)).any():
            break
    assert ((lings[:, 0] < 11) & (lings[:, 1] < 11)).any()


# --- SMAC's API -------------------------------------------------------------------------------
def test_seed_reseeds():
    env = SkirmishEnv(map_name="3m", seed=7)
    assert env.seed() == 7
    env.seed(11)
    assert env.seed() == 11
    env.reset()
    fresh = SkirmishEnv(map_name="3m", seed=11)  # its constructor resets once too
    a = [env.rng.integers(0, 1 << 30) for _ in range(3)]
    b = [fresh.rng.integers(0, 1 << 30) for _ in range(3)]
    assert a == b


def test_smac_api():
    env = SkirmishEnv(map_name="MMM", seed=0)
    na, ne = env.n_agents, env.n_enemies
    assert env.reward == 0
    assert isinstance(env.ally_state_attr_names, list) and env.get_ally_num_attributes() == 7
    assert isinstance(env.enemy_state_attr_names, list) and env.get_enemy_num_attributes() == 6
    assert env.get_env_info()["agent_features"] == env.ally_state_attr_names
    # ally type ids are consecutive, so subtracting the smallest gives SMAC's type index
    types = [env.get_unit_by_id(i).unit_type - env._min_unit_type for i in range(na)]
    assert sorted(set(types)) == [0, 1, 2]
    assert env.get_unit_by_id(na - 1).unit_type == env.medivac_id
    assert env.get_unit_types()[na:] == [48] * 7 + [51] * 2 + [54]
    assert len(env.agents) == na and len(env.enemies) == ne and env.enemies[ne - 1].unit_type == 54
    assert all(u.health == 45 for i, u in env.agents.items() if env.kinds[i] == "marine")
    sd = env.get_state_dict()
    assert (
        sd["allies"].shape == (na, 7)
        and sd["enemies"].shape == (ne, 6)
        and sd["last_action"].shape == (na, 16)
    )
    assert np.allclose(
        np.concatenate([sd["allies"].ravel(), sd["enemies"].ravel(), sd["last_action"].ravel()]),
        env.get_state(),
    )
    vis = env.get_visibility_matrix()
    assert vis.shape == (na, na + ne) and vis.dtype == bool and (vis[:, :na] == vis[:, :na].T).all()
    assert not vis[:, na:].any()  # the armies start out of sight of each other
    assert env.unit_max_shield(env.get_unit_by_id(0)) is None
    assert env.unit_max_cooldown(env.get_unit_by_id(na - 1)) == 200
    unit = env.get_unit_by_id(0)
    for d in Direction:
        assert env.can_move(unit, d) == bool(env.get_avail_agent_actions(0)[2 + int(d)])
    assert len(env.get_surrounding_points(unit, include_self=True)) == 9
    assert len(env.get_surrounding_pathing(unit)) == 8
    assert env.distance(0, 0, 3, 4) == 5 and env.check_bounds(31, 0) and not env.check_bounds(32, 0)
    assert env.only_medivac_left(ally=False) is False
    env.hp[na : na + ne - 1] = 0.0
    env.alive[na : na + ne - 1] = False
    assert env.only_medivac_left(ally=False) is True
    env.full_restart()
    assert env.force_restarts == 1 and env.alive.all()


def test_heuristic_ai_plays_smacs_heuristic():
    env = SkirmishEnv(map_name="3m", seed=0, heuristic_ai=True)
    actions = [0, 0, 0]
    env.step(actions)
    # each agent attacks the nearest enemy, written back into the list as SMAC does
    na = env.n_agents
    for a in range(na):
        d = np.linalg.norm(env._spawn[na:] - env._spawn[a], axis=1)
        assert actions[a] == 6 + int(np.argmin(d))
    rest = SkirmishEnv(map_name="3m", seed=0, heuristic_ai=True, heuristic_rest=True)
    acts = [0, 0, 0]
    rest.step(acts)
    assert acts == [4, 4, 4]  # out of range: one step east toward the target instead
    wins = 0
    for _ in range(10):
        env.reset()
        done = False
        while not done:
            _, done, info = env.step([0] * na)
        wins += info["battle_won"]
    assert env.battles_game == 10 and wins == env.battles_won


def test_placement_is_drawn_anew_each_reset_by_default_and_toward_keeps_one_layout():
    from envs.skirmish.maps import UNITS
    from utils.errors import ConfigError

    fixed = SkirmishEnv(map_name="2s3z", seed=5, placement="toward")
    fixed.reset()
    fixed.reset()
    assert np.allclose(fixed._spawn, SkirmishEnv(map_name="2s3z", seed=9, placement="toward")._spawn)
    assert SkirmishEnv(map_name="2s3z").placement == "random"  # the default
    env, twin = SkirmishEnv(map_name="2s3z", seed=5, placement="random"), None
    layouts = [env._spawn.copy()]
    for _ in range(3):
        env.reset()
        layouts.append(env._spawn.copy())
    assert all(not np.allclose(a, b) for a, b in zip(layouts, layouts[1:], strict=False))
    twin = SkirmishEnv(map_name="2s3z", seed=5, placement="random")
    for _ in range(3):
        twin.reset()
    assert np.allclose(twin._spawn, layouts[-1])  # the same seed, the same layouts
    na = env.n_agents
    for pos in layouts:
        # every unit on its group's point or packed round it, none overlapping another
        r = np.array([UNITS[k]["radius"] for k in env.kinds])
        d = np.hypot(*(pos[:, None, :] - pos[None, :, :]).transpose(2, 0, 1)) + np.eye(len(pos)) * 99
        assert (d >= (r[:, None] + r[None, :]) - 1e-6).all()
        assert (
            np.hypot(*(pos[:na].mean(0) - (9.0, 16.0))) < 2
            and np.hypot(*(pos[na:].mean(0) - (23.0, 16.0))) < 2
        )
        # agents as SMAC orders them: by type, then x, then y
        types = env.ally_type
        assert list(np.lexsort((pos[:na, 1], pos[:na, 0], types))) == list(range(na))
    with pytest.raises(ConfigError, match="placement.*random"):
        SkirmishEnv(map_name="2s3z", placement="spiral")
