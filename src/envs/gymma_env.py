"""Any Gymnasium-registered multi-agent env as a MultiAgentEnv: the convention of Level-Based
Foraging (lbforaging) and the Multi-Robot Warehouse (rware), which EPyMARL calls "gymma". The
env's spaces are Tuples with one entry per agent; step() gives a list of per-agent rewards and
one done flag (or one per agent).

    env_args.key=lbforaging:Foraging-8x8-2p-3f-v3     (module:id imports the module first)
    env_args.key=rware:rware-tiny-2ag-v2

Observations are flattened and zero-padded to the largest agent's size; the state is all of
them concatenated (as in EPyMARL). Every action is available (invalid moves are no-ops in these
envs, and EPyMARL's published figures were produced that way). An episode ends when the env says
done or after time_limit steps. The step at the time limit (the env's own step limit included)
ends the return, as in EPyMARL, whose wrapper reports it as a termination to every algorithm
(time_limit_terminal=True); with time_limit_terminal=False it is reported as a time-limit cut,
which the learner bootstraps through when time_limit_bootstrap=True."""

import importlib

import numpy as np

from envs.multiagentenv import PerAgentSpacesEnv, noop_only, team_reward
from utils.errors import ConfigError, first_line
from utils.registry import unknown_name_message

WRAPPER_KEYS = {"key", "time_limit", "time_limit_terminal", "seed", "common_reward", "reward_scalarisation"}
PACKAGES = {"lbforaging": "lbforaging", "rware": "rware"}  # module -> PyPI name


def _gym():
    import gymnasium

    return gymnasium


def resolve_key(key):
    """-> the Gymnasium id; imports the module of a "module:id" key."""
    if not key:
        raise ConfigError(
            "env_args.key is empty: name a Gymnasium env id, e.g. "
            "env_args.key=lbforaging:Foraging-8x8-2p-3f-v3 or env_args.key=rware:rware-tiny-2ag-v2"
        )
    module, _, env_id = key.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError:
            package = PACKAGES.get(module.split(".")[0], module.split(".")[0])
            raise ConfigError(
                f"env_args.key={key!r} needs the package {package!r}: pip install {package} "
                "(requirements.txt pins it)"
            ) from None
    registry = _gym().registry
    if env_id not in registry:
        prefix = module.split(".")[0] if module else ""
        choices = [
            k for k, spec in registry.items() if not prefix or str(spec.entry_point).startswith(prefix)
        ]
        raise ConfigError(
            unknown_name_message("Gymnasium env id (env_args.key)", env_id, choices or registry)
        )
    return env_id


