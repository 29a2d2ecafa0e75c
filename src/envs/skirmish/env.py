"""Skirmish: StarCraft II unit combat in NumPy and numba with SMAC's interface.

Exact (SMAC's rules): constructor arguments, action indices and availability, observation and
state layouts and normalisation, reward arithmetic and scaling, termination, stats, per-map sizes,
SMAC's own heuristic agents (heuristic_ai). Modelled on SC2 (4.10-era unit data, Normal speed):
every game loop resolved (sim.py), units created in the map's order and packed around their spawn
points (spawn.py; each team's packing drawn at every reset with placement=random, the default),
melee units surrounding their target, enemies that attack-move, acquire, chase and retaliate,
enemy Medivacs that heal, Baneling bursts on contact and on death, Colossus beams, per-hit shields
and armour, random cooldown variation (attack_jitter), paths around walls (terrain.py).
Approximate: collisions are pairwise pushes with local avoidance (moving units steer round
standing friends), not SC2's; acquisition radii and the jitter's range are calibrated guesses.
"""

import math

import numpy as np

from envs.multiagentenv import MultiAgentEnv, smac_step_fields
from envs.skirmish import sim, spawn, terrain
from envs.skirmish.api import SmacHelpers
from envs.skirmish.args import (
    SIM_CHOICES,
    SMAC_DEFAULTS,
    WRAPPER_KEYS,
    validate_env_args,
)
from envs.skirmish.battle import Battle
from envs.skirmish.encoding import SmacEncoding
from envs.skirmish.maps import GROUP_SPAWNS, LOOPS, MAPS, TYPE_ORDER, UNITS, type_index

RESET_LOOPS = 2  # SMAC observes two game loops after restarting a battle
ALLY_TYPE_BASE = 1970  # SMAC's allied "_RL" units have their own consecutive type ids
MEDIVAC_RL_SPEED = 2.75  # the MMM maps' allied Medivac copy
HYDRALISK_RL_HP = 80.0  # 6h_vs_8z's allied Hydralisks


def _creation(m, name, team):
    """[(kind, spawn point)] in the order the map's trigger creates the team's units."""
    kinds = [u for u, c in (m["agents"] if team == 0 else m["enemies"]) for _ in range(c)]
    groups = GROUP_SPAWNS.get(name, {})
    key = "agents" if team == 0 else "enemies"
    if team == 0 and "agents_each" in groups:
        return list(zip(kinds, groups["agents_each"], strict=True))
    if key in groups:  # one point per unit type, in the order the types are listed
        points = dict(
            zip([u for u, _ in (m["agents"] if team == 0 else m["enemies"])], groups[key], strict=True)
        )
        return [(k, points[k]) for k in kinds]
    return [(k, m["agent_at"] if team == 0 else m["enemy_at"]) for k in kinds]


