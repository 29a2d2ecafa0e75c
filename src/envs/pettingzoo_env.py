"""Any PettingZoo parallel env as a MultiAgentEnv; mpe2 scenarios are chosen by name."""

import importlib
import inspect
import pkgutil

import numpy as np

from envs.multiagentenv import PerAgentSpacesEnv, action_layout, noop_only, team_reward
from utils.errors import ConfigError, first_line
from utils.registry import unknown_name_message
from utils.values import coerce

# env_args keys this wrapper consumes; all others go to the scenario's constructor.
WRAPPER_KEYS = {"scenario", "key", "seed", "common_reward", "reward_scalarisation"}


def mpe2_scenarios():
    import mpe2

    return sorted(
        m.name
        for m in pkgutil.iter_modules(mpe2.__path__)
        if m.name.rsplit("_", 1)[-1].startswith("v") and not m.ispkg
    )


def resolve_module(env_args):
    """The module whose parallel_env() builds the env: env_args.key, else mpe2.<scenario>."""
    key = env_args.get("key")
    if key:
        try:
            module = importlib.import_module(key)
        except ImportError as e:
            raise ConfigError(f"env_args.key='{key}' cannot be imported: {e}") from None
        if not hasattr(module, "parallel_env"):
            raise ConfigError(
                f"env_args.key='{key}' has no parallel_env(); give the import path "
                "of a PettingZoo environment module"
            )
        return module
    scenario = env_args.get("scenario")
    scenarios = mpe2_scenarios()
    if scenario not in scenarios:
        raise ConfigError(unknown_name_message("env_args.scenario", scenario, scenarios))
    return importlib.import_module(f"mpe2.{scenario}")


def constructor_params(module):
    constructor = getattr(module, "raw_env", None)
    constructor = constructor.__init__ if constructor is not None else module.parallel_env
    return inspect.signature(constructor).parameters


def constructor_kwargs(module, env_args):
    """The scenario's own arguments from env_args, checked against its constructor's signature:
    names, and types where the default gives one."""
    kwargs = {k: v for k, v in env_args.items() if k not in WRAPPER_KEYS}
    params = constructor_params(module)
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return kwargs
    accepted = [p for p in params if p != "self"]
    passed = {}
    for k, v in kwargs.items():
        if k in accepted:
            default = params[k].default
            if default is not inspect.Parameter.empty and v is not None:
                v = coerce(f"env_args.{k}", v, default)
            passed[k] = v
        elif k == "max_cycles" or k == "continuous_actions" and not v:
            continue  # mpe.yaml's defaults; the wrapper enforces max_cycles itself
        else:
            raise ConfigError(
                unknown_name_message(
                    f"argument of {module.__name__} (env_args)", k, accepted + sorted(WRAPPER_KEYS)
                )
            )
    return passed


def validate_env_args(env_args):
    module = resolve_module(env_args)
    kwargs = constructor_kwargs(module, env_args)
    if env_args.get("reward_scalarisation") not in ("sum", "mean"):
        raise ConfigError(
            f"env_args.reward_scalarisation={env_args.get('reward_scalarisation')!r}"
            " is not valid; valid choices: sum, mean"
        )
    limit = env_args.get("max_cycles")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"env_args.max_cycles={limit!r} must be a positive integer (the episode limit)")
    # The scenario is the judge of its own values (N=0, a negative count...): build it and reset
    # it once here (milliseconds for mpe2), so that a value it refuses stops the run before it starts.
    params = constructor_params(module)
    given = (
        ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if k not in params or params[k].default != v)
        or "its defaults"
    )
    try:
        env = module.parallel_env(**kwargs)
        try:
            env.reset(seed=0)
            n = len(env.possible_agents)
        finally:
            env.close()
    except Exception as e:  # any failure of third-party code: report it in one line
        raise ConfigError(
            f"{module.__name__} cannot be built with env_args {given}: {type(e).__name__}: {first_line(e)}"
        ) from None
    if n == 0:
        raise ConfigError(f"{module.__name__} with env_args {given} has no agents")


