"""Google Research Football (gfootball 2.10.2) behind our env contract.

    --env-config=gfootball with env_args.map_name=academy_3_vs_1_with_keeper

gfootball is imported only when this env is chosen; `bash install_grf.sh` builds and installs it.
We drive its FootballEnv on the raw representation and convert observations ourselves: its gym
wrappers break under gym 0.26 (reset's return, env.seed), and the raw form gives the same
Simple115 vectors through Simple115StateWrapper.convert_observation. Each step goes to the engine
core as FootballEnv.step would send it, and the per-player observations are views of the core's
(FootballEnv deep-copies every observation twice a step for each player: a fifth of the time).

What the scenario decides, read from its build_scenario (Config(...).ScenarioConfig()), unless
given: n_agents = its controllable left players (or, with n_agents=attackers, those that start in
the opponent's half: CDS's and DIFFER's choice, 3 on 3 vs 1, 4 on counterattack_hard);
episode_limit = its game_duration.

Choices (env_args), with the peers' settings named:
- obs: simple115 (PyMARL2's: each agent's own Simple115 vector, players listed as the team has
  them), simple115v2 (players at fixed slots), relative (the per-agent relative layout of CDS's
  academy wrappers: the agent's player, its teammates and the opponents relative to it, the ball).
  The state: all agents' observations for simple115*, absolute positions for relative.
- reward: score (the team's score change, +1 for a goal, -1 conceded, counted once), summed
  (PyMARL2's: each controlled player's reward added up, a goal is +n_agents), cds (CDS's academy
  wrappers: 100 for a goal, -1 on any other end).
- checkpoints: gfootball's dense "checkpoints" reward added (its rewards='scoring,checkpoints', the
  MAPPO and RLlib GRF setting): an agent whose player holds the ball earns 0.1 for each of 10
  zones it has newly brought the ball into on the way to the opponent's goal (distance from 0.99
  down to 0.19), at most once per zone and episode, and a goal pays its unearned zones. Each
  agent earns its own (keyed by agent, as gfootball keys them); the team reward adds their mean
  (score; cds is refused) or their sum (summed, PyMARL2's sum of the players' rewards).
- own_half_end: the episode ends (terminated) when the ball or one of the team's last n_agents
  players is in its own half, as CDS's and DIFFER's academy wrappers end it.
- Every agent is terminated together at a true end (DIFFER's indi_terminated for GRF: no player
  dies); a time-limit cut is reported as info["episode_limit"] unless time_limit_terminal=True
  (PyMARL2 and CDS treat it as an end).
- seed: each episode's engine seed is drawn from the env's own generator (seeded from the run's
  seed; parallel workers get their own), so runs repeat, workers differ, and a checkpoint resumes
  the same episodes. gfootball itself draws it from Python's global `random`.
"""

import warnings

import numpy as np

from envs.multiagentenv import MultiAgentEnv
from utils.errors import ConfigError, first_line
from utils.seeding import generator_from_state, generator_state

INSTALL = (
    "install it with `bash install_grf.sh` (apt packages, then an ~8 min build; see docs/environments.md)"
)
OBS_CHOICES = ("simple115", "simple115v2", "relative")
REWARD_CHOICES = ("score", "summed", "cds")
DEFAULTS = {
    "map_name": "academy_3_vs_1_with_keeper",
    "n_agents": None,
    "time_limit": None,
    "obs": "simple115",
    "reward": "score",
    "checkpoints": False,
    "own_half_end": False,
    "time_limit_terminal": False,
    "seed": None,
}
WRAPPER_KEYS = {"common_reward", "reward_scalarisation"}  # the framework's; one team reward here
NORMAL_MODE = 0  # e_GameMode_Normal
CHECKPOINTS, CHECKPOINT_REWARD = 10, 0.1  # gfootball's checkpoint zones and their reward


def load_gfootball():
    """-> (config module, football_env module), or ConfigError naming the install command."""
    try:
        import gfootball_engine  # noqa: F401  the compiled engine
        from gfootball.env import config, football_env
    except ImportError as e:
        if (getattr(e, "name", "") or "").split(".")[0] in ("gfootball", "gfootball_engine"):
            raise ConfigError(
                f"--env-config=gfootball needs Google Research Football, which is not installed: {INSTALL}"
            ) from None
        raise ConfigError(
            f"gfootball is installed but does not import ({first_line(e)}): {INSTALL}"
        ) from None
    return config, football_env


