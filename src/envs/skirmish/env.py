"""Skirmish: StarCraft-style unit combat in NumPy with SMAC's interface.

Exact (SMAC's rules): constructor arguments, action indices and availability, observation and
state layouts and normalisation, reward arithmetic and scaling, termination, stats, per-map sizes.
Approximate (SC2 4.10-era data, simplified physics): movement in straight lines clamped to the
map's pathable cells (no path finding), pairwise separation instead of SC2's collision, hits of
one sub-step resolved together, Colossus splash as a disc, Banelings burst on attack only,
enemies attack-move and acquire the nearest agent in range. Every unit array is updated at once:
no Python loop over units or pairs.
"""
import numpy as np

from envs.multiagentenv import MultiAgentEnv
from envs.skirmish.maps import GROUP_SPAWNS, LOOPS, MAPS, TYPE_ORDER, UNITS, load_layouts, type_index
from utils.errors import ConfigError
from utils.registry import unknown_name_message

SIGHT, SHOOT = 9.0, 6.0
SUBSTEP = 4  # game loops per simulation sub-step (firing times carry the remainder, so rates stay exact)
KINDS = list(UNITS)
_LAYOUTS = None


def layouts():
    global _LAYOUTS
    if _LAYOUTS is None:
        _LAYOUTS = load_layouts()
    return _LAYOUTS


SMAC_DEFAULTS = dict(
    map_name="8m", step_mul=8, move_amount=2, difficulty="7", game_version=None, seed=None,
    continuing_episode=False, obs_all_health=True, obs_own_health=True, obs_last_action=False,
    obs_pathing_grid=False, obs_terrain_height=False, obs_instead_of_state=False,
    obs_timestep_number=False, state_last_action=True, state_timestep_number=False,
    reward_sparse=False, reward_only_positive=True, reward_death_value=10, reward_win=200,
    reward_defeat=0, reward_negative_scale=0.5, reward_scale=True, reward_scale_rate=20,
    replay_dir="", replay_prefix="", window_size_x=1920, window_size_y=1200, heuristic_ai=False,
    heuristic_rest=False, debug=False)
UNSUPPORTED = ("obs_pathing_grid", "obs_terrain_height", "heuristic_ai")
WRAPPER_KEYS = {"common_reward", "reward_scalarisation"}


def validate_env_args(env_args):
    name = env_args.get("map_name", SMAC_DEFAULTS["map_name"])
    if name not in MAPS:
        raise ConfigError(unknown_name_message("env_args.map_name", name, sorted(MAPS)))
    for k in env_args:
        if k not in SMAC_DEFAULTS and k not in WRAPPER_KEYS:
            raise ConfigError(unknown_name_message("env_args key for skirmish", k, sorted(SMAC_DEFAULTS)))
    for k in UNSUPPORTED:
        if env_args.get(k):
            raise ConfigError(f"env_args.{k}=True is not supported by skirmish yet; set it to False")
    if not env_args.get("common_reward", True):
        raise ConfigError("skirmish gives one team reward (as SMAC does): set common_reward=True")


NEIGHBOURS = np.array([(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)])