class PettingZooEnv(PerAgentSpacesEnv):
    rng_attribute = "np_random"  # where PettingZoo envs draw from

    def __init__(self, **env_args):
        self.module = resolve_module(env_args)
        self.env = self.module.parallel_env(**constructor_kwargs(self.module, env_args))
        self.agents = list(self.env.possible_agents)
        self.n_agents = len(self.agents)
        self.common_reward = env_args.get("common_reward", True)
        self.reward_scalarisation = env_args.get("reward_scalarisation", "sum")
        self._seed = env_args.get("seed")
        self._seeded = False
        self.episode_limit = env_args.get("max_cycles") or getattr(self.env.unwrapped, "max_cycles", None)
        if not self.episode_limit:
            raise ConfigError(f"{self.module.__name__}: set env_args.max_cycles (the episode limit)")

        spaces = [self.env.action_space(a) for a in self.agents]
        self.continuous = hasattr(spaces[0], "shape") and not hasattr(spaces[0], "n")
        self.agent_action_sizes, self.n_actions, self.action_low, self.action_high = action_layout(
            spaces, self.continuous
        )
        self.obs_sizes = [int(np.prod(self.env.observation_space(a).shape)) for a in self.agents]
        self.obs_size = max(self.obs_sizes)

        self._avail_alive = np.zeros((self.n_agents, self.n_actions), dtype=np.uint8)
        for i, n in enumerate(self.agent_action_sizes):
            self._avail_alive[i, :n] = 1
        self._obs = np.zeros((self.n_agents, self.obs_size), dtype=np.float32)
        self._done = np.zeros(self.n_agents, dtype=np.uint8)  # terminated or truncated
        self._indi_terminated = np.zeros(self.n_agents, dtype=np.uint8)
        self._steps = 0
        self._has_state = True
        # mpe2 defines state() as the concatenated observations of all agents: reuse the ones
        # the step returned instead of computing them again (a tenth of the step's time).
        self._state_is_obs = self.module.__name__.startswith("mpe2.")
        self._state_cache = None
        # mpe2's parallel_env is aec_to_parallel over order- and bounds-checking wrappers that
        # forward every attribute access, and it computes each observation twice per step (one
        # is discarded). The same calls on the raw AEC env, in the same order, give the same
        # episodes in about two thirds of the time (tests/test_mpe_env.py compares them).
        self._aec = self.env.unwrapped if self._state_is_obs and hasattr(self.env, "aec_env") else None
        self.teams = self._teams()
        self.reset()
        self.state_size = self.get_state().size

    # --- episode ----------------------------------------------------------------------------
    def reset(self):
        seed = None if self._seeded else self._seed
        self._seeded = True
        if self._aec is not None:
            self._aec.reset(seed=seed)
            obs = {a: self._aec.observe(a) for a in self._aec.agents}
        else:
            obs, _ = self.env.reset(seed=seed)
        self._done[:] = 0
        self._indi_terminated[:] = 0
        self._steps = 0
        self._touches = 0
        self._set_obs(obs)
        return self.get_obs(), self.get_state()

    def step(self, actions):
        actions = np.asarray(actions)
        live = self._driven().agents
        if self.continuous:
            act = {
                a: actions[i, : self.agent_action_sizes[i]].astype(np.float32)
                for i, a in enumerate(self.agents)
                if a in live
            }
        else:
            act = {a: int(actions[i]) for i, a in enumerate(self.agents) if a in live}
        if self._aec is None:
            obs, rewards, terms, truncs, _ = self.env.step(act)
        else:
            obs, rewards, terms, truncs = self._step_aec(act)
        live = self._driven().agents
        self._steps += 1
        reward = np.array([float(rewards.get(a, 0.0)) for a in self.agents], dtype=np.float32)
        for i, a in enumerate(self.agents):
            if terms.get(a, False):
                self._indi_terminated[i] = 1
            if terms.get(a, False) or truncs.get(a, False) or a not in live:
                self._done[i] = 1
        self._set_obs(obs)

        all_terminated = bool(self._indi_terminated.all())
        done = bool(self._done.all()) or not live or self._steps >= self.episode_limit
        info = {"episode_limit": done and not all_terminated}
        if self.teams:
            info.update(self._contest_stats(done))
        if self.common_reward:
            reward = team_reward(reward, self.reward_scalarisation)
        return reward, done, info

    def _step_aec(self, act):
        """aec_to_parallel's step without its wrappers and its discarded observations."""
        aec = self._aec
        rewards = dict.fromkeys(aec.agents, 0.0)
        for agent in aec.agents:
            if agent != aec.agent_selection:
                raise RuntimeError(
                    f"{self.module.__name__}: expected agent {aec.agent_selection} "
                    f"to act, got {agent}; agents must act in a cycle"
                )
            action = act[agent]
            if self.continuous:  # what mpe2's ClipOutOfBoundsWrapper does
                space = aec.action_space(agent)
                action = np.clip(action, space.low, space.high)
            aec.step(action)
            for a in aec.agents:
                rewards[a] += aec.rewards[a]
        terms, truncs = dict(aec.terminations), dict(aec.truncations)
        obs = {a: aec.observe(a) for a in aec.agents}
        while aec.agents and (aec.terminations[aec.agent_selection] or aec.truncations[aec.agent_selection]):
            aec.step(None)
        return obs, rewards, terms, truncs

    def _set_obs(self, obs):
        self._state_cache = None
        if self._state_is_obs and len(obs) == self.n_agents:
            self._state_cache = np.concatenate([obs[a] for a in self.agents], axis=None).astype(np.float32)
        self._obs[:] = 0
        # A terminated agent's observation is zero (SMAC's convention); a truncated one keeps its
        # final observation, which a critic of observations bootstraps from at the time limit.
        for i, a in enumerate(self.agents):
            if a in obs and not self._indi_terminated[i]:
                o = np.asarray(obs[a], dtype=np.float32).reshape(-1)
                self._obs[i, : o.size] = o

    # --- views ------------------------------------------------------------------------------
    def get_obs(self):
        return self._obs.copy()

    def get_state(self):
        if self._state_cache is not None:
            return self._state_cache.copy()
        if self._has_state:
            try:
                return np.asarray(self._driven().state(), dtype=np.float32).reshape(-1)
            except (NotImplementedError, AttributeError):
                self._has_state = False
        return self._obs.reshape(-1).copy()

    def get_state_size(self):
        return self.state_size

    def get_avail_actions(self):
        return noop_only(self._avail_alive.copy(), self._done)

    def get_env_info(self):
        info = super().get_env_info()
        if self.teams:
            info["teams"] = self.teams
        layout = self._obs_entities()
        if layout:
            info["obs_entities"] = layout
        return info

    # --- step fields ---------------------------------------------------------------------------
    possible_step_fields = ("pos",)

    @property
    def step_fields(self):
        return ("pos",) if self._world() is not None else ()  # mpe2's scenarios keep a world

    def get_step_fields(self, names):
        by_name = {a.name: a for a in self._world().agents}
        return {"pos": np.array([by_name[a].state.p_pos for a in self.agents], dtype=np.float32)}

    # --- teams of competitive scenarios ----------------------------------------------------
    def _world(self):
        return getattr(self.env.unwrapped, "world", None)

    def _teams(self):
        """{"adversary": [agent indices], "good": [...]} for mpe2 scenarios with both kinds of
        agent (simple_adversary, simple_tag, simple_push, simple_world_comm), else None."""
        world = self._world()
        if world is None or not self._state_is_obs:
            return None
        kind = {a.name: bool(getattr(a, "adversary", False)) for a in world.agents}
        if set(kind.values()) != {False, True} or set(kind) != set(self.agents):
            return None
        return {
            "adversary": [i for i, a in enumerate(self.agents) if kind[a]],
            "good": [i for i, a in enumerate(self.agents) if not kind[a]],
        }

    def _contest_stats(self, done):
        """What the MADDPG paper reports besides returns: touches of good agents by adversaries
        per episode (simple_tag, simple_world_comm), and each side's final distance to the good
        agents' goal landmark and whether it reached it, touching it (simple_adversary,
        simple_push)."""
        world = self._world()
        good = [a for a in world.agents if not a.adversary]
        bad = [a for a in world.agents if a.adversary]
        name = self.module.__name__
        if name in ("mpe2.simple_tag_v3", "mpe2.simple_world_comm_v3"):
            for g in good:
                for b in bad:
                    d = np.linalg.norm(g.state.p_pos - b.state.p_pos)
                    self._touches += int(d < g.size + b.size)
            return {"touches": self._touches} if done else {}
        goal = getattr(good[0], "goal_a", None)
        if not done or goal is None:
            return {}
        stats = {}
        for side, members in (("good", good), ("adversary", bad)):
            dist = min(float(np.linalg.norm(a.state.p_pos - goal.state.p_pos)) for a in members)
            stats[f"{side}_goal_dist"] = dist
            stats[f"{side}_at_goal"] = float(
                any(np.linalg.norm(a.state.p_pos - goal.state.p_pos) < a.size + goal.size for a in members)
            )
        return stats

    def _obs_entities(self):
        """Entity layout of simple_spread's observation: own velocity and position, one token
        per landmark, per other agent's position and per other agent's communication."""
        if self.module.__name__ != "mpe2.simple_spread_v3":
            return None
        n = self.n_agents
        layout = [
            {"name": "own", "count": 1, "dim": 4},
            {"name": "landmarks", "count": n, "dim": 2},
            {"name": "agents", "count": n - 1, "dim": 2},
            {"name": "comm", "count": n - 1, "dim": 2},
        ]
        if sum(e["count"] * e["dim"] for e in layout) != self.obs_size:
            return None
        return layout

    def _driven(self):
        # the env this wrapper steps: the raw AEC env (mpe2) or the parallel env
        return self.env if self._aec is None else self._aec

    def render(self):
        return self._driven().render()

    def close(self):
        self._driven().close()