def scenario_names():
    import pkgutil

    import gfootball.scenarios as scenarios

    # its tests/ subpackage is not a scenario
    return sorted(m.name for m in pkgutil.iter_modules(scenarios.__path__) if not m.ispkg)


def scenario_facts(map_name):
    """{controllable, game_duration, left, right, deterministic} of a scenario, from its own
    build_scenario."""
    config, _ = load_gfootball()
    names = scenario_names()
    if map_name not in names:
        from utils.registry import unknown_name_message

        raise ConfigError(unknown_name_message("env_args.map_name (gfootball scenario)", map_name, names))
    sc = config.Config({"level": map_name, "players": []}).ScenarioConfig()
    return {
        "controllable": int(sc.controllable_left_players),
        # left players that start in the opponent's half: the players CDS and DIFFER give agents
        "attackers": sum(1 for p in sc.left_team if p.position[0] > 0 and p.controllable),
        "game_duration": int(sc.game_duration),
        "left": len(sc.left_team),
        "right": len(sc.right_team),
        "deterministic": bool(sc.deterministic),
    }


def _positive_int_or_none(key, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"env_args.{key}={value!r} must be a positive integer or null (the scenario's)")


def validate_env_args(env_args):
    load_gfootball()
    unknown = sorted(set(env_args) - set(DEFAULTS) - WRAPPER_KEYS)
    if unknown:
        raise ConfigError(
            f"env_args.{unknown[0]} is not a gfootball argument; valid: {', '.join(sorted(DEFAULTS))}"
        )
    args = {**DEFAULTS, **{k: v for k, v in env_args.items() if k not in WRAPPER_KEYS}}
    if args["obs"] not in OBS_CHOICES:
        raise ConfigError(
            f"env_args.obs={args['obs']!r} is not valid; valid choices: {', '.join(OBS_CHOICES)}"
        )
    if args["reward"] not in REWARD_CHOICES:
        raise ConfigError(
            f"env_args.reward={args['reward']!r} is not valid; valid choices: {', '.join(REWARD_CHOICES)}"
        )
    for key in ("checkpoints", "own_half_end", "time_limit_terminal"):
        if not isinstance(args[key], bool):
            raise ConfigError(f"env_args.{key}={args[key]!r} is not valid; valid choices: True, False")
    if args["checkpoints"] and args["reward"] == "cds":
        raise ConfigError(
            "env_args.checkpoints=True does not go with env_args.reward=cds (CDS's reward has no "
            "checkpoints); valid with reward: score, summed"
        )
    if args["n_agents"] != "attackers":
        _positive_int_or_none("n_agents", args["n_agents"])
    _positive_int_or_none("time_limit", args["time_limit"])
    facts = scenario_facts(args["map_name"])
    if args["n_agents"] == "attackers" and not facts["attackers"]:
        raise ConfigError(
            f"env_args.n_agents=attackers: {args['map_name']} has no player in the opponent's half"
        )
    if isinstance(args["n_agents"], int) and args["n_agents"] > facts["controllable"]:
        raise ConfigError(
            f"env_args.n_agents={args['n_agents']} is more than {args['map_name']}'s "
            f"{facts['controllable']} controllable players"
        )
    return facts


def relative_obs(raw, player, n_team):
    """The relative layout for the agent controlling left player `player`: its position, the other
    team players' positions relative to it, its direction, theirs, the opponents' positions
    relative to it and their directions, the ball's (x, y) relative to it, its height and its
    direction. The team: the last n_team left players (CDS's "our players")."""
    left, left_dir = raw["left_team"], raw["left_team_direction"]
    team = list(range(len(left) - n_team, len(left)))
    others = [p for p in team if p != player] if player in team else team[1:]
    me = left[player]
    return np.concatenate(
        [
            me,
            (left[others] - me).reshape(-1),
            left_dir[player],
            left_dir[others].reshape(-1),
            (raw["right_team"] - me).reshape(-1),
            raw["right_team_direction"].reshape(-1),
            raw["ball"][:2] - me,
            raw["ball"][2:3],
            raw["ball_direction"],
        ]
    ).astype(np.float32)


def absolute_state(raw, n_team):
    left = slice(len(raw["left_team"]) - n_team, None)
    return np.concatenate(
        [
            raw["left_team"][left].reshape(-1),
            raw["left_team_direction"][left].reshape(-1),
            raw["right_team"].reshape(-1),
            raw["right_team_direction"].reshape(-1),
            raw["ball"],
            raw["ball_direction"],
        ]
    ).astype(np.float32)