class PathFields:
    """8-connected distance fields to goal cells on a pathable grid, computed on demand by a
    vectorised wavefront (diagonals cost sqrt 2, no corner cutting) and cached per goal."""

    def __init__(self, grid):
        self.grid = grid
        self.cache = {}

    def field(self, gx, gy):
        key = (gx, gy)
        if key not in self.cache:
            dist = np.full((34, 34), np.inf)
            free = np.zeros((34, 34), dtype=bool)
            free[1:33, 1:33] = self.grid
            dist[gx + 1, gy + 1] = 0.0
            for _ in range(200):
                best = dist.copy()
                for dx, dy in NEIGHBOURS:
                    shifted = np.full_like(dist, np.inf)
                    shifted[max(dx, 0):34 + min(dx, 0), max(dy, 0):34 + min(dy, 0)] = \
                        dist[max(-dx, 0):34 + min(-dx, 0), max(-dy, 0):34 + min(-dy, 0)]
                    if dx and dy:  # no corner cutting: both orthogonal cells must be free
                        ox = np.zeros_like(free)
                        oy = np.zeros_like(free)
                        ox[max(dx, 0):34 + min(dx, 0), :] = free[max(-dx, 0):34 + min(-dx, 0), :]
                        oy[:, max(dy, 0):34 + min(dy, 0)] = free[:, max(-dy, 0):34 + min(-dy, 0)]
                        shifted = np.where(ox & oy, shifted + np.sqrt(2), np.inf)
                    else:
                        shifted = shifted + 1.0
                    best = np.minimum(best, shifted)
                best = np.where(free, best, np.inf)
                best[gx + 1, gy + 1] = 0.0
                if np.array_equal(best, dist):
                    break
                dist = best
            self.cache[key] = dist[1:33, 1:33]
        return self.cache[key]

    def waypoints(self, pos, dest):
        """Next waypoint toward each destination: the centre of the neighbouring cell closest
        to it along the grid, or the destination itself once in its cell or unreachable."""
        out = dest.copy()
        cells = np.clip(pos.astype(int), 0, 31)
        goals = np.clip(dest.astype(int), 0, 31)
        for g in np.unique(goals[:, 0] * 32 + goals[:, 1]):  # one field per distinct goal cell
            sel = np.flatnonzero(goals[:, 0] * 32 + goals[:, 1] == g)
            f = self.field(g // 32, g % 32)
            c = cells[sel]
            nb = c[:, None, :] + NEIGHBOURS[None]
            inside = (nb >= 0).all(-1) & (nb < 32).all(-1)
            vals = np.where(inside, f[np.clip(nb[..., 0], 0, 31), np.clip(nb[..., 1], 0, 31)], np.inf)
            here = f[c[:, 0], c[:, 1]]
            k = vals.argmin(axis=1)
            better = vals[np.arange(len(sel)), k] < here
            step_to = nb[np.arange(len(sel)), k] + 0.5
            use = better & np.isfinite(here) & (here > 0)
            out[sel[use]] = step_to[use]
        return out


def _spawn(center, units, grid, flying):
    """Square formation around `center` (smaclite's layout), moved onto pathable cells."""
    n = len(units)
    side = int(np.ceil(np.sqrt(n)))
    radii = np.array([UNITS[u]["radius"] for u in units])
    step = 2 * radii.max() + 0.05
    idx = np.arange(n)
    offs = np.stack([idx % side - (side - 1) / 2, idx // side - (side - 1) / 2], 1) * step
    pos = np.asarray(center, dtype=np.float64) + offs
    pos = np.clip(pos, 0.5, 31.5)
    for k in range(n):  # spawn-time only: pull a unit toward the centre until it stands on a path
        for _ in range(40):
            if flying[k] or grid[int(pos[k, 0]), int(pos[k, 1])]:
                break
            pos[k] += (np.asarray(center) - pos[k]) * 0.2
    return pos


class _Pos:
    def __init__(self, x, y):
        self.x, self.y = x, y


class UnitView:
    """SMAC's unit fields for one unit of the simulator (agents first, then enemies)."""

    def __init__(self, env, i):
        self.health, self.health_max = float(env.hp[i]), float(env.hp_max[i])
        self.shield, self.shield_max = float(env.sh[i]), float(env.sh_max[i])
        self.energy, self.weapon_cooldown = float(env.energy[i]), float(max(env.cooldown[i], 0.0))
        self.pos = _Pos(float(env.pos[i, 0]), float(env.pos[i, 1]))
        self.unit_type = int(UNITS[env.kinds[i]]["sc2"])
        self.tag, self.owner = i, 1 + int(env.team[i])


class SkirmishEnv(MultiAgentEnv):
    def __init__(self, **kwargs):
        args = {k: v for k, v in kwargs.items() if k not in WRAPPER_KEYS}
        validate_env_args({**args, "common_reward": kwargs.get("common_reward", True)})
        self.__dict__.update({k: args.get(k, v) for k, v in SMAC_DEFAULTS.items()})
        if self.obs_all_health:
            self.obs_own_health = True
        m = MAPS[self.map_name]
        self.map = m
        self.map_type = m["map_type"]
        self.episode_limit = m["limit"]
        self.grid = layouts()[m["layout"]]
        # straight lines suffice on the convex layouts; the others need paths around walls
        self.paths = PathFields(self.grid) if m["layout"] in ("L4", "L6", "L7", "L8") else None
        self.map_x = self.map_y = 32
        self.max_distance_x = self.max_distance_y = 32
        ally_kinds = [u for u, c in m["agents"] for _ in range(c)]
        enemy_kinds = [u for u, c in m["enemies"] for _ in range(c)]
        # agents in SMAC's order: by type index, then (after spawning) x, y
        ally_kinds = sorted(ally_kinds, key=lambda u: type_index(self.map_type, u, False))
        self.n_agents, self.n_enemies = len(ally_kinds), len(enemy_kinds)
        self.n_actions_no_attack, self.n_actions_move = 6, 4
        self.n_obs_pathing, self.n_obs_height = 8, 9
        self.n_actions = 6 + self.n_enemies
        self.unit_type_bits = len(TYPE_ORDER[self.map_type])
        self.shield_bits_ally = int(UNITS[ally_kinds[0]]["sh"] > 0)
        self.shield_bits_enemy = int(UNITS[enemy_kinds[0]]["sh"] > 0)
        self.is_mmm = self.map_type == "MMM"
        self.kinds = ally_kinds + enemy_kinds
        n = len(self.kinds)
        self.team = np.array([0] * self.n_agents + [1] * self.n_enemies)
        col = lambda key: np.array([UNITS[k][key] for k in self.kinds], dtype=np.float64)  # noqa: E731
        self.hp_max, self.sh_max, self.armour = col("hp"), col("sh"), col("armour")
        if self.map_name == "6h_vs_8z":
            self.hp_max[:self.n_agents] = 80.0  # the map's allied Hydralisks
        self.radius, self.speed = col("radius"), col("speed") / LOOPS
        self.dmg, self.hits, self.bonus = col("dmg"), col("hits"), col("bonus")
        self.bonus_light = np.array([UNITS[k]["bonus_vs"] == "light" for k in self.kinds])
        self.bonus_armored = np.array([UNITS[k]["bonus_vs"] == "armored" for k in self.kinds])
        self.light, self.armored, self.bio = col("light") > 0, col("armored") > 0, col("bio") > 0
        self.wrange, self.cd_loops = col("range"), col("cd") * LOOPS
        self.hits_ground, self.hits_air, self.flying = col("ground") > 0, col("air") > 0, col("flying") > 0
        self.regen, self.max_cd = col("regen") > 0, col("max_cd")
        self.is_medivac = np.array([k == "medivac" for k in self.kinds])
        self.is_colossus = np.array([k == "colossus" for k in self.kinds])
        self.is_baneling = np.array([k == "baneling" for k in self.kinds])
        self.armed = (self.dmg > 0) & ~self.is_medivac
        self.ally_type = np.array([type_index(self.map_type, k, False) for k in ally_kinds])
        self.enemy_type = np.array([type_index(self.map_type, k, True) for k in enemy_kinds])
        self.max_reward = (self.n_enemies * self.reward_death_value + self.reward_win
                           + float((self.hp_max + self.sh_max)[self.n_agents:].sum()))
        self.rng = np.random.default_rng(self.seed)
        self.battles_won = self.battles_game = self.timeouts = self.force_restarts = 0
        self._episode_count = self._total_steps = self._episode_steps = 0
        self.n = n
        self.last_action = np.zeros((self.n_agents, self.n_actions), dtype=np.float32)
        self.nf_en = 4 + self.unit_type_bits + (1 + self.shield_bits_enemy if self.obs_all_health else 0)
        self.nf_al = (4 + self.unit_type_bits + (1 + self.shield_bits_ally if self.obs_all_health else 0)
                      + (self.n_actions if self.obs_last_action else 0))
        self.own_feats = (self.unit_type_bits + (1 + self.shield_bits_ally) * self.obs_own_health
                          + int(self.obs_timestep_number))
        self.obs_size = 4 + self.n_enemies * self.nf_en + (self.n_agents - 1) * self.nf_al + self.own_feats
        self.nf_al_s = 4 + self.shield_bits_ally + self.unit_type_bits
        self.nf_en_s = 3 + self.shield_bits_enemy + self.unit_type_bits
        self._onehots = {}
        self._trace, self._last_trace = [], []  # positions per step of this / the last episode
        self._probe_dirs = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]], dtype=np.float64)[None]
        # pairwise constants of the sub-step
        self._reach = self.wrange[:, None] + self.radius[:, None] + self.radius[None, :]
        hostile = self.team[:, None] != self.team[None, :]
        can_hit = np.where(self.flying[None, :], self.hits_air[:, None], self.hits_ground[:, None])
        self._valid_base = hostile & can_hit & self.armed[:, None]
        cls = np.where(self.flying, 2, np.where(self.is_colossus, 1, 0))
        self._same_cls = (cls[:, None] == cls[None, :]) & ~np.eye(n, dtype=bool)
        self._order_sign = np.sign(np.arange(n)[None, :] - np.arange(n)[:, None])[..., None]
        self._rsum = self.radius[:, None] + self.radius[None, :]
        self._movable = (self.speed > 0)[:, None]
        self._ground = ~self.flying & ~self.is_colossus
        ne_ = n - self.n_agents
        self._acquire = np.maximum(self.wrange + self.radius, 5.0)[self.n_agents:][:, None] + self.radius[None, :]
        if m["order"][0] == "static":
            self._acquire = self._reach[self.n_agents:]
        elif m["order"][0] == "attack_group":
            self._acquire = np.full((ne_, n), np.inf)
        others = np.array([[j for j in range(self.n_agents) if j != i] for i in range(self.n_agents)],
                          dtype=np.int64).reshape(self.n_agents, self.n_agents - 1)
        self._others = others
        self.reset()

    # --- episode ----------------------------------------------------------------------------
    def reset(self):
        m, na = self.map, self.n_agents
        spawns = GROUP_SPAWNS.get(self.map_name, {})
        pos = np.zeros((self.n, 2))
        ally_kinds, enemy_kinds = self.kinds[:na], self.kinds[na:]
        if "agents_each" in spawns:
            pos[:na] = np.array(spawns["agents_each"])[:na]
        elif "agents" in spawns:  # bane_vs_bane: zerglings and banelings at their own points
            for kind, point in zip(["zergling", "baneling"], spawns["agents"]):
                sel = np.array([k == kind for k in ally_kinds])
                pos[:na][sel] = _spawn(point, [k for k in ally_kinds if k == kind], self.grid,
                                       self.flying[:na][sel])
        else:
            pos[:na] = _spawn(m["agent_at"], ally_kinds, self.grid, self.flying[:na])
        if "enemies" in spawns:
            for kind, point in zip(["zergling", "baneling"], spawns["enemies"]):
                sel = np.array([k == kind for k in enemy_kinds])
                pos[na:][sel] = _spawn(point, [k for k in enemy_kinds if k == kind], self.grid,
                                       self.flying[na:][sel])
        else:
            pos[na:] = _spawn(m["enemy_at"], enemy_kinds, self.grid, self.flying[na:])
        # agents: by type index, then x, then y (stable)
        order = np.lexsort((pos[:na, 1], pos[:na, 0], self.ally_type))
        pos[:na] = pos[:na][order]
        self.pos = pos
        self.hp = self.hp_max.copy()
        self.sh = self.sh_max.copy()
        self.energy = np.where(self.is_medivac, 50.0, 0.0)
        self.cooldown = np.zeros(self.n)
        self.quiet = np.full(self.n, 1000.0)
        self.alive = np.ones(self.n, dtype=bool)
        self.order = np.zeros(self.n, dtype=np.int64)  # agents: 0 idle, 1 move, 2 attack, 3 heal
        self.order_point = pos.copy()
        self.target = np.full(self.n, -1, dtype=np.int64)
        kind, point = m["order"]
        self.goal = np.tile(np.asarray(point if point is not None else (16.0, 16.0)), (self.n, 1))
        self.enemy_order = kind
        self._episode_steps = 0
        self.death_tracker = np.zeros(self.n, dtype=bool)
        self.prev_hs = self.hp + self.sh
        self.last_action = np.zeros((self.n_agents, self.n_actions), dtype=np.float32)
        self.win_counted = self.defeat_counted = False
        self._simulate(2)  # SMAC observes two loops after the restart
        if self._trace:
            self._last_trace = self._trace
        self._trace = [(self.pos.copy(), self.alive.copy())]  # for save_replay
        self.prev_hs = self.hp + self.sh
        self._cache = None
        return self.get_obs(), self.get_state()

    def step(self, actions):
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        avail = self._avail()
        if not avail[np.arange(self.n_agents), actions].all():
            bad = int(np.flatnonzero(avail[np.arange(self.n_agents), actions] == 0)[0])
            raise AssertionError(f"agent {bad} cannot take action {actions[bad]}")
        self.last_action = np.eye(self.n_actions, dtype=np.float32)[actions]
        self._orders(actions)
        self._simulate(self.step_mul)
        self._trace.append((self.pos.copy(), self.alive.copy()))
        self._total_steps += 1
        self._episode_steps += 1
        self._cache = None

        alive_a, alive_e = self.alive[:self.n_agents], self.alive[self.n_agents:]
        code = self._end_code(alive_a, alive_e)
        reward = 0.0 if self.reward_sparse else self._reward()
        info = {"battle_won": False, "dead_allies": int((~alive_a).sum()),
                "dead_enemies": int((~alive_e).sum())}
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
        if self.reward_scale:
            reward /= self.max_reward / self.reward_scale_rate
        self.reward = reward
        return reward, terminated, info

    def _end_code(self, alive_a, alive_e):
        na, ne = alive_a.sum(), alive_e.sum()
        med_a = self.is_medivac[:self.n_agents]
        if (na == 0 and ne > 0) or (self.is_mmm and not (alive_a & ~med_a).any()):
            return -1
        if (na > 0 and ne == 0) or (self.is_mmm and ne == 1 and (alive_e & self.is_medivac[self.n_agents:]).any()):
            return 1
        if na == 0 and ne == 0:
            return 0
        return None

    def _reward(self):
        hs = self.hp + self.sh
        na = self.n_agents
        newly_dead = ~self.alive & ~self.death_tracker
        live = ~self.death_tracker
        enemy = np.zeros(self.n, dtype=bool)
        enemy[na:] = True
        d_enemy = (np.where(newly_dead, self.prev_hs, self.prev_hs - hs) * (live & enemy)).sum()
        d_deaths = self.reward_death_value * (newly_dead & enemy).sum()
        d_ally = self.reward_negative_scale * (np.where(newly_dead, self.prev_hs, self.prev_hs - hs)
                                               * (live & ~enemy)).sum()
        if not self.reward_only_positive:
            d_deaths -= self.reward_death_value * self.reward_negative_scale * (newly_dead & ~enemy).sum()
        self.death_tracker |= newly_dead
        self.prev_hs = hs
        if self.reward_only_positive:
            return float(abs(d_enemy + d_deaths))
        return float(d_enemy + d_deaths - d_ally)

    # --- orders and simulation --------------------------------------------------------------
    def _orders(self, actions):
        na = self.n_agents
        alive = self.alive[:na]
        move = (actions >= 2) & (actions <= 5) & alive
        dirs = np.array([[0, 0], [0, 0], [0, 1], [0, -1], [1, 0], [-1, 0]], dtype=np.float64)
        pts = self.pos[:na] + dirs[np.minimum(actions, 5)] * self.move_amount
        self.order[:na] = np.where(actions == 1, 0, self.order[:na])
        self.order[:na][move] = 1
        self.order_point[:na][move] = pts[move]
        att = (actions >= 6) & alive
        heal = att & self.is_medivac[:na]
        attack = att & ~self.is_medivac[:na]
        tgt = np.where(heal, actions - 6, na + actions - 6)
        # a ground-only weapon cannot take an air target: SC2 rejects the order
        ok = attack & ~(self.flying[np.minimum(np.maximum(tgt, 0), self.n - 1)] & ~self.hits_air[:na])
        self.order[:na][ok] = 2
        self.order[:na][heal] = 3
        self.target[:na] = np.where(ok | heal, tgt, np.where(actions == 1, -1, self.target[:na]))
        self.target[:na][move | (actions == 1)] = -1

    def _simulate(self, loops):
        for _ in range(int(np.ceil(loops / SUBSTEP))):
            self._substep(SUBSTEP)

    def _substep(self, dt):
        na, pos, alive = self.n_agents, self.pos, self.alive
        diff = pos[None, :, :] - pos[:, None, :]  # [i, j] = p_j - p_i
        dist = np.sqrt((diff ** 2).sum(-1))
        reach = self._reach
        valid = self._valid_base & alive[None, :]

        # enemies: keep a target in range, else acquire the nearest hittable agent in range
        tgt = self.target
        e = np.arange(na, self.n)
        cur = tgt[e]
        has = cur >= 0
        keep = has & alive[np.maximum(cur, 0)] & (dist[e, np.maximum(cur, 0)] <= reach[e, np.maximum(cur, 0)])
        cand = valid[e] & (dist[e] <= self._acquire)
        nearest = np.where(cand, dist[e], np.inf).argmin(axis=1)
        tgt[e] = np.where(keep, cur, np.where(cand.any(axis=1), nearest, -1))
        # agents: drop dead targets
        a_t = tgt[:na]
        dead_t = (a_t >= 0) & ~alive[np.maximum(a_t, 0)]
        tgt[:na] = np.where(dead_t, -1, a_t)
        self.order[:na] = np.where(dead_t & (self.order[:na] >= 2), 0, self.order[:na])

        has_t = (tgt >= 0) & alive
        ti = np.maximum(tgt, 0)
        d_t = dist[np.arange(self.n), ti]
        heal_range = 4.0 + self.radius + self.radius[ti]
        in_range = has_t & np.where(self.is_medivac, d_t <= heal_range, d_t <= reach[np.arange(self.n), ti])

        # desired destination
        dest = pos.copy()
        moving = np.zeros(self.n, dtype=bool)
        chase = has_t & ~in_range
        dest[chase] = pos[ti[chase]]
        moving |= chase
        am = (self.order == 1) & (self.team == 0) & alive
        dest[am] = self.order_point[am]
        moving |= am
        ene = (self.team == 1) & alive & ~has_t & (self.speed > 0)
        if self.enemy_order == "attack_group":
            agents_alive = alive[:na]
            if agents_alive.any():
                d_ag = np.where(agents_alive[None, :], dist[:, :na], np.inf)
                dest[ene] = pos[:na][d_ag[ene].argmin(axis=1)]
                moving |= ene
        elif self.enemy_order == "attack_move":
            far = ene & (np.sqrt(((self.goal - pos) ** 2).sum(-1)) > 0.5)
            dest[far] = self.goal[far]
            moving |= far
        med_e = self.is_medivac & (self.team == 1) & alive & ~has_t
        if med_e.any():  # the enemy Medivac follows its army
            friends = alive & (self.team == 1) & ~self.is_medivac
            if friends.any():
                dest[med_e] = pos[friends].mean(axis=0)
                moving |= med_e
        if self.paths is not None:
            walkers = moving & alive & ~self.flying & ~self.is_colossus
            if walkers.any():
                dest[walkers] = self.paths.waypoints(pos[walkers], dest[walkers])
        step_vec = dest - pos
        length = np.sqrt((step_vec ** 2).sum(-1))
        travel = np.minimum(length, self.speed * dt)
        v = np.where(length[:, None] > 1e-9, step_vec / np.maximum(length, 1e-9)[:, None], 0.0)
        new = pos + v * (travel * moving * alive)[:, None]

        # separation between overlapping ground units (Colossi and air units apart)
        d2 = new[None, :, :] - new[:, None, :]
        dn = np.sqrt((d2 ** 2).sum(-1))
        overlap = self._rsum - dn
        pair = (overlap > 0) & alive[:, None] & alive[None, :] & self._same_cls
        if pair.any():
            same = dn < 1e-6  # coincident units separate along a fixed direction
            if same.any():
                d2 = np.where(same[..., None], np.array([1e-3, 0.0]) * self._order_sign, d2)
                dn = np.maximum(np.sqrt((d2 ** 2).sum(-1)), 1e-6)
            push = np.where(pair, overlap / 2 / np.maximum(dn, 1e-6), 0.0)[..., None] * d2
            new = new - push.sum(axis=1) * self._movable
        # terrain: ground units keep their centre on pathable cells (axis by axis)
        new = np.minimum(np.maximum(new, 0.0), 31.999)
        ground = self._ground & alive
        ok = self.grid[new[:, 0].astype(int), new[:, 1].astype(int)] | ~ground
        if not ok.all():
            tryx = np.stack([new[:, 0], pos[:, 1]], 1)
            okx = self.grid[tryx[:, 0].astype(int), tryx[:, 1].astype(int)]
            tryy = np.stack([pos[:, 0], new[:, 1]], 1)
            oky = self.grid[tryy[:, 0].astype(int), tryy[:, 1].astype(int)]
            fallback = np.where(okx[:, None], tryx, np.where(oky[:, None], tryy, pos))
            new = np.where(ok[:, None], new, fallback)
        self.pos = np.where(alive[:, None], new, pos)

        # weapons: fire when in range with the cooldown done; hits of the sub-step land together
        self.cooldown = np.maximum(self.cooldown - dt, -dt)
        fire = in_range & self.armed & (self.cooldown <= 0) & alive
        self.cooldown = np.where(fire | (self.cooldown > 0), self.cooldown, 0.0)
        if fire.any():
            shooters = np.flatnonzero(fire)
            victims = tgt[shooters]
            raw = self.dmg[shooters] + self.bonus[shooters] * (
                (self.bonus_light[shooters] & self.light[victims])
                | (self.bonus_armored[shooters] & self.armored[victims]))
            hits = self.hits[shooters]
            # splash: the Colossus beam (a 2.8 x 0.3 bar across the line of fire, centred on the
            # target) and the Baneling burst (a disc of 2.2 around it); hostile ground units only
            spl = self.is_colossus[shooters] | self.is_baneling[shooters]
            if spl.any():
                s = np.flatnonzero(spl)
                att, tg = shooters[s], victims[s]
                rel = self.pos[None, :, :] - np.where(self.is_baneling[att][:, None], self.pos[att],
                                                      self.pos[tg])[:, None, :]  # [k, n, 2]
                u = self.pos[tg] - self.pos[att]
                u = u / np.maximum(np.sqrt((u ** 2).sum(-1, keepdims=True)), 1e-9)
                across = np.abs((rel * u[:, None, :]).sum(-1))
                along = np.abs(rel[..., 0] * -u[:, None, 1] + rel[..., 1] * u[:, None, 0])
                r = self.radius[None, :]
                bar = (along <= 1.4 + r) & (across <= 0.15 + r)
                disc = np.sqrt((rel ** 2).sum(-1)) <= 2.2 + r
                hit = np.where(self.is_baneling[att][:, None], disc, bar) & alive[None, :] \
                    & ~self.flying[None, :] & (self.team[None, :] != self.team[att][:, None])
                hit[np.arange(len(s)), tg] = False
                sh_i, vi = np.nonzero(hit)
                shooters_x = att[sh_i]
                extra_raw = self.dmg[shooters_x] + self.bonus[shooters_x] * (
                    (self.bonus_light[shooters_x] & self.light[vi])
                    | (self.bonus_armored[shooters_x] & self.armored[vi]))
                victims = np.concatenate([victims, vi])
                raw = np.concatenate([raw, extra_raw])
                hits = np.concatenate([hits, self.hits[shooters_x]])
            total = np.zeros(self.n)
            n_hits = np.zeros(self.n)
            np.add.at(total, victims, raw * hits)
            np.add.at(n_hits, victims, hits)
            absorbed = np.minimum(self.sh, total)
            self.sh -= absorbed
            rest = total - absorbed
            loss = np.where(rest > 0, np.maximum(rest - self.armour * n_hits, 0.5 * n_hits), 0.0)
            self.hp = self.hp - loss
            self.quiet = np.where(total > 0, 0.0, self.quiet)
            self.cooldown[shooters] = (self.cd_loops[shooters] + self.rng.integers(-1, 3, len(shooters))
                                       + self.cooldown[shooters])  # the part of the sub-step already spent
            self.hp[shooters[self.is_baneling[shooters]]] = 0.0  # a Baneling dies bursting

        # healing (Medivacs), regeneration, energy
        heal = in_range & self.is_medivac & alive & (self.energy > 0)
        if heal.any():
            h = np.flatnonzero(heal)
            t = tgt[h]
            ok_t = self.bio[t] & (self.hp[t] < self.hp_max[t]) & alive[t]
            amount = np.minimum(0.5625 * dt, self.hp_max[t] - self.hp[t]) * ok_t
            np.add.at(self.hp, t, amount)
            self.energy[h] -= amount / 3.0
        self.quiet += dt
        self.sh = np.where((self.quiet >= 160) & alive, np.minimum(self.sh + 0.125 * dt, self.sh_max), self.sh)
        self.hp = np.where(self.regen & alive & (self.hp > 0),
                           np.minimum(self.hp + 0.01709 * dt, self.hp_max), self.hp)
        self.energy = np.where(self.is_medivac, np.minimum(self.energy + 0.03516 * dt, 200.0), 0.0)
        died = alive & (self.hp <= 0)
        self.hp[died] = 0.0
        self.sh[died] = 0.0
        self.alive = alive & ~died

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
        avail[:, 6:] = (self.alive[na:][None, :] & (d <= SHOOT))
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
            self._onehots[key] = (np.eye(bits, dtype=np.float32)[idx] if bits
                                  else np.zeros((len(idx), 0), np.float32))
        return self._onehots[key]

    def get_obs(self):
        if self._cache_ok("obs"):
            return list(self._cache["obs"])
        na, ne = self.n_agents, self.n_enemies
        avail = self._avail()
        p = self.pos
        alive_a, alive_e = self.alive[:na], self.alive[na:]
        # enemies
        rel = p[na:][None, :, :] - p[:na][:, None, :]  # [na, ne, 2]
        d = np.sqrt((rel ** 2).sum(-1))
        vis = alive_e[None, :] & (d < SIGHT) & alive_a[:, None]
        cols = [avail[:, 6:].astype(np.float32), d / SIGHT, rel[..., 0] / SIGHT, rel[..., 1] / SIGHT]
        if self.obs_all_health:
            cols.append(np.broadcast_to(self.hp[na:] / self.hp_max[na:], (na, ne)))
            if self.shield_bits_enemy:
                cols.append(np.broadcast_to(self.sh[na:] / self.sh_max[na:], (na, ne)))
        en = np.concatenate([np.stack(cols, -1),
                             np.broadcast_to(self._onehot(self.enemy_type, self.unit_type_bits)[None],
                                             (na, ne, self.unit_type_bits))], -1)
        en = (en * vis[..., None]).astype(np.float32)
        # allies
        o = self._others  # [na, na-1]
        rel_a = p[o] - p[:na][:, None, :]
        d_a = np.sqrt((rel_a ** 2).sum(-1))
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
        obs = np.concatenate([avail[:, 2:6].astype(np.float32), en.reshape(na, -1), al.reshape(na, -1),
                              np.concatenate(own, -1).astype(np.float32)], -1).astype(np.float32)
        obs[~alive_a] = 0.0
        if self.obs_timestep_number:  # SMAC appends the time after the blocks (its size quirk)
            obs = np.concatenate([obs, np.full((na, 1), self._episode_steps / self.episode_limit,
                                               np.float32)], -1)
        self._store("obs", obs)
        return list(obs)

    def get_obs_agent(self, agent_id):
        return self.get_obs()[agent_id]

    def get_obs_size(self):
        return self.obs_size

    def get_state(self):
        if self.obs_instead_of_state:
            return np.concatenate(self.get_obs()).astype(np.float32)
        na = self.n_agents
        cx = cy = 16.0
        a_cols = [self.hp[:na] / self.hp_max[:na],
                  np.where(self.is_medivac[:na], self.energy[:na] / 200.0, self.cooldown[:na] / self.max_cd[:na]),
                  (self.pos[:na, 0] - cx) / self.max_distance_x, (self.pos[:na, 1] - cy) / self.max_distance_y]
        if self.shield_bits_ally:
            a_cols.append(self.sh[:na] / self.sh_max[:na])
        allies = np.concatenate([np.stack(a_cols, -1), self._onehot(self.ally_type, self.unit_type_bits)], -1)
        allies[~self.alive[:na]] = 0
        e_cols = [self.hp[na:] / self.hp_max[na:], (self.pos[na:, 0] - cx) / self.max_distance_x,
                  (self.pos[na:, 1] - cy) / self.max_distance_y]
        if self.shield_bits_enemy:
            e_cols.append(self.sh[na:] / self.sh_max[na:])
        enemies = np.concatenate([np.stack(e_cols, -1), self._onehot(self.enemy_type, self.unit_type_bits)], -1)
        enemies[~self.alive[na:]] = 0
        parts = [allies.reshape(-1), enemies.reshape(-1)]
        if self.state_last_action:
            parts.append(self.last_action.reshape(-1))
        if self.state_timestep_number:
            parts.append(np.array([self._episode_steps / self.episode_limit]))
        return np.concatenate(parts).astype(np.float32)

    def get_state_size(self):
        if self.obs_instead_of_state:
            return self.obs_size * self.n_agents
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
        return (~self.alive[:self.n_agents]).astype(np.int64).tolist()

    def get_stats(self):
        return {"battles_won": self.battles_won, "battles_game": self.battles_game,
                "battles_draw": self.timeouts, "timeouts": self.timeouts, "restarts": self.force_restarts,
                "win_rate": self.battles_won / self.battles_game if self.battles_game else 0.0}

    def get_env_info(self):
        info = {"state_shape": self.get_state_size(), "obs_shape": self.obs_size,
                "n_actions": self.n_actions, "n_agents": self.n_agents, "n_enemies": self.n_enemies,
                "episode_limit": self.episode_limit,
                "agent_features": self.ally_state_attr_names(), "enemy_features": self.enemy_state_attr_names()}
        if not self.obs_timestep_number:
            info["obs_entities"] = [
                {"name": "move", "count": 1, "dim": 4},
                {"name": "enemies", "count": self.n_enemies, "dim": self.nf_en},
                {"name": "allies", "count": self.n_agents - 1, "dim": self.nf_al},
                {"name": "own", "count": 1, "dim": self.own_feats}]
            info["action_entities"] = {"group": "enemies", "first_action": 6}
        return info

    def ally_state_attr_names(self):
        names = ["health", "energy/cooldown", "rel_x", "rel_y"] + ["shield"] * self.shield_bits_ally
        return names + [f"type_{i}" for i in range(self.unit_type_bits)]

    def enemy_state_attr_names(self):
        names = ["health", "rel_x", "rel_y"] + ["shield"] * self.shield_bits_enemy
        return names + [f"type_{i}" for i in range(self.unit_type_bits)]

    # --- SMAC's helper methods ---------------------------------------------------------------
    def get_obs_move_feats_size(self):
        return 4

    def get_obs_enemy_feats_size(self):
        return self.n_enemies, self.nf_en

    def get_obs_ally_feats_size(self):
        return self.n_agents - 1, self.nf_al

    def get_obs_own_feats_size(self):
        return self.own_feats

    def get_unit_by_id(self, a_id):
        """A view of agent a_id with SMAC's field names (health, shield, pos.x, ...)."""
        return UnitView(self, a_id)

    def unit_shoot_range(self, agent_id):
        return SHOOT

    def unit_sight_range(self, agent_id):
        return SIGHT

    def render(self, pos=None, alive=None):
        """An RGB image [256, 256, 3] of the battle: agents blue, enemies red, terrain grey."""
        pos = self.pos if pos is None else pos
        alive = self.alive if alive is None else alive
        scale = 8
        img = np.where(self.grid.T[::-1, :, None], 200, 90).astype(np.uint8).repeat(scale, 0).repeat(scale, 1)
        img = np.repeat(img, 3, axis=2) if img.shape[2] == 1 else img
        yy, xx = np.mgrid[0:256, 0:256]
        for i in np.flatnonzero(alive):
            cx, cy = pos[i, 0] * scale, (32 - pos[i, 1]) * scale
            disc = (xx - cx) ** 2 + (yy - cy) ** 2 <= (self.radius[i] * scale) ** 2
            img[disc] = (40, 90, 230) if self.team[i] == 0 else (220, 50, 40)
        return img

    def save_replay(self):
        """Writes the last finished episode (else the current one) as an animated GIF to
        replay_dir (default results/replays); returns the path."""
        import os
        import time

        from PIL import Image
        trace = self._last_trace or self._trace
        if not trace:
            return None
        folder = self.replay_dir or os.path.join("results", "replays")
        os.makedirs(folder, exist_ok=True)
        name = f"{self.replay_prefix or self.map_name}_{time.strftime('%Y%m%d-%H%M%S')}.gif"
        path = os.path.join(folder, name)
        frames = [Image.fromarray(self.render(p, a)) for p, a in trace]
        frames[0].save(path, save_all=True, append_images=frames[1:], duration=150, loop=0)
        return path

    def close(self):
        pass
