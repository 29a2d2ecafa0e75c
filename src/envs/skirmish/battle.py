"""The battle of skirmish: units, their orders, the simulation of every game loop, the end of an
episode and SMAC's reward. The encodings (SMAC's in encoding.py, SMACv2's in v2.py) turn it into
observations, states and available actions; the versions (env.py, v2.py) say which units meet
where, through two hooks that the one set-up (Battle.__init__) calls."""

import math

import numpy as np

from envs.skirmish import render, sim
from envs.skirmish.api import _Units
from envs.skirmish.args import REWARD_OPTIONS, SIM_DEFAULTS, WRAPPER_KEYS
from envs.skirmish.maps import LOOPS, UNITS
from utils.seeding import generator_state, set_generator_state

JITTER_LOOPS = (-1, 2)  # SC2 varies each cooldown by a whole number of loops in this range


class Battle:
    """Set-up and play of one battle. A version supplies DEFAULTS (its constructor keywords),
    _arguments (validation), _set_up_battle (map, teams, unit tables, orders, random streams:
    it calls _set_teams) and _set_up_encoding (observation and state sizes)."""

    DEFAULTS = {}
    _clip_reward = False  # reward_only_positive as SMAC v1: |reward|

    def __init__(self, **kwargs):
        sim.say_if_compiling()
        args = self._arguments(kwargs)
        for k, v in self.DEFAULTS.items():
            setattr(self, "_seed" if k == "seed" else k, args.get(k, v))
        # attack_jitter, builtin_agents, obs_starcraft
        for k, v in {**SIM_DEFAULTS, **REWARD_OPTIONS}.items():
            setattr(self, k, bool(args.get(k, v)))
        self._move_amount = self.move_amount
        if self.obs_all_health:
            self.obs_own_health = True
        self.map_x = self.map_y = self.max_distance_x = self.max_distance_y = 32
        self.n_actions_move, self.n_obs_pathing, self.n_obs_height = 4, 8, 9
        self._set_up_battle(args)
        self._set_up_encoding()
        na = self.n_agents
        self.battles_won = self.battles_game = self.timeouts = self.force_restarts = 0
        self._episode_count = self._total_steps = self._episode_steps = 0
        self.reward = 0
        self.last_action = np.zeros((na, self.n_actions), dtype=np.float32)
        self._trace, self._last_trace = [], []  # positions per step of this / the last episode
        self._probe_dirs = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]], dtype=np.float64)[None]
        self.agents, self.enemies = _Units(self, 0, na), _Units(self, na, self.n_enemies)
        self.reset()

    def _arguments(self, kwargs):
        """The constructor's keywords, validated, without the wrapper's own (common_reward...)."""
        return {k: v for k, v in kwargs.items() if k not in WRAPPER_KEYS}

    def _set_up_battle(self, args):
        raise NotImplementedError

    def _set_up_encoding(self):
        raise NotImplementedError

    def _set_teams(self, n_agents, n_enemies):
        """Team sizes and the index tables that follow from them."""
        self.n_agents, self.n_enemies = na, ne = n_agents, n_enemies
        self.n = na + ne
        self.team = np.array([0] * na + [1] * ne)
        self._others = np.array(
            [[j for j in range(na) if j != i] for i in range(na)], dtype=np.int64
        ).reshape(na, na - 1)

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

    # --- episode ----------------------------------------------------------------------------
    def _new_battle(self):
        """Per-episode set-up before the units appear."""

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
        self._last_seen = self.pos.copy()
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
        self._last_seen[self.alive] = self.pos[self.alive]  # the dead stay where last observed
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
        """Whether a side has lost with Medivacs alone left (the version's rule; none here)."""
        return False

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
        if self.reward_kills_deaths:  # ICES: kills and deaths only (reward_only_positive is False)
            return float(d_deaths)
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

    @property
    def seen_pos(self):
        """Positions as SMAC reads them: StarCraft II sends float32, and SMAC's int() and range
        tests on them can come out otherwise than on float64 at an edge; a unit that died keeps
        the position it was last observed at (SMAC keeps the last unit it saw, health set to 0:
        SMACv2's EPO tags a dead enemy within sight of it)."""
        pos = np.where(self.alive[:, None], self.pos, self._last_seen)
        return pos.astype(np.float32).astype(np.float64)

    def _cache_ok(self, key):
        return self._cache is not None and key in self._cache

    def _store(self, key, value):
        if self._cache is None:
            self._cache = {}
        self._cache[key] = value

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

    def seed(self, seed=None):
        """The env's seed (SMAC's seed()); seed(s) restarts the random number stream from s."""
        if seed is not None:
            self._seed = seed
            self.rng = np.random.default_rng(seed)
        return self._seed

    def _random_streams(self):
        return {"engine": self.rng}

    def get_rng_state(self):
        return {k: generator_state(g) for k, g in self._random_streams().items()}

    def set_rng_state(self, state):
        for k, g in self._random_streams().items():
            set_generator_state(g, state[k])

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