class GFootballEnv(MultiAgentEnv):
    def __init__(self, **env_args):
        facts = validate_env_args(env_args)
        args = {**DEFAULTS, **{k: v for k, v in env_args.items() if k not in WRAPPER_KEYS}}
        config, football_env = load_gfootball()
        from gfootball.env import wrappers

        self._simple115 = wrappers.Simple115StateWrapper.convert_observation
        self.map_name = args["map_name"]
        self.facts = facts
        n = args["n_agents"]
        self.n_agents = facts["attackers"] if n == "attackers" else (n or facts["controllable"])
        if self.n_agents < facts["controllable"]:
            warnings.warn(
                f"gfootball {self.map_name}: {self.n_agents} agents for {facts['controllable']} "
                "controllable players, so the engine picks which player each agent controls and "
                "changes it during an episode (the agents do not keep one player each; with "
                "fewer agents than players the ball carrier may be uncontrolled at the start)",
                stacklevel=2,
            )
        self.episode_limit = args["time_limit"] or facts["game_duration"]
        self.obs_form, self.reward_form = args["obs"], args["reward"]
        self.own_half_end = args["own_half_end"]
        self.checkpoints = args["checkpoints"]
        self._zones = np.zeros(self.n_agents, dtype=np.int64)  # checkpoint zones collected
        self.time_limit_terminal = args["time_limit_terminal"]
        self._config = config.Config(
            {"level": self.map_name, "players": [f"agent:left_players={self.n_agents}"]}
        )
        self.env = football_env.FootballEnv(self._config)
        from gfootball.env import constants

        self._exposed = sorted(constants.EXPOSED_OBSERVATIONS)
        players = self.env._players
        if len(players) != 1 or players[0] is not self.env._agent or players[0].can_play_right():
            raise RuntimeError("gfootball: expected one agent player on the left team")
        self.n_actions = (
            int(self.env.action_space.nvec[0]) if self.n_agents > 1 else int(self.env.action_space.n)
        )
        self._seed = args["seed"]
        self.rng = np.random.default_rng(self._seed)
        self._raw = None
        self._steps = 0
        self._terminated = np.zeros(self.n_agents, dtype=np.uint8)
        self.episode_seed = None
        before = self.rng.bit_generator.state
        self.reset()  # for the sizes; the first episode is still the seed's first
        self.rng.bit_generator.state = before
        self._obs_size = len(self.get_obs()[0])
        self._state_size = len(self.get_state())

    # --- episodes -------------------------------------------------------------------------------
    def reset(self):
        seed = int(self.rng.integers(0, 2**31 - 1))
        self.episode_seed = seed
        # gfootball takes these from the config when they are there, else from `random`
        self._config.update({"game_engine_random_seed": seed, "reverse_team_processing": bool(seed % 2)})
        self._raw = self.env.reset()
        self._steps = 0
        self._terminated[:] = 0
        self._goal = self._conceded = 0
        self._zones[:] = 0
        if self.own_half_end and self._in_own_half():
            raise ConfigError(
                f"env_args.own_half_end=True ends every {self.map_name} episode at once with "
                f"n_agents={self.n_agents}: of the team's last {self.n_agents} players some start "
                "in their own half (CDS and DIFFER watch the attackers only: e.g. n_agents=4 on "
                "academy_counterattack_hard, 3 on academy_3_vs_1_with_keeper)"
            )
        return self.get_obs(), self.get_state()

    def _in_own_half(self):
        raw = self._raw[0]
        team = raw["left_team"][len(raw["left_team"]) - self.n_agents :]
        return bool(raw["ball"][0] < 0 or (team[:, 0] < 0).any())

    def step(self, actions):
        actions = [int(a) for a in np.asarray(actions).reshape(-1)[: self.n_agents]]
        self._raw, rewards, engine_done, _ = self._engine_step(actions)
        self._steps += 1
        raw = self._raw[0]
        score = float(np.asarray(rewards).reshape(-1)[0])  # every controlled player gets the same
        self._goal += score > 0
        self._conceded += score < 0
        played_out = raw["game_mode"] != NORMAL_MODE or score != 0
        engine_time_up = engine_done and raw["steps_left"] <= 0 and not played_out
        true_end = (engine_done and not engine_time_up) or (self.own_half_end and self._in_own_half())
        ended = true_end or engine_time_up or self._steps >= self.episode_limit
        cut = ended and not true_end and not self.time_limit_terminal
        if ended and not cut:
            self._terminated[:] = 1
        info = {"episode_limit": cut}
        if ended:
            info.update(
                goal=int(self._goal > 0), conceded=int(self._conceded > 0), battle_won=int(self._goal > 0)
            )
        return self._reward(score, ended), ended, info

    def _engine_step(self, actions):
        """FootballEnv.step(actions) for its one agent player on the left: the actions go to the
        core as its _get_actions forms them (the player's list, nothing flipped), and the result
        is the same (per-player observations, rewards, done, info), with each player's
        observation a view of the core's fresh one instead of two deep copies of it."""
        env = self.env  # its agent player's stored action is read only by _get_actions: not set
        obs, reward, done, info = env._env.step(list(actions))
        env._cached_observation = None  # FootballEnv.observation() reads the new step
        info["score_reward"] = reward
        return self._players_view(obs), np.full(self.n_agents, reward, dtype=np.float32), done, info

    def _players_view(self, obs):
        """FootballEnv's observation of each controlled left player (its _convert_observations),
        sharing the core's arrays: the core makes a new observation every step, and nothing
        here writes to one."""
        shared = {key: obs[key] for key in self._exposed}
        controlled, sticky = obs["left_agent_controlled_player"], obs["left_agent_sticky_actions"]
        views = []
        for x in range(self.n_agents):
            o = dict(shared, designated=obs["left_team_designated_player"])
            if x < len(controlled):
                o["active"], o["sticky_actions"] = controlled[x], np.array(sticky[x])
            else:
                o["active"], o["sticky_actions"] = -1, []
            if "frame" in obs:
                o["frame"] = obs["frame"]
            views.append(o)
        return views

    def _reward(self, score, ended):
        bonus = self._checkpoint_bonus(score) if self.checkpoints else np.zeros(self.n_agents)
        if self.reward_form == "score":
            return score + float(bonus.mean())
        if self.reward_form == "summed":
            return float((score + bonus).sum())
        return 100.0 if score > 0 else -float(ended)

    def _checkpoint_bonus(self, score):
        """Each agent's checkpoint reward this step (its zones newly reached with the ball, 0.1 a
        zone; all unearned zones on a goal) from the raw observations just received."""
        before = self._zones.copy()
        if score > 0:
            self._zones[:] = CHECKPOINTS
        else:
            for i, o in enumerate(self._raw[: self.n_agents]):
                if o["ball_owned_team"] != 0 or o["ball_owned_player"] != o["active"]:
                    continue
                d = float(np.hypot(o["ball"][0] - 1.0, o["ball"][1]))
                # zone k is reached at distance <= 0.99 - 0.8 k / 9; count those passed, in order
                while self._zones[i] < CHECKPOINTS and d <= 0.99 - 0.8 / (CHECKPOINTS - 1) * self._zones[i]:
                    self._zones[i] += 1
        return CHECKPOINT_REWARD * (self._zones - before)

    # --- what the agents see ----------------------------------------------------------------------
    def get_obs(self):
        if self.obs_form == "relative":
            return [relative_obs(o, max(int(o["active"]), 0), self.n_agents) for o in self._raw]
        return list(self._simple115(self._raw, self.obs_form == "simple115v2"))

    def get_obs_size(self):
        return self._obs_size

    def get_state(self):
        if self.obs_form == "relative":
            return absolute_state(self._raw[0], self.n_agents)
        return np.concatenate(self.get_obs()).astype(np.float32)

    def get_state_size(self):
        return self._state_size

    def get_avail_actions(self):
        return [[1] * self.n_actions for _ in range(self.n_agents)]

    def get_total_actions(self):
        return self.n_actions

    def get_indi_terminated(self):
        return self._terminated.copy()

    def controlled_players(self):
        """The left player each agent controls now."""
        return [int(o["active"]) for o in self._raw]

    def get_rng_state(self):
        return {"rng": generator_state(self.rng)}

    def set_rng_state(self, state):
        self.rng = generator_from_state(state["rng"])

    def seed(self, seed=None):
        self._seed = seed
        self.rng = np.random.default_rng(seed)

    def get_stats(self):
        return {}

    def render(self):
        raise NotImplementedError("gfootball frames need its rendering build; not wired here")

    def close(self):
        self.env.close()

    def get_env_info(self):
        info = super().get_env_info()
        info["scenario"] = dict(self.facts, map_name=self.map_name)
        return info