def own_step_limit(env):
    """The step limit the env enforces itself, where it says so."""
    for name in ("_max_episode_steps", "max_steps", "max_episode_steps"):
        value = getattr(env.unwrapped, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    spec = getattr(env, "spec", None)
    return getattr(spec, "max_episode_steps", None) or None


def validate_env_args(env_args):
    env_id = resolve_key(env_args.get("key"))
    limit = env_args.get("time_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"env_args.time_limit={limit!r} must be a positive integer (steps) or null")
    if env_args.get("reward_scalarisation") not in ("sum", "mean"):
        raise ConfigError(
            f"env_args.reward_scalarisation={env_args.get('reward_scalarisation')!r}"
            " is not valid; valid choices: sum, mean"
        )
    GymmaEnv(**env_args).close()  # the env judges its own kwargs; spaces are checked here
    return env_id


class GymmaEnv(PerAgentSpacesEnv):
    rng_attribute = "_np_random"  # behind gymnasium's Env.np_random, which would make one if absent

    possible_step_fields = ("pos",)

    @property
    def step_fields(self):
        raw = self.env.unwrapped
        return ("pos",) if hasattr(raw, "players") or hasattr(raw, "agents") else ()

    def get_step_fields(self, names):
        raw = self.env.unwrapped
        if hasattr(raw, "players"):  # LBF: (row, col) grid cells
            cells = [p.position for p in raw.players]
        else:  # RWARE: agents with x, y
            cells = [(a.x, a.y) for a in raw.agents]
        return {"pos": np.array(cells, dtype=np.float32)}

    def __init__(self, **env_args):
        env_id = resolve_key(env_args.get("key"))
        self.time_limit_terminal = env_args.get("time_limit_terminal", True)
        if not isinstance(self.time_limit_terminal, bool):
            raise ConfigError(
                f"env_args.time_limit_terminal={self.time_limit_terminal!r} is not valid; "
                "valid choices: True, False"
            )
        kwargs = {k: v for k, v in env_args.items() if k not in WRAPPER_KEYS}
        try:
            self.env = _gym().make(env_id, disable_env_checker=True, **kwargs)
        except Exception as e:  # third-party code: one line naming what was given
            given = kwargs or "its defaults"
            raise ConfigError(f"{env_id} cannot be built with {given}: {first_line(e)}") from None
        self.key = env_args["key"]
        act, obs = self.env.action_space, self.env.observation_space
        if not (hasattr(act, "spaces") and hasattr(obs, "spaces")):
            raise ConfigError(
                f"{env_id} is not a multi-agent env of this kind: its action and observation spaces "
                f"must be Tuples with one entry per agent (got {act} and {obs})"
            )
        if not all(hasattr(s, "n") for s in act.spaces):
            raise ConfigError(
                f"{env_id}: only discrete (Discrete) per-agent actions are supported, got {act}"
            )
        self.n_agents = len(act.spaces)
        self.agent_action_sizes = [int(s.n) for s in act.spaces]
        self.n_actions = max(self.agent_action_sizes)
        self.obs_sizes = [int(np.prod(s.shape)) for s in obs.spaces]
        self.obs_size = max(self.obs_sizes)
        self.common_reward = env_args.get("common_reward", True)
        self.reward_scalarisation = env_args.get("reward_scalarisation", "sum")
        self.own_limit = own_step_limit(self.env)
        self.episode_limit = env_args.get("time_limit") or self.own_limit
        if not self.episode_limit:
            raise ConfigError(f"{env_id} sets no step limit of its own: set env_args.time_limit")
        # the step that is a time-limit cut: ours, or the env's own if that comes first
        self._cut_step = min(self.episode_limit, self.own_limit or self.episode_limit)
        self._seed = env_args.get("seed")
        self._seeded = False
        self._avail = np.zeros((self.n_agents, self.n_actions), dtype=np.uint8)
        for i, n in enumerate(self.agent_action_sizes):
            self._avail[i, :n] = 1
        self._obs = np.zeros((self.n_agents, self.obs_size), dtype=np.float32)
        self._indi_terminated = np.zeros(self.n_agents, dtype=np.uint8)
        self._steps = 0

    def _set_obs(self, obs):
        self._obs[:] = 0
        for i, o in enumerate(obs):
            o = np.asarray(o, dtype=np.float32).reshape(-1)
            self._obs[i, : o.size] = o

    def reset(self):
        seed = None if self._seeded else self._seed
        self._seeded = True
        obs, _ = self.env.reset(seed=seed)
        self._set_obs(obs)
        self._indi_terminated[:] = 0
        self._steps = 0
        return self.get_obs(), self.get_state()

    def step(self, actions):
        actions = [int(a) for a in np.asarray(actions).reshape(-1)[: self.n_agents]]
        obs, rewards, done, truncated, _ = self.env.step(actions)
        self._steps += 1
        self._set_obs(obs)
        rewards = np.asarray(rewards, dtype=np.float32).reshape(-1)
        if rewards.size != self.n_agents:
            raise RuntimeError(f"{self.key}: step() gave {rewards.size} rewards for {self.n_agents} agents")
        per_agent_done = np.asarray(done, dtype=bool).reshape(-1)
        all_done, all_truncated = bool(per_agent_done.all()), bool(np.all(truncated))
        at_limit = self._steps >= self._cut_step
        cut = (at_limit or (all_truncated and not all_done)) and not self.time_limit_terminal
        if not cut:
            # agents the env reports done before the end are terminated (they act no more)
            self._indi_terminated[np.broadcast_to(per_agent_done, (self.n_agents,))] = 1
        finished = all_done or all_truncated or at_limit
        info = {"episode_limit": finished and cut}
        if self.common_reward:
            return team_reward(rewards, self.reward_scalarisation), finished, info
        return rewards, finished, info

    def get_obs(self):
        return self._obs.copy()

    def get_state(self):
        return self._obs.reshape(-1).copy()

    def get_avail_actions(self):
        return noop_only(self._avail.copy(), self._indi_terminated)

    def get_stats(self):
        return {}

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()

    def seed(self, seed=None):
        self._seed, self._seeded = seed, False
