"""Skirmish: StarCraft II unit combat in NumPy and numba with SMAC's interface.

Exact (SMAC's rules): constructor arguments, action indices and availability, observation and
state layouts and normalisation, reward arithmetic and scaling, termination, stats, per-map sizes,
SMAC's own heuristic agents (heuristic_ai). Modelled on SC2 (4.10-era unit data, Normal speed):
every game loop resolved (sim.py), units created in the map's order and packed around their spawn
points (spawn.py), enemies that attack-move, acquire, chase and retaliate, enemy Medivacs that
heal, Baneling bursts on contact and on death, Colossus beams, per-hit shields and armour, random
cooldown variation (attack_jitter), paths around walls (terrain.py). Approximate: collisions are
pairwise pushes with local avoidance (moving units steer round standing friends), not SC2's;
acquisition radii and the jitter's range are calibrated guesses.
"""

import math

import numpy as np

from envs.multiagentenv import MultiAgentEnv, smac_entities
from envs.skirmish import render, sim, spawn, terrain
from envs.skirmish.api import SHOOT, SIGHT, SmacHelpers, _Units
from envs.skirmish.args import (  # noqa: F401  (validate_env_args: the env registry's entry point)
    SIM_DEFAULTS,
    SMAC_DEFAULTS,
    WRAPPER_KEYS,
    validate_env_args,
)
from envs.skirmish.maps import GROUP_SPAWNS, LOOPS, MAPS, TYPE_ORDER, UNITS, type_index

RESET_LOOPS = 2  # SMAC observes two game loops after restarting a battle
ALLY_TYPE_BASE = 1970  # SMAC's allied "_RL" units have their own consecutive type ids
MEDIVAC_RL_SPEED = 2.75  # the MMM maps' allied Medivac copy
HYDRALISK_RL_HP = 80.0  # 6h_vs_8z's allied Hydralisks
JITTER_LOOPS = (-1, 2)  # SC2 varies each cooldown by a whole number of loops in this range


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


