"""SMAC's API beyond the MultiAgentEnv contract, for code written against StarCraft2Env: unit
views (`agents`, `enemies`, get_unit_by_id), movement directions and SMAC's helper methods."""

import enum
import math

import numpy as np

SIGHT, SHOOT = 9.0, 6.0  # SMAC's sight and shooting ranges for every unit


class Direction(enum.IntEnum):
    NORTH = 0
    SOUTH = 1
    EAST = 2
    WEST = 3


class _Pos:
    def __init__(self, x, y):
        self.x, self.y = x, y


class UnitView:
    """SMAC's unit fields for one unit of the simulator (agents first, then enemies)."""

    def __init__(self, env, i):
        self.health, self.health_max = float(env.hp[i]), float(env.hp_max[i])
        self.shield, self.shield_max = float(env.sh[i]), float(env.sh_max[i])
        self.energy, self.weapon_cooldown = float(env.energy[i]), float(max(env.cooldown[i], 0.0))
        seen = env.seen_pos[i]  # float32, as SC2 sends it; a dead unit where it was last observed
        self.pos = _Pos(float(seen[0]), float(seen[1]))
        self.unit_type = int(env.unit_types[i])
        self.tag, self.owner = i, 1 + int(env.team[i])


class _Units:
    """SMAC's `agents` / `enemies` dicts (index -> unit), built on access from the live arrays."""

    def __init__(self, env, first, count):
        self.env, self.first, self.count = env, first, count

    def __getitem__(self, i):
        if not 0 <= i < self.count:
            raise KeyError(i)
        return UnitView(self.env, self.first + i)

    def __len__(self):
        return self.count

    def __iter__(self):
        return iter(range(self.count))

    def __contains__(self, i):
        return isinstance(i, int) and 0 <= i < self.count

    def keys(self):
        return range(self.count)

    def values(self):
        return [self[i] for i in range(self.count)]

    def items(self):
        return [(i, self[i]) for i in range(self.count)]


class SmacHelpers:
    """SMAC's helper methods, on the simulator's arrays (mixed into SkirmishEnv)."""

    def get_obs_move_feats_size(self):
        return self.move_feats

    def get_obs_enemy_feats_size(self):
        return self.n_enemies, self.nf_en

    def get_obs_ally_feats_size(self):
        return self.n_agents - 1, self.nf_al

    def get_obs_own_feats_size(self):
        return self.own_feats

    def get_ally_num_attributes(self):
        return len(self.ally_state_attr_names)

    def get_enemy_num_attributes(self):
        return len(self.enemy_state_attr_names)

    def get_state_dict(self):
        """The state as SMAC's dict: allies [n_agents, nf], enemies [n_enemies, nf], and
        last_action / timestep when the state includes them."""
        allies, enemies = self._unit_state()
        state = {"allies": allies.astype(np.float64), "enemies": enemies.astype(np.float64)}
        if self.state_last_action:
            state["last_action"] = self.last_action
        if self.state_timestep_number:
            state["timestep"] = self._episode_steps / self.episode_limit
        return state

    def get_visibility_matrix(self):
        """[n_agents, n_agents + n_enemies] bool: which units each living agent sees (alive and
        closer than the sight range); the ally block is symmetric, the diagonal False."""
        na, pos = self.n_agents, self.seen_pos
        d = np.sqrt(((pos[None, :, :] - pos[:na, None, :]) ** 2).sum(-1))
        vis = (d < SIGHT) & self.alive[None, :] & self.alive[:na, None]
        vis[np.arange(na), np.arange(na)] = False
        return vis

    def get_unit_by_id(self, a_id):
        """Agent a_id with SMAC's field names (health, shield, pos.x, unit_type, ...)."""
        return self.agents[a_id]

    def get_unit_types(self):
        """Unit type ids, agents first (SMAC's allied ids), then enemies (SC2's ids)."""
        return self.unit_types.tolist()

    def unit_shoot_range(self, agent_id):
        return 6

    def unit_sight_range(self, agent_id):
        return 9

    def unit_max_cooldown(self, unit):
        switcher = {
            self.marine_id: 15,
            self.marauder_id: 25,
            self.medivac_id: 200,
            self.stalker_id: 35,
            self.zealot_id: 22,
            self.colossus_id: 24,
            self.hydralisk_id: 10,
            self.zergling_id: 11,
            self.baneling_id: 1,
        }
        return switcher.get(unit.unit_type, 15)

    def unit_max_shield(self, unit):
        if unit.unit_type in (74, self.stalker_id):
            return 80
        if unit.unit_type in (73, self.zealot_id):
            return 50
        if unit.unit_type in (4, self.colossus_id):
            return 150
        return None

    @staticmethod
    def distance(x1, y1, x2, y2):
        return math.hypot(x2 - x1, y2 - y1)

    def check_bounds(self, x, y):
        return 0 <= x < self.map_x and 0 <= y < self.map_y

    def can_move(self, unit, direction):
        """Whether a move in direction (Direction or 0-3: N, S, E, W) is available to unit."""
        m = self._move_amount / 2
        dx, dy = {Direction.NORTH: (0, m), Direction.SOUTH: (0, -m), Direction.EAST: (m, 0)}.get(
            direction, (-m, 0)
        )
        x, y = int(unit.pos.x + dx), int(unit.pos.y + dy)
        return bool(self.check_bounds(x, y) and self.pathing_grid[x, y])

    def get_surrounding_points(self, unit, include_self=False):
        x, y, ma = int(unit.pos.x), int(unit.pos.y), self._move_amount
        points = [
            (x, y + 2 * ma),
            (x, y - 2 * ma),
            (x + 2 * ma, y),
            (x - 2 * ma, y),
            (x + ma, y + ma),
            (x - ma, y - ma),
            (x + ma, y - ma),
            (x - ma, y + ma),
        ]
        return points + [(x, y)] if include_self else points

    def get_surrounding_height(self, unit):
        return [
            self.terrain_height[x, y] if self.check_bounds(x, y) else 1
            for x, y in self.get_surrounding_points(unit, include_self=True)
        ]

    def get_surrounding_pathing(self, unit):
        return [
            self.pathing_grid[x, y] if self.check_bounds(x, y) else 1
            for x, y in self.get_surrounding_points(unit)
        ]
