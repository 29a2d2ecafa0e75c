"""Skirmish v2: SMACv2's procedurally generated battles on the built-in simulator, with SMACv2's
interface (StarCraftCapabilityEnvWrapper's constructor keywords, sizes, feature layouts, reward,
termination, EPO and the conic field of view).

Every reset draws a battle from env_args.capability_config (or a named standard scenario):
unit types per team, start points (mirrored halves or enemy groups on the diagonals around the
agents), optional enemy masks and attack/health capabilities. The units, their physics and the
per-loop resolution are skirmish's (env.py, sim.py). The enemies follow the 32x32_flat map's
trigger: every half game second each enemy without an order is sent after the nearest living
agent and keeps that target until it dies.

SMACv2 quirks (sim_options names the alternatives): by default an agent's observation hides only
the enemies it may not see (enemy_obs_mode "per_row", the behaviour SMACv2's published results
were produced with); "smacv2" reproduces the current code, which wipes an agent's whole enemy
block when it lacks EPO permission for a later enemy (smacv2#50). Kept on purpose: max_reward
comes from the first episode's enemies, a Medivac's enemy column 0 is its heal flag, and the cone
test's arithmetic. Unlike SMACv2, every draw comes from env_args.seed.
"""

import math

import numpy as np

from envs.skirmish import distributions as dist
from envs.skirmish import sim, spawn, terrain
from envs.skirmish.args import (
    SIM_OPTIONS,
    SMAC_DEFAULTS,
    V2_DEFAULTS,
    WRAPPER_KEYS,
    expand,
    validate_v2_env_args,
)
from envs.skirmish.env import ALLY_TYPE_BASE, HYDRALISK_RL_HP, MEDIVAC_RL_SPEED, SkirmishEnv
from envs.skirmish.maps import LOOPS, UNITS
from envs.skirmish.v2_encoding import V2Encoding

SIGHT = {
    "stalker": 10,
    "zealot": 9,
    "colossus": 10,
    "marine": 9,
    "marauder": 10,
    "medivac": 11,
    "zergling": 8,
    "hydralisk": 9,
    "baneling": 8,
}
# SMACv2's agent order: the map's RL unit names sorted alphabetically
RL_SORT = {k: i for i, k in enumerate(sorted(SIGHT))}
AGENT_START, ENEMY_START = (8.0, 16.0), (24.0, 16.0)  # without start_positions