class SkirmishEnv(SmacEncoding, Battle, SmacHelpers, MultiAgentEnv):
    """SMAC's maps on the simulator, with SMAC's interface."""

    DEFAULTS = SMAC_DEFAULTS
    step_fields = ("visible", "pos")

    def get_step_fields(self, names):
        return smac_step_fields(self, names)

    def _arguments(self, kwargs):
        args = {k: v for k, v in kwargs.items() if k not in WRAPPER_KEYS}
        validate_env_args({**args, "common_reward": kwargs.get("common_reward", True)})
        return args

    def _set_up_battle(self, args):
        """The map's terrain and units, created in its trigger's order, and the enemies' order."""
        m = MAPS[self.map_name]
        self.map = m
        self.map_type = m["map_type"]
        self.episode_limit = m["limit"]
        self.grid = terrain.grid(m["layout"])
        self.pathing_grid = self.grid
        # SMAC flips the height image StarCraft II 4.10 sends (rows y, unflipped, as the pathing
        # grid it does not flip), so its terrain_height[x, y] is the world's at (x, 31 - y)
        self.world_height = terrain.height(m["layout"], self.map_name)
        self.terrain_height = self.world_height[:, ::-1]
        self._fields = terrain.fields(m["layout"])
        ally_created, enemy_created = _creation(m, self.map_name, 0), _creation(m, self.map_name, 1)
        # agents in SMAC's order: by type index, then (after spawning) x, y
        ally_kinds = sorted((k for k, _ in ally_created), key=lambda u: type_index(self.map_type, u, False))
        enemy_kinds = [k for k, _ in enemy_created]
        self._set_teams(len(ally_kinds), len(enemy_kinds))
        self.n_actions_no_attack = 6
        self.n_actions = 6 + self.n_enemies
        self.unit_type_bits = len(TYPE_ORDER[self.map_type])
        self.shield_bits_ally = int(UNITS[ally_kinds[0]]["sh"] > 0)
        self.shield_bits_enemy = int(UNITS[enemy_kinds[0]]["sh"] > 0)
        self.is_mmm = self.map_type == "MMM"
        self.kinds = ally_kinds + enemy_kinds
        na = self.n_agents
        col = lambda key: np.array([UNITS[k][key] for k in self.kinds], dtype=np.float64)  # noqa: E731
        self.hp_max, self.sh_max, self.armour = col("hp"), col("sh"), col("armour")
        speed = col("speed")
        if self.map_name == "6h_vs_8z":
            self.hp_max[:na] = HYDRALISK_RL_HP
        self.is_medivac = np.array([k == "medivac" for k in self.kinds])
        self.is_colossus = np.array([k == "colossus" for k in self.kinds])
        self.is_baneling = np.array([k == "baneling" for k in self.kinds])
        speed[:na][self.is_medivac[:na]] = MEDIVAC_RL_SPEED
        self.radius, self.speed = col("radius"), speed / LOOPS
        self.flying = col("flying") > 0
        self.max_cd = col("max_cd")
        self.ally_type = np.array([type_index(self.map_type, k, False) for k in ally_kinds])
        self.enemy_type = np.array([type_index(self.map_type, k, True) for k in enemy_kinds])
        # SMAC's unit type ids: consecutive "_RL" ids for agents, SC2's own for enemies
        self.unit_types = np.array(
            [ALLY_TYPE_BASE + t for t in self.ally_type] + [UNITS[k]["sc2"] for k in enemy_kinds],
            dtype=np.int64,
        )
        self._init_type_ids()
        self._flt, self._ints = self._unit_tables(col)
        self.placement = args.get("placement", SIM_CHOICES["placement"][0])
        self._created = (ally_created, enemy_created)
        self._spawn = self._spawn_positions(ally_created, enemy_created)
        kind, point = m["order"]
        # per team: what scripted units do without a target, and where they head
        self._modes = np.array([sim.ATTACK_MOVE, sim.ENEMY_MODES[kind]], dtype=np.int64)
        self._goal_segment = point if point is not None and np.ndim(point) == 2 else None
        self._goals = np.full((2, 2), 16.0)
        if point is not None and self._goal_segment is None:
            self._goals[1] = point
            self._goals[0] = 32.0 - np.asarray(point)  # built-in agents mirror the enemies' order
        self.max_reward = (
            self.n_enemies * self.reward_death_value
            + self.reward_win
            + float((self.hp_max + self.sh_max)[na:].sum())
        )
        self.rng = np.random.default_rng(self._seed)
        self._preroll, self._clock_start = RESET_LOOPS, (0, 0)  # no HUNT ticks on the v1 maps

    def _init_type_ids(self):
        """SMAC's per-type id attributes (marine_id, medivac_id, ...): 0 where the map has none."""
        for kind in (
            "marine",
            "marauder",
            "medivac",
            "stalker",
            "zealot",
            "colossus",
            "hydralisk",
            "zergling",
            "baneling",
        ):
            ids = [
                t
                for k, t in zip(self.kinds[: self.n_agents], self.unit_types[: self.n_agents], strict=True)
                if k == kind
            ]
            setattr(self, f"{kind}_id", ids[0] if ids else 0)
        self._min_unit_type = int(self.unit_types[: self.n_agents].min())

    def _spawn_positions(self, ally_created, enemy_created, search=None):
        """Start positions: both teams created in the map's order, packed around their points
        facing each other; agents then sorted as SMAC sorts them. search: per team, the direction
        (radians) each unit's search for a free spot starts from (default: toward the other team,
        the same every episode)."""
        centre = [np.mean([p for _, p in created], axis=0) for created in (ally_created, enemy_created)]
        units = []
        self._facing = np.zeros((2, 2))
        for team, created in enumerate((ally_created, enemy_created)):
            dx, dy = centre[1 - team] - centre[team]
            facing = math.atan2(dy, dx)
            self._facing[team] = math.cos(facing), math.sin(facing)
            start = facing if search is None else search[team]
            cls = lambda k: 2 if UNITS[k]["flying"] else (1 if k == "colossus" else 0)  # noqa: E731
            units += [(UNITS[k]["radius"], cls(k), bool(UNITS[k]["flying"]), p, start) for k, p in created]
        pos = spawn.pack(units, self.grid)
        na = self.n_agents
        ally = pos[:na]
        created_types = np.array([type_index(self.map_type, k, False) for k, _ in ally_created])
        order = np.lexsort((ally[:, 1], ally[:, 0], created_types))
        return np.concatenate([ally[order], pos[na:]])

    # --- episode ----------------------------------------------------------------------------
    def _new_battle(self):
        """Per-episode set-up before the units appear: 2m_vs_1z's attack point, and the start
        positions with placement=random."""
        if self._goal_segment is not None:  # 2m_vs_1z: a point drawn on the segment each episode
            a, b = np.asarray(self._goal_segment, dtype=np.float64)
            self._goals[1] = a + (b - a) * self.rng.random()
        if self.placement == "random":  # a new layout at every reset
            self._spawn = self._spawn_positions(*self._created, search=self.rng.uniform(0.0, 2 * math.pi, 2))

    def only_medivac_left(self, ally):
        """SMAC's MMM rule: a side whose only living units are Medivacs has lost (for the enemy
        side: exactly one unit, the Medivac, is left)."""
        if not self.is_mmm:
            return False
        sel = slice(0, self.n_agents) if ally else slice(self.n_agents, self.n)
        alive, med = self.alive[sel], self.is_medivac[sel]
        if ally:
            return not (alive & ~med).any()
        return int(alive.sum()) == 1 and bool((alive & med).any())