class SkirmishEnv(SmacHelpers, MultiAgentEnv):
    _clip_reward = False  # reward_only_positive as SMAC v1: |reward|

    def __init__(self, **kwargs):
        args = {k: v for k, v in kwargs.items() if k not in WRAPPER_KEYS}
        validate_env_args({**args, "common_reward": kwargs.get("common_reward", True)})
        for k, v in SMAC_DEFAULTS.items():
            setattr(self, "_seed" if k == "seed" else k, args.get(k, v))
        self.attack_jitter = bool(args.get("attack_jitter", SIM_DEFAULTS["attack_jitter"]))
        self.builtin_agents = bool(args.get("builtin_agents", SIM_DEFAULTS["builtin_agents"]))
        self.obs_starcraft = bool(args.get("obs_starcraft", SIM_DEFAULTS["obs_starcraft"]))
        self._move_amount = self.move_amount
        if self.obs_all_health:
            self.obs_own_health = True
        m = MAPS[self.map_name]
        self.map = m
        self.map_type = m["map_type"]
        self.episode_limit = m["limit"]
        self.grid = terrain.grid(m["layout"])
        self.pathing_grid = self.grid
        self.terrain_height = terrain.height(m["layout"])
        self._fields = terrain.fields(m["layout"])
        self.map_x = self.map_y = 32
        self.max_distance_x = self.max_distance_y = 32
        ally_created, enemy_created = _creation(m, self.map_name, 0), _creation(m, self.map_name, 1)
        # agents in SMAC's order: by type index, then (after spawning) x, y
        ally_kinds = sorted((k for k, _ in ally_created), key=lambda u: type_index(self.map_type, u, False))
        enemy_kinds = [k for k, _ in enemy_created]
        self.n_agents, self.n_enemies = len(ally_kinds), len(enemy_kinds)
        self.n_actions_no_attack, self.n_actions_move = 6, 4
        self.n_obs_pathing, self.n_obs_height = 8, 9
        self.n_actions = 6 + self.n_enemies
        self.unit_type_bits = len(TYPE_ORDER[self.map_type])
        self.shield_bits_ally = int(UNITS[ally_kinds[0]]["sh"] > 0)
        self.shield_bits_enemy = int(UNITS[enemy_kinds[0]]["sh"] > 0)
        self.is_mmm = self.map_type == "MMM"
        self.kinds = ally_kinds + enemy_kinds
        self.n = len(self.kinds)
        na = self.n_agents
        self.team = np.array([0] * na + [1] * self.n_enemies)
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
        self.battles_won = self.battles_game = self.timeouts = self.force_restarts = 0
        self._episode_count = self._total_steps = self._episode_steps = 0
        self.reward = 0
        self.last_action = np.zeros((na, self.n_actions), dtype=np.float32)
        self.ally_state_attr_names = (
            ["health", "energy/cooldown", "rel_x", "rel_y"]
            + ["shield"] * self.shield_bits_ally
            + [f"type_{i}" for i in range(self.unit_type_bits)]
        )
        self.enemy_state_attr_names = (
            ["health", "rel_x", "rel_y"]
            + ["shield"] * self.shield_bits_enemy
            + [f"type_{i}" for i in range(self.unit_type_bits)]
        )
        self.nf_en = 4 + self.unit_type_bits + (1 + self.shield_bits_enemy if self.obs_all_health else 0)
        self.nf_al = (
            4
            + self.unit_type_bits
            + (1 + self.shield_bits_ally if self.obs_all_health else 0)
            + (self.n_actions if self.obs_last_action else 0)
        )
        self.own_feats = (
            self.unit_type_bits
            + (1 + self.shield_bits_ally) * self.obs_own_health
            + int(self.obs_timestep_number)
        )
        self.move_feats = 4 + 8 * self.obs_pathing_grid + 9 * self.obs_terrain_height
        self.obs_size = self.move_feats + self.n_enemies * self.nf_en + (na - 1) * self.nf_al + self.own_feats
        self.nf_al_s = 4 + self.shield_bits_ally + self.unit_type_bits
        self.nf_en_s = 3 + self.shield_bits_enemy + self.unit_type_bits
        self._onehots = {}
        self._trace, self._last_trace = [], []  # positions per step of this / the last episode
        self._probe_dirs = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]], dtype=np.float64)[None]
        self._others = np.array(
            [[j for j in range(na) if j != i] for i in range(na)], dtype=np.int64
        ).reshape(na, na - 1)
        self.agents, self.enemies = _Units(self, 0, na), _Units(self, na, self.n_enemies)
        self.reset()

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

    def _unit_tables(self, col):
        flt = np.zeros((self.n, sim.N_FLOAT))
        flt[:, sim.RADIUS], flt[:, sim.SPEED] = self.radius, self.speed
        flt[:, sim.DMG], flt[:, sim.HITS], flt[:, sim.BONUS] = col("dmg"), col("hits"), col("bonus")
        flt[:, sim.ARMOUR], flt[:, sim.RANGE] = self.armour, col("range")
        flt[:, sim.COOLDOWN] = col("cd") * LOOPS
        # enemies acquire agents within max(weapon range + own radius, 5) + the agent's radius
        flt[:, sim.ACQUIRE] = np.maximum(col("range") + self.radius, 5.0)
        flt[:, sim.HP_MAX], flt[:, sim.SH_MAX] = self.hp_max, self.sh_max
        ints = np.zeros((self.n, sim.N_INT), dtype=np.int64)
        ints[:, sim.TEAM] = self.team
        vs = {None: sim.VS_NONE, "light": sim.VS_LIGHT, "armored": sim.VS_ARMORED}
        ints[:, sim.BONUS_VS] = [vs[UNITS[k]["bonus_vs"]] for k in self.kinds]
        ints[:, sim.LIGHT], ints[:, sim.ARMORED], ints[:, sim.BIO] = col("light"), col("armored"), col("bio")
        ints[:, sim.HITS_GROUND], ints[:, sim.HITS_AIR] = col("ground"), col("air")
        ints[:, sim.FLYING], ints[:, sim.REGEN] = col("flying"), col("regen")
        ints[:, sim.KIND] = np.select(
            [self.is_medivac, self.is_colossus, self.is_baneling],
            [sim.K_MEDIVAC, sim.K_COLOSSUS, sim.K_BANELING],
            sim.K_PLAIN,
        )
        # collision classes: ground units, Colossi (they stride over them), air
        ints[:, sim.CLASS] = np.where(self.flying, 2, np.where(self.is_colossus, 1, 0))
        ints[:, sim.SCRIPTED] = (self.team == 1) | self.builtin_agents
        return flt, ints

    def _spawn_positions(self, ally_created, enemy_created):
        """Start positions (the same every episode): both teams created in the map's order,
        packed around their points facing each other; agents then sorted as SMAC sorts them."""
        centre = [np.mean([p for _, p in created], axis=0) for created in (ally_created, enemy_created)]
        units = []
        self._facing = np.zeros((2, 2))
        for team, created in enumerate((ally_created, enemy_created)):
            dx, dy = centre[1 - team] - centre[team]
            facing = math.atan2(dy, dx)
            self._facing[team] = math.cos(facing), math.sin(facing)
            cls = lambda k: 2 if UNITS[k]["flying"] else (1 if k == "colossus" else 0)  # noqa: E731
            units += [(UNITS[k]["radius"], cls(k), bool(UNITS[k]["flying"]), p, facing) for k, p in created]
        pos = spawn.pack(units, self.grid)
        na = self.n_agents
        ally = pos[:na]
        created_types = np.array([type_index(self.map_type, k, False) for k, _ in ally_created])
        order = np.lexsort((ally[:, 1], ally[:, 0], created_types))
        return np.concatenate([ally[order], pos[na:]])

    # --- episode ----------------------------------------------------------------------------
    def _new_battle(self):
        """Per-episode set-up before the units appear (v1 maps: only 2m_vs_1z's attack point)."""
        if self._goal_segment is not None:  # 2m_vs_1z: a point drawn on the segment each episode
            a, b = np.asarray(self._goal_segment, dtype=np.float64)
            self._goals[1] = a + (b - a) * self.rng.random()

    def reset(self):
        self._new_battle()
        n = self.n
        self.pos = self._spawn.copy()
        self.hp = self.hp_max.copy()
        self.sh = self.sh_max.copy()
        self.energy = np.where(self.is_medivac, 50.0, 0.0)
        self.cooldown = np.zeros(n)
        self.quiet = np.full(n, 1000.0)
        self.alive = np.ones(n, dtype=bool)
        self.order = np.zeros(n, dtype=np.int64)
        self.order_point = self.pos.copy()
        self.target = np.full(n, -1, dtype=np.int64)
        self._hit_by = np.full(n, -1, dtype=np.int64)
        self._hit_age = np.full(n, 1 << 20, dtype=np.int64)
        self._burst = np.zeros(n, dtype=bool)
        self._clock = np.array([0, *self._clock_start], dtype=np.int64)  # loops, HUNT period, phase
        self.heuristic_targets = [None] * self.n_agents
        self._episode_steps = 0
        self.death_tracker = np.zeros(n, dtype=bool)
        self.last_action = np.zeros((self.n_agents, self.n_actions), dtype=np.float32)
        self.win_counted = self.defeat_counted = False
        self._simulate(self._preroll)
        if self._trace:
            self._last_trace = self._trace
        self._trace = [(self.pos.copy(), self.alive.copy())]  # for save_replay
        self.prev_hs = self.hp + self.sh
        self._cache = None
        return self.get_obs(), self.get_state()

    def full_restart(self):
        """SMAC relaunches StarCraft II here; the simulator just starts a new battle."""
        self.force_restarts += 1
        return self.reset()

    def step(self, actions):
        actions_int = np.asarray([int(a) for a in actions], dtype=np.int64)
        self.last_action = np.eye(self.n_actions, dtype=np.float32)[actions_int]
        if self.heuristic_ai:
            actions_int = self._heuristic_actions()
            if isinstance(actions, list):  # SMAC writes the actions taken back into the list
                actions[:] = actions_int.tolist()
        elif not self.builtin_agents:
            avail = self._avail()
            ok = avail[np.arange(self.n_agents), actions_int]
            if not ok.all():
                bad = int(np.flatnonzero(ok == 0)[0])
                raise AssertionError(f"Agent {bad} cannot perform action {actions_int[bad]}")
        self._act(actions_int)
        self._trace.append((self.pos.copy(), self.alive.copy()))
        self._total_steps += 1
        self._episode_steps += 1
        self._cache = None

        alive_a, alive_e = self.alive[: self.n_agents], self.alive[self.n_agents :]
        code = self._end_code(alive_a, alive_e)
        reward = 0.0 if self.reward_sparse else self._reward()
        info = {
            "battle_won": False,
            "dead_allies": int((~alive_a).sum()),
            "dead_enemies": int((~alive_e).sum()),
        }
        terminated = False
        if code is not None:
            terminated = True
            self.battles_game += 1
            if code == 1 and not self.win_counted:
                self.win_counted = True
                self.battles_won += 1
                info["battle_won"] = True
                reward = 1 if self.reward_sparse else reward + self.reward_win
            elif code == -1 and not self.defeat_counted:
                self.defeat_counted = True
                reward = -1 if self.reward_sparse else reward + self.reward_defeat
        elif self._episode_steps >= self.episode_limit:
            terminated = True
            self.battles_game += 1
            self.timeouts += 1
            if self.continuing_episode:
                info["episode_limit"] = True
        if terminated:
            self._episode_count += 1
        self._after_step()
        if self.reward_scale:
            reward /= self.max_reward / self.reward_scale_rate
        self.reward = reward
        return reward, terminated, info

    def _act(self, actions):
        """Orders from the actions, then step_mul game loops."""
        if not self.builtin_agents:
            self._orders(actions)
        self._simulate(self.step_mul)

    def _after_step(self):
        pass

    def _end_code(self, alive_a, alive_e):
        na, ne = alive_a.sum(), alive_e.sum()
        if (na == 0 and ne > 0) or self.only_medivac_left(ally=True):
            return -1
        if (na > 0 and ne == 0) or self.only_medivac_left(ally=False):
            return 1
        if na == 0 and ne == 0:
            return 0
        return None

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

    def _reward(self):
        hs = self.hp + self.sh
        na = self.n_agents
        newly_dead = ~self.alive & ~self.death_tracker
        live = ~self.death_tracker
        enemy = np.zeros(self.n, dtype=bool)
        enemy[na:] = True
        d_enemy = (np.where(newly_dead, self.prev_hs, self.prev_hs - hs) * (live & enemy)).sum()
        d_deaths = self.reward_death_value * (newly_dead & enemy).sum()
        d_ally = (
            self.reward_negative_scale
            * (np.where(newly_dead, self.prev_hs, self.prev_hs - hs) * (live & ~enemy)).sum()
        )
        if not self.reward_only_positive:
            d_deaths -= self.reward_death_value * self.reward_negative_scale * (newly_dead & ~enemy).sum()
        self.death_tracker |= newly_dead
        self.prev_hs = hs
        if self.reward_only_positive:
            # SMAC v1 takes the absolute value (shield regeneration then pays); SMACv2 clips at 0
            return float(max(d_enemy + d_deaths, 0.0) if self._clip_reward else abs(d_enemy + d_deaths))
        return float(d_enemy + d_deaths - d_ally)

    # --- orders and simulation --------------------------------------------------------------
    def _orders(self, actions, dropped=None):
        """Agents' orders from their actions; an agent whose command is `dropped` keeps its order."""
        na = self.n_agents
        alive = self.alive[:na]
        if dropped is not None:
            alive = alive & ~dropped
        move = (actions >= 2) & (actions <= 5) & alive
        dirs = np.array([[0, 0], [0, 0], [0, 1], [0, -1], [1, 0], [-1, 0]], dtype=np.float64)
        pts = self.pos[:na] + dirs[np.minimum(actions, 5)] * self.move_amount
        stop = (actions == 1) & alive
        self.order[:na][stop] = sim.IDLE
        self.order[:na][move] = sim.MOVE
        self.order_point[:na][move] = pts[move]
        first = self.n_actions_no_attack  # actions between 6 and first turn a unit (SMACv2's cone)
        att = (actions >= first) & alive
        heal = att & self.is_medivac[:na]
        attack = att & ~self.is_medivac[:na]
        tgt = np.where(heal, actions - first, na + actions - first)
        # a ground-only weapon cannot take an air target: SC2 rejects the order
        ok = attack & ~(
            self.flying[np.clip(tgt, 0, self.n - 1)] & ~self._ints[:na, sim.HITS_AIR].astype(bool)
        )
        self.order[:na][ok] = sim.ATTACK
        self.order[:na][heal] = sim.HEAL
        self.target[:na] = np.where(ok | heal, tgt, self.target[:na])
        self.target[:na][move | stop] = -1

    def _simulate(self, loops):
        if self.attack_jitter:
            jitter = self.rng.integers(JITTER_LOOPS[0], JITTER_LOOPS[1] + 1, (loops, self.n)).astype(
                np.float64
            )
        else:
            jitter = np.zeros((loops, self.n))
        fields = self._fields if self._fields is not None else np.zeros((1, 1, 1), np.float32)
        sim.run_loops(
            loops,
            jitter,
            self._flt,
            self._ints,
            self.grid,
            fields,
            self._fields is not None,
            self._modes,
            self._goals,
            self._facing,
            self._clock,
            self.pos,
            self.hp,
            self.sh,
            self.energy,
            self.cooldown,
            self.quiet,
            self.alive,
            self.target,
            self.order,
            self.order_point,
            self._hit_by,
            self._hit_age,
            self._burst,
        )

    def _heuristic_actions(self):
        """SMAC's heuristic_ai: each agent keeps a target until it dies, else takes the nearest
        living enemy (Marauders skip Medivacs; Medivacs heal the nearest damaged ally, else
        no-op); with heuristic_rest, an attack that is not available becomes one step toward it."""
        na = self.n_agents
        actions = np.zeros(na, dtype=np.int64)
        avail = self._avail() if self.heuristic_rest else None
        for a in range(na):
            pos = self.pos[a]
            tgt = self.heuristic_targets[a]
            if self.is_medivac[a]:
                if tgt is None or self.hp[tgt] == 0 or self.hp[tgt] == self.hp_max[tgt]:
                    cand = [
                        j
                        for j in range(na)
                        if not self.is_medivac[j] and self.hp[j] != 0 and self.hp[j] != self.hp_max[j]
                    ]
                    tgt = min(cand, key=lambda j: (math.hypot(*(self.pos[j] - pos)), j)) if cand else None
                target_pos = None if tgt is None else self.pos[tgt]
            else:
                if tgt is None or self.hp[na + tgt] == 0:
                    cand = [
                        e
                        for e in range(self.n_enemies)
                        if self.hp[na + e] > 0
                        and not (self.kinds[a] == "marauder" and self.is_medivac[na + e])
                    ]
                    tgt = (
                        min(cand, key=lambda e: (math.hypot(*(self.pos[na + e] - pos)), e)) if cand else None
                    )
                target_pos = None if tgt is None else self.pos[na + tgt]
            self.heuristic_targets[a] = tgt
            if tgt is None:
                continue
            action = tgt + self.n_actions_no_attack
            if self.heuristic_rest and not avail[a, action]:
                dx, dy = target_pos - pos
                action = (4 if dx > 0 else 5) if abs(dx) > abs(dy) else (2 if dy > 0 else 3)
            actions[a] = action
        return actions

    # --- actions, observations, state -------------------------------------------------------
    def _avail(self):
        if self._cache_ok("avail"):
            return self._cache["avail"]
        na, ne = self.n_agents, self.n_enemies
        avail = np.zeros((na, self.n_actions), dtype=np.int64)
        alive = self.alive[:na]
        p = self.pos[:na]
        half = self.move_amount / 2
        probes = (p[:, None, :] + self._probe_dirs * half).astype(np.int64)  # int() truncation
        inside = ((probes >= 0) & (probes < 32)).all(-1)
        probes = np.minimum(np.maximum(probes, 0), 31)
        avail[:, 2:6] = inside & self.grid[probes[..., 0], probes[..., 1]]
        avail[:, 1] = 1
        d = np.sqrt(((self.pos[na:][None, :, :] - p[:, None, :]) ** 2).sum(-1))  # [na, ne]
        avail[:, 6:] = self.alive[na:][None, :] & (d <= SHOOT)
        med = self.is_medivac[:na]
        if self.is_mmm and med.any():
            da = np.sqrt(((p[None, :, :] - p[:, None, :]) ** 2).sum(-1))  # [na, na]
            heal = alive[None, :] & ~med[None, :] & (da <= SHOOT)
            avail[med, 6:] = 0
            k = min(na, ne)
            avail[np.ix_(med, np.arange(6, 6 + k))] = heal[med][:, :k]
        avail[~alive] = 0
        avail[~alive, 0] = 1
        self._store("avail", avail)
        return avail

    def _cache_ok(self, key):
        return self._cache is not None and key in self._cache

    def _store(self, key, value):
        if self._cache is None:
            self._cache = {}
        self._cache[key] = value

    def _onehot(self, idx, bits):
        key = (id(idx), bits)  # the type index arrays never change: build each one-hot once
        if key not in self._onehots:
            self._onehots[key] = (
                np.eye(bits, dtype=np.float32)[idx] if bits else np.zeros((len(idx), 0), np.float32)
            )
        return self._onehots[key]

    def get_obs(self):
        if self._cache_ok("obs"):
            return list(self._cache["obs"])
        na, ne = self.n_agents, self.n_enemies
        if not self.obs_starcraft:  # open loop: the time step alone
            obs = np.full((na, 1), self._episode_steps / self.episode_limit, np.float32)
            self._store("obs", obs)
            return list(obs)
        avail = self._avail()
        p = self.pos
        alive_a, alive_e = self.alive[:na], self.alive[na:]
        # enemies
        rel = p[na:][None, :, :] - p[:na][:, None, :]  # [na, ne, 2]
        d = np.sqrt((rel**2).sum(-1))
        vis = alive_e[None, :] & (d < SIGHT) & alive_a[:, None]
        cols = [avail[:, 6:].astype(np.float32), d / SIGHT, rel[..., 0] / SIGHT, rel[..., 1] / SIGHT]
        if self.obs_all_health:
            cols.append(np.broadcast_to(self.hp[na:] / self.hp_max[na:], (na, ne)))
            if self.shield_bits_enemy:
                cols.append(np.broadcast_to(self.sh[na:] / self.sh_max[na:], (na, ne)))
        en = np.concatenate(
            [
                np.stack(cols, -1),
                np.broadcast_to(
                    self._onehot(self.enemy_type, self.unit_type_bits)[None], (na, ne, self.unit_type_bits)
                ),
            ],
            -1,
        )
        en = (en * vis[..., None]).astype(np.float32)
        # allies
        o = self._others  # [na, na-1]
        rel_a = p[o] - p[:na][:, None, :]
        d_a = np.sqrt((rel_a**2).sum(-1))
        vis_a = alive_a[o] & (d_a < SIGHT) & alive_a[:, None]
        cols = [np.ones_like(d_a), d_a / SIGHT, rel_a[..., 0] / SIGHT, rel_a[..., 1] / SIGHT]
        if self.obs_all_health:
            cols.append((self.hp[:na] / self.hp_max[:na])[o])
            if self.shield_bits_ally:
                cols.append((self.sh[:na] / self.sh_max[:na])[o])
        parts = [np.stack(cols, -1), self._onehot(self.ally_type, self.unit_type_bits)[o]]
        if self.obs_last_action:
            parts.append(self.last_action[o])
        al = (np.concatenate(parts, -1) * vis_a[..., None]).astype(np.float32)
        # own
        own = []
        if self.obs_own_health:
            own.append((self.hp[:na] / self.hp_max[:na])[:, None])
            if self.shield_bits_ally:
                own.append((self.sh[:na] / self.sh_max[:na])[:, None])
        own.append(self._onehot(self.ally_type, self.unit_type_bits))
        if self.obs_timestep_number:
            own.append(np.zeros((na, 1)))
        obs = np.concatenate(
            [
                self._move_obs(),
                en.reshape(na, -1),
                al.reshape(na, -1),
                np.concatenate(own, -1).astype(np.float32),
            ],
            -1,
        ).astype(np.float32)
        obs[~alive_a] = 0.0
        if self.obs_timestep_number:  # SMAC appends the time after the blocks (its size quirk)
            obs = np.concatenate(
                [obs, np.full((na, 1), self._episode_steps / self.episode_limit, np.float32)], -1
            )
        self._store("obs", obs)
        return list(obs)

    def _move_obs(self):
        """SMAC's move features: N/S/E/W availability, then the pathing grid at 8 points around
        the unit and the terrain height there and under it (1 outside the map)."""
        na = self.n_agents
        parts = [self._avail()[:, 2:6].astype(np.float32)]
        if self.obs_pathing_grid or self.obs_terrain_height:
            m = int(self._move_amount)
            dx = np.array([0, 0, 2 * m, -2 * m, m, -m, m, -m, 0])
            dy = np.array([2 * m, -2 * m, 0, 0, m, -m, -m, m, 0])
            px = self.pos[:na, 0].astype(np.int64)[:, None] + dx
            py = self.pos[:na, 1].astype(np.int64)[:, None] + dy
            inside = (px >= 0) & (px < self.map_x) & (py >= 0) & (py < self.map_y)
            cx, cy = np.minimum(np.maximum(px, 0), 31), np.minimum(np.maximum(py, 0), 31)
            if self.obs_pathing_grid:
                parts.append(np.where(inside, self.pathing_grid[cx, cy], 1)[:, :8])
            if self.obs_terrain_height:
                parts.append(np.where(inside, self.terrain_height[cx, cy], 1.0))
        return np.concatenate(parts, -1).astype(np.float32)

    def get_obs_agent(self, agent_id):
        return self.get_obs()[agent_id]

    def get_obs_size(self):
        return self.obs_size if self.obs_starcraft else 1

    def get_state(self):
        if self.obs_instead_of_state:
            return np.concatenate(self.get_obs()).astype(np.float32)
        allies, enemies = self._unit_state()
        parts = [allies.reshape(-1), enemies.reshape(-1)]
        if self.state_last_action:
            parts.append(self.last_action.reshape(-1))
        if self.state_timestep_number:
            parts.append(np.array([self._episode_steps / self.episode_limit]))
        return np.concatenate(parts).astype(np.float32)

    def _unit_state(self):
        """SMAC's state rows: allies [n_agents, nf_al_s], enemies [n_enemies, nf_en_s] (dead: 0)."""
        na = self.n_agents
        cx = cy = 16.0
        a_cols = [
            self.hp[:na] / self.hp_max[:na],
            np.where(
                self.is_medivac[:na],
                self.energy[:na] / 200.0,
                np.maximum(self.cooldown[:na], 0.0) / self.max_cd[:na],
            ),
            (self.pos[:na, 0] - cx) / self.max_distance_x,
            (self.pos[:na, 1] - cy) / self.max_distance_y,
        ]
        if self.shield_bits_ally:
            a_cols.append(self.sh[:na] / self.sh_max[:na])
        allies = np.concatenate([np.stack(a_cols, -1), self._onehot(self.ally_type, self.unit_type_bits)], -1)
        allies[~self.alive[:na]] = 0
        e_cols = [
            self.hp[na:] / self.hp_max[na:],
            (self.pos[na:, 0] - cx) / self.max_distance_x,
            (self.pos[na:, 1] - cy) / self.max_distance_y,
        ]
        if self.shield_bits_enemy:
            e_cols.append(self.sh[na:] / self.sh_max[na:])
        enemies = np.concatenate(
            [np.stack(e_cols, -1), self._onehot(self.enemy_type, self.unit_type_bits)], -1
        )
        enemies[~self.alive[na:]] = 0
        return allies, enemies

    def get_state_size(self):
        if self.obs_instead_of_state:
            return self.get_obs_size() * self.n_agents
        size = self.n_agents * self.nf_al_s + self.n_enemies * self.nf_en_s
        size += self.n_agents * self.n_actions * self.state_last_action
        return size + int(self.state_timestep_number)

    def get_avail_actions(self):
        return self._avail().tolist()

    def get_avail_agent_actions(self, agent_id):
        return self._avail()[agent_id].tolist()

    def get_total_actions(self):
        return self.n_actions

    def get_indi_terminated(self):
        return (~self.alive[: self.n_agents]).astype(np.int64).tolist()

    def get_stats(self):
        return {
            "battles_won": self.battles_won,
            "battles_game": self.battles_game,
            "battles_draw": self.timeouts,
            "timeouts": self.timeouts,
            "restarts": self.force_restarts,
            "win_rate": self.battles_won / self.battles_game if self.battles_game else 0.0,
        }

    def get_env_info(self):
        info = {
            "state_shape": self.get_state_size(),
            # SMAC's get_obs_size() counts the time feature once, inside own_feats, but its
            # observations append it again: with obs_timestep_number they are one longer. The
            # runners need the true length; get_obs_size() keeps SMAC's figure.
            "obs_shape": self.obs_size + int(self.obs_timestep_number) if self.obs_starcraft else 1,
            "n_actions": self.n_actions,
            "n_agents": self.n_agents,
            "n_enemies": self.n_enemies,
            "episode_limit": self.episode_limit,
            "agent_features": self.ally_state_attr_names,
            "enemy_features": self.enemy_state_attr_names,
        }
        if not self.obs_timestep_number and self.obs_starcraft:
            info.update(
                smac_entities(
                    self.move_feats,
                    (self.n_enemies, self.nf_en),
                    (self.n_agents - 1, self.nf_al),
                    self.own_feats,
                    self.n_actions_no_attack,
                )
            )
        return info

    def seed(self, seed=None):
        """The env's seed (SMAC's seed()); seed(s) restarts the random number stream from s."""
        if seed is not None:
            self._seed = seed
            self.rng = np.random.default_rng(seed)
        return self._seed

    def render(self, pos=None, alive=None):
        """An RGB image [256, 256, 3] of the battle: agents blue, enemies red, terrain grey."""
        return render.frame(
            self.grid,
            self.pos if pos is None else pos,
            self.alive if alive is None else alive,
            self.radius,
            self.team,
        )

    def save_replay(self):
        """Writes the last finished episode (else the current one) as an animated GIF to
        replay_dir (default: results/replays in the repository); returns the path."""
        import os

        trace = self._last_trace or self._trace
        if not trace:
            return None
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        return render.write_gif(
            [self.render(p, a) for p, a in trace],
            self.replay_dir or os.path.join(root, "results", "replays"),
            self.replay_prefix or self.map_name,
        )

    def close(self):
        pass