class SkirmishV2Env(V2Encoding, SkirmishEnv):
    _clip_reward = True  # SMACv2: reward_only_positive clips at 0

    DEFAULTS = {**SMAC_DEFAULTS, **V2_DEFAULTS}

    def _arguments(self, kwargs):
        validate_v2_env_args(kwargs)
        return {k: v for k, v in expand(kwargs).items() if k not in WRAPPER_KEYS}

    def _set_up_battle(self, args):
        """32x32_flat, the teams' sizes and action layout; the units are drawn at every reset."""
        self.sim_options = {**SIM_OPTIONS, **(args.get("sim_options") or {})}
        cap = self.capability_config
        race = dist.MAP_RACE[self.map_name]
        self.race = race
        self.map_type = dist.RACES[race][3]
        self.episode_limit = 200
        self.grid = self.pathing_grid = terrain.grid("L2")  # 32x32_flat: every cell pathable
        self.terrain_height = np.full((32, 32), float(self.sim_options["terrain_height_value"]))
        self._fields = None
        self._set_teams(cap["n_units"], cap["n_enemies"])
        na, ne = self.n_agents, self.n_enemies
        self.n_fov_actions = self.num_fov_actions if self.conic_fov else 0
        self.n_actions_no_attack = 6 + self.n_fov_actions
        self.is_terran = self.map_type == "terran_gen"
        self.n_actions = self.n_actions_no_attack + (na if self.is_terran and na > ne else ne)
        self.unit_type_bits = 3
        self.shield_bits_ally = self.shield_bits_enemy = int(race == "protoss")
        self.is_mmm = False
        self.attack_cap, self.health_cap = "attack" in cap, "health" in cap
        self._rows = np.arange(na)[:, None]
        self._modes = np.array([sim.HUNT, sim.HUNT], dtype=np.int64)
        self._goals = np.full((2, 2), 16.0)
        self._goal_segment = None
        self._preroll = int(self.sim_options["reset_preroll_loops"])
        self._seed_streams(self._seed)
        self.max_reward = None

    def _set_up_encoding(self):
        """SMACv2's observation and state sizes and feature names."""
        na, ne, sb = self.n_agents, self.n_enemies, self.shield_bits_ally
        self.capability_attr_names = (
            (["attack_probability"] if self.attack_cap else [])
            + (["total_health"] if self.health_cap else [])
            + [f"type_{i}" for i in range(3)]
        )
        self._cap_size = 3 + self.attack_cap + self.health_cap
        self.team_observe = bool(self.capability_config["team_gen"]["observe"])
        self.nf_en = 4 + 3 + (1 + sb) * self.obs_all_health
        self.nf_al = (
            4 + (1 + sb) * self.obs_all_health + self._cap_size + self.n_actions * self.obs_last_action
        )
        self.own_feats = (
            self._cap_size + (1 + sb) * self.obs_own_health + 2 * self.obs_own_pos + 2 * self.conic_fov
        )
        self.move_feats = 4 + 8 * self.obs_pathing_grid + 9 * self.obs_terrain_height
        if self.obs_starcraft:
            self.obs_size = self.move_feats + ne * self.nf_en + (na - 1) * self.nf_al + self.own_feats
        else:
            self.obs_size = 0
        self.obs_size += int(self.obs_timestep_number)
        extra = (1 if self.attack_cap else 0) + (1 if self.health_cap else 0)
        self.nf_al_s = 4 + sb + 2 * self.conic_fov + extra + 3
        self.nf_en_s = 3 + sb + 3
        self.ally_state_attr_names = (
            ["health", "energy/cooldown", "rel_x", "rel_y"]
            + ["shield"] * sb
            + ["fov_x", "fov_y"] * self.conic_fov
            + self.capability_attr_names
        )
        self.enemy_state_attr_names = (
            ["health", "rel_x", "rel_y"] + ["shield"] * sb + [f"type_{i}" for i in range(3)]
        )

    # --- seeding and scenarios ----------------------------------------------------------------
    def _seed_streams(self, seed):
        """Four streams from one seed: scenarios, engine (jitter), observations (EPO), attack draws."""
        root = np.random.SeedSequence(seed)
        self.sim_seed = root.entropy
        scen, engine, obs, attack = (np.random.default_rng(s) for s in root.spawn(4))
        self.sampler = dist.ScenarioSampler(self.capability_config, scen)
        self.rng, self._obs_rng, self._attack_rng = engine, obs, attack

    def seed(self, seed=None):
        if seed is not None:
            self._seed = seed
            self._seed_streams(seed)
        return self._seed

    def _random_streams(self):
        return {
            "scenario": self.sampler.rng,
            "engine": self.rng,
            "obs": self._obs_rng,
            "attack": self._attack_rng,
        }

    def reset(self, episode_config=None):
        """A new battle: drawn from the capability config, or the given episode_config (as
        SMACv2's inner env takes it)."""
        self._episode_config = episode_config if episode_config is not None else self.sampler.sample()
        return super().reset()

    def _new_battle(self):
        cfg = self._episode_config
        ally_team, enemy_team = list(cfg["team_gen"]["ally_team"]), list(cfg["team_gen"]["enemy_team"])
        na, ne = self.n_agents, self.n_enemies
        if len(ally_team) != na or len(enemy_team) != ne:
            raise ValueError(
                f"episode_config teams of {len(ally_team)} and {len(enemy_team)}, expected {na} and {ne}"
            )
        if "ally_start_positions" in cfg:
            a_pts = np.asarray(cfg["ally_start_positions"]["item"], dtype=np.float64)
            e_pts = np.asarray(cfg["enemy_start_positions"]["item"], dtype=np.float64)
        else:
            a_pts, e_pts = np.tile(AGENT_START, (na, 1)), np.tile(ENEMY_START, (ne, 1))
        centre = [a_pts.mean(0), e_pts.mean(0)]
        self._facing = np.zeros((2, 2))
        units = []
        for team, (kinds, pts) in enumerate(((ally_team, a_pts), (enemy_team, e_pts))):
            dx, dy = centre[1 - team] - centre[team]
            facing = math.atan2(dy, dx) if abs(dx) + abs(dy) > 1e-9 else (0.0 if team == 0 else math.pi)
            self._facing[team] = math.cos(facing), math.sin(facing)
            for k, p in zip(kinds, pts, strict=True):
                r = UNITS[k]["radius"]
                cls = 2 if UNITS[k]["flying"] else (1 if k == "colossus" else 0)
                point = np.clip(p, r, 32.0 - r)
                units.append((r, cls, bool(UNITS[k]["flying"]), point, facing))
        pos = spawn.pack(units, self.grid)
        # agents sorted as SMACv2 sorts them: RL unit name, then x, then y
        order = np.lexsort((pos[:na, 1], pos[:na, 0], [RL_SORT[k] for k in ally_team]))
        self.kinds = [ally_team[i] for i in order] + enemy_team
        self._spawn = np.concatenate([pos[:na][order], pos[na:]])
        self._ally_perm = order  # created index of each agent, for per-agent capability items
        self._build_units()
        for key in ("attack", "health"):
            item = cfg.get(key, {}).get("item") if getattr(self, f"{key}_cap") else None
            value = np.zeros(na) if item is None else np.asarray(item, dtype=np.float64)[:, 0][order]
            setattr(self, f"_{key}_level", value)
        mask = cfg.get("enemy_mask", {}).get("item") if "enemy_mask" in self.capability_config else None
        self._enemy_mask = None if mask is None else np.asarray(mask)[order].astype(bool)
        self.obs_enemies = np.zeros((ne, na), dtype=np.int64)
        self.enemy_tags = np.full(ne, -1, dtype=np.int64)
        self.fov_directions = np.tile([1.0, 0.0], (na, 1))
        self._clock_start = (
            int(self.sim_options["hunt_tick_loops"]),
            int(self.sim_options["hunt_tick_phase"]),
        )
        if self.max_reward is None:
            hs = {k: UNITS[k]["hp"] + UNITS[k]["sh"] for k in SIGHT}
            if self.sim_options["max_reward_mode"] == "expected":
                total = dist.expected_enemy_hs(self.capability_config, hs)
            else:
                total = float((self.hp_max + self.sh_max)[na:].sum())
            self.max_reward = ne * self.reward_death_value + self.reward_win + total

    def _build_units(self):
        """Per-unit tables for this battle's units (agents sorted, then enemies in creation order)."""
        na = self.n_agents
        kinds = self.kinds
        col = lambda key: np.array([UNITS[k][key] for k in kinds], dtype=np.float64)  # noqa: E731
        self.hp_max, self.sh_max, self.armour = col("hp"), col("sh"), col("armour")
        speed = col("speed")
        ally_kinds = np.array(kinds[:na])
        self.hp_max[:na][ally_kinds == "hydralisk"] = HYDRALISK_RL_HP
        self.is_medivac = np.array([k == "medivac" for k in kinds])
        self.is_colossus = np.array([k == "colossus" for k in kinds])
        self.is_baneling = np.array([k == "baneling" for k in kinds])
        speed[:na][self.is_medivac[:na]] = MEDIVAC_RL_SPEED
        self.radius, self.speed = col("radius"), speed / LOOPS
        self.flying = col("flying") > 0
        self.max_cd = col("max_cd")
        bits = dist.TYPE_BITS[self.map_type]
        self.ally_type = np.array([bits.index(k) for k in kinds[:na]])
        self.enemy_type = np.array([bits.index(k) for k in kinds[na:]])
        self.unit_types = np.array(
            [ALLY_TYPE_BASE + RL_SORT[k] for k in kinds[:na]] + [UNITS[k]["sc2"] for k in kinds[na:]],
            dtype=np.int64,
        )
        for kind in SIGHT:
            setattr(self, f"{kind}_id", ALLY_TYPE_BASE + RL_SORT[kind])
        self._min_unit_type = ALLY_TYPE_BASE
        if self.use_unit_ranges:
            self.sight = np.array([SIGHT[k] for k in kinds[:na]], dtype=np.float64)
            self.shoot = np.array(
                [max(UNITS[k]["range"], self.min_attack_range) for k in kinds[:na]], dtype=np.float64
            )
        else:
            self.sight, self.shoot = np.full(na, 9.0), np.full(na, 6.0)
        self._flt, self._ints = self._unit_tables(col)
        self._ally_onehot, self._enemy_onehot = np.eye(3)[self.ally_type], np.eye(3)[self.enemy_type]

    # --- steps --------------------------------------------------------------------------------
    def _act(self, actions):
        na, first = self.n_agents, self.n_actions_no_attack
        alive = self.alive[:na]
        if self.conic_fov:
            turn = alive & (actions >= 6) & (actions < first)
            angle = 2 * math.pi * (actions[turn] - 6) / self.n_fov_actions
            self.fov_directions[turn] = np.stack([np.cos(angle), np.sin(angle)], -1)
        att = alive & (actions >= first)
        slot = np.clip(actions - first, 0, self.n_actions - first - 1)
        in_range = self._target_flags(True)[np.arange(na), slot]
        dropped = att & ~in_range  # out of reach: only possible without the action mask
        if self.attack_cap:
            dropped |= att & (self._attack_rng.uniform(size=na) > self._attack_level)
        if not self.builtin_agents:
            self._orders(actions, dropped)
        if self.health_cap:
            kill = int(self.kill_unit_step_mul)
            self._simulate(self.step_mul - kill)
            dead = self.alive[:na] & (self.hp[:na] / self.hp_max[:na] < self._health_level)
            idx = np.flatnonzero(dead)
            self.alive[idx], self.hp[idx], self.sh[idx], self.target[idx] = False, 0.0, 0.0, -1
            self._simulate(kill)
        else:
            self._simulate(self.step_mul)

    def _after_step(self):
        """EPO bookkeeping: tags held by dead agents and tags on dead enemies are released."""
        na = self.n_agents
        dead_a = ~self.alive[:na]
        held = (self.enemy_tags >= 0) & dead_a[np.maximum(self.enemy_tags, 0)]
        holders = np.unique(self.enemy_tags[held])  # SMACv2 clears a dead agent's column if it held a tag
        self.obs_enemies[held] = 0
        self.enemy_tags[held] = -1
        self.obs_enemies[:, holders] = 0
        dead_e = ~self.alive[na:]
        self.enemy_tags[dead_e] = -1
        self.obs_enemies[dead_e] = 0

    def only_medivac_left(self, ally):
        """SMACv2's terran rule: a side with no living unit other than Medivacs has lost."""
        if not self.is_terran:
            return False
        sel = slice(0, self.n_agents) if ally else slice(self.n_agents, self.n)
        return not (self.alive[sel] & ~self.is_medivac[sel]).any()

    # --- availability -------------------------------------------------------------------------
    def _target_flags(self, in_range_only):
        """[n_agents, n_actions - first] whether each target slot may be chosen: the living target
        (enemy j; agent j for a Medivac, never another Medivac) within shoot range or cone, or
        any living target when in_range_only is False."""
        key = ("targets", in_range_only)
        if self._cache_ok(key):
            return self._cache[key]
        na, ne = self.n_agents, self.n_enemies
        slots = self.n_actions - self.n_actions_no_attack
        flags = np.zeros((na, slots), dtype=bool)
        k = min(slots, ne)
        ok = np.broadcast_to(self.alive[na : na + k], (na, k))
        if in_range_only:
            ok = ok & self._within(slice(na, na + k), self.shoot)
        flags[:, :k] = ok
        med = self.is_medivac[:na]
        if self.is_terran and med.any():
            k = min(slots, na)
            ok = np.broadcast_to(self.alive[:k] & ~med[:k], (na, k))
            if in_range_only:
                ok = ok & self._within(slice(0, k), self.shoot)
            flags[med] = False
            flags[np.ix_(med, np.arange(k))] = ok[med]
        self._store(key, flags)
        return flags

    def _geometry(self):
        """(rel [n_agents, n, 2], dist [n_agents, n]) from each agent to every unit, once per step."""
        if self._cache_ok("geometry"):
            return self._cache["geometry"]
        pos = self.seen_pos
        rel = pos[None, :, :] - pos[: self.n_agents, None, :]
        geo = rel, np.sqrt((rel**2).sum(-1))
        self._store("geometry", geo)
        return geo

    def _within(self, units, radius, strict=False):
        """[n_agents, len(units)]: each unit closer than radius[i] to agent i (centre distance;
        strictly for sight, as SMACv2), or in agent i's cone."""
        if self.conic_fov:
            pos = self.seen_pos
            return dist.is_position_in_cone(
                pos[: self.n_agents, None, :],
                self.fov_directions[:, None, :],
                pos[units][None, :, :],
                radius[:, None],
                self.n_fov_actions,
            )
        d = self._geometry()[1][:, units]
        return d < radius[:, None] if strict else d <= radius[:, None]

    def _avail(self, masked=None):
        masked = self.action_mask if masked is None else masked
        key = ("avail", bool(masked))
        if self._cache_ok(key):
            return self._cache[key]
        na, first = self.n_agents, self.n_actions_no_attack
        avail = self._moves()
        avail[:, 6:first] = 1
        avail[:, first:] = self._target_flags(bool(masked))
        alive = self.alive[:na]
        avail[~alive] = 0
        avail[~alive, 0] = 1
        self._store(key, avail)
        return avail

    def get_true_avail_agent_actions(self, agent_id):
        return self._avail(True)[agent_id].tolist()

    def get_can_shoot(self, agent_id, unit_index):
        """Whether agent_id can fire at enemy unit_index now (shoot range, or cone)."""
        p = self.seen_pos[agent_id][None]
        q = self.seen_pos[self.n_agents + unit_index][None]
        return bool(self._reach_one(agent_id, p, q, self.shoot[agent_id]))

    def _reach_one(self, i, p, q, radius):
        if self.conic_fov:
            return dist.is_position_in_cone(p[0], self.fov_directions[i], q[0], radius, self.n_fov_actions)
        return math.hypot(*(q[0] - p[0])) <= radius

    def is_position_in_cone(self, agent_id, pos, range="sight_range"):
        radius = self.sight[agent_id] if range == "sight_range" else self.shoot[agent_id]
        return bool(
            dist.is_position_in_cone(
                self.seen_pos[agent_id],
                self.fov_directions[agent_id],
                np.asarray(pos, float),
                radius,
                self.num_fov_actions,
            )
        )

    def fixed_healers(self):
        return []  # a drawn team's Medivac changes place every battle

    def get_env_info(self):
        info = super().get_env_info()
        info["obs_shape"] = self.obs_size  # SMACv2 counts the time feature where it appends it
        info["cap_shape"] = self._cap_size
        return info
