import numpy as np

from utils.seeding import generator_from_state, generator_state


def noop_only(avail, finished):
    """avail [n_agents, n_actions] with the rows of finished agents (0/1 flags) reduced to action
    0, the no-op: agents that are done or dead still get an action from the runner."""
    finished = np.asarray(finished) == 1
    if finished.any():
        avail[finished] = 0
        avail[finished, 0] = 1
    return avail


def team_reward(rewards, scalarisation):
    """One team reward from per-agent rewards: their sum or their mean."""
    return float(rewards.sum() if scalarisation == "sum" else rewards.mean())


def action_layout(spaces, continuous):
    """Per-agent action spaces -> (sizes per agent, n_actions = the largest, low, high): the
    bounds of continuous spaces, per dimension over the agents that have it (else None, None)."""
    if not continuous:
        sizes = [int(s.n) for s in spaces]
        return sizes, max(sizes), None, None
    sizes = [int(np.prod(s.shape)) for s in spaces]
    n = max(sizes)
    low, high = np.full(n, np.inf), np.full(n, -np.inf)
    for s, d in zip(spaces, sizes, strict=True):
        low[:d] = np.minimum(low[:d], np.asarray(s.low).reshape(-1))
        high[:d] = np.maximum(high[:d], np.asarray(s.high).reshape(-1))
    return sizes, n, low.tolist(), high.tolist()


def smac_entities(move, enemies, allies, own, first_action, healers=()):
    """SMAC-style env_info entries for entity-based agents: the observation as move features,
    one token per enemy and per other agent, and own features (enemies, allies: (count, dim));
    attack actions from first_action on target the enemies in order, except for the agents in
    `healers` (MMM's Medivacs), whose slot j heals agent j."""
    return {
        "obs_entities": [
            {"name": "move", "count": 1, "dim": move},
            {"name": "enemies", "count": enemies[0], "dim": enemies[1]},
            {"name": "allies", "count": allies[0], "dim": allies[1]},
            {"name": "own", "count": 1, "dim": own},
        ],
        "action_entities": {"group": "enemies", "first_action": first_action, "healers": list(healers)},
    }


# What every env implements: method -> what it takes and returns
REQUIRED = {
    "step": "step(actions), one action per agent -> (reward, terminated, info)",
    "get_obs": "the list of n_agents observations, all of obs_shape",
    "get_obs_size": "obs_shape, the length of one agent's observation",
    "get_state": "the global state, a vector of state_shape",
    "get_state_size": "state_shape, the length of the state",
    "get_avail_actions": "n_agents lists of n_actions 0/1 flags: the actions each agent may take now",
    "get_total_actions": "n_actions, the size of every agent's action set (or of its action vector)",
    "get_indi_terminated": "one 0/1 flag per agent: 1 from the step the agent is dead or done",
    "reset": "starts an episode -> (obs, state)",
    "render": "an RGB frame of the env now",
    "seed": "seed(seed=None): the env's seed; with a seed, its random numbers start over from it",
}


def _required(name, doc):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.{name}: {doc}")

    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    return method


# Extra per-step fields an env may record into the batch (runners/base.py reads the list an env
# declares in get_env_info()["step_fields"]): name -> (shape per agent, dtype name, meaning).
STEP_FIELDS = {
    "visible": (("n_agents",), "uint8", "which teammates each agent sees (alive, in sight range)"),
    "pos": ((2,), "float32", "each agent's (x, y) position"),
}


def step_field_specs(names, n_agents):
    """{name: {"vshape", "dtype"}} of the given STEP_FIELDS for an env of n_agents agents."""
    specs = {}
    for name in names:
        shape, dtype, _ = STEP_FIELDS[name]
        specs[name] = {"vshape": tuple(n_agents if d == "n_agents" else d for d in shape), "dtype": dtype}
    return specs


def smac_step_fields(env, names):
    """visible and pos from SMAC's own helpers (SMAC, SMACv2 and skirmish share them): the ally
    block of get_visibility_matrix(), and get_unit_by_id(i).pos."""
    out = {}
    n = env.n_agents
    if "visible" in names:
        out["visible"] = np.asarray(env.get_visibility_matrix())[:, :n].astype(np.uint8)
    if "pos" in names:
        units = [env.get_unit_by_id(i) for i in range(n)]
        out["pos"] = np.array([[u.pos.x, u.pos.y] for u in units], dtype=np.float32)
    return out


class MultiAgentEnv:
    """The PyMARL environment contract, plus per-agent termination flags.

    step(actions) -> (reward, terminated, info); reward is a float (common reward) or an
    array of n_agents floats (individual rewards). info["episode_limit"] is True when the
    episode was cut by the time limit rather than truly terminated.
    """

    n_agents: int
    episode_limit: int

    def get_obs_agent(self, agent_id):
        return self.get_obs()[agent_id]

    def get_avail_agent_actions(self, agent_id):
        return self.get_avail_actions()[agent_id]

    def close(self):
        pass

    def save_replay(self):
        pass

    def get_stats(self):
        return {}

    # Names of STEP_FIELDS this env can record (get_step_fields); get_env_info declares them.
    step_fields = ()

    def get_step_fields(self, names):
        """{name: array [n_agents, ...]} of the given step fields, now (before the next action)."""
        raise NotImplementedError(f"{type(self).__name__} records no step fields")

    def get_rng_state(self):
        """The state of the random streams that decide this env's coming episodes, taken between
        episodes, as plain values (utils/seeding.py); a checkpoint keeps it so that a resumed run
        plays the episodes the uninterrupted run would have played. None: this env cannot give
        it (StarCraft II draws inside the game), and a resumed run plays other episodes."""
        return None

    def set_rng_state(self, state):
        """Go on from get_rng_state's state: the next reset() draws what the env that gave it
        would have drawn."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore its random state")

    def get_env_info(self):
        return {
            "state_shape": self.get_state_size(),
            "obs_shape": self.get_obs_size(),
            "n_actions": self.get_total_actions(),
            "n_agents": self.n_agents,
            "episode_limit": self.episode_limit,
            "action_space": "discrete",
            "step_fields": step_field_specs(self.step_fields, self.n_agents),
        }


class PerAgentSpacesEnv(MultiAgentEnv):
    """What wrappers of envs with one observation and action space per agent share (mpe2 and
    PettingZoo, gymma, VMAS): observations zero-padded to obs_size (sizes per agent in obs_sizes),
    actions to n_actions, continuous bounds in action_low/high, flags in _indi_terminated, and
    the state all observations unless the wrapper says otherwise."""

    continuous = False
    agents = None  # agent names, where the env has them
    # The raw env's attribute holding the NumPy Generator its episodes draw from, for wrappers
    # that seed it on their first reset (self._seeded); None: the wrapper keeps its own state.
    rng_attribute = None

    def get_rng_state(self):
        g = getattr(self.env.unwrapped, self.rng_attribute, None) if self.rng_attribute else None
        return {"np_random": generator_state(g)} if isinstance(g, np.random.Generator) else None

    def set_rng_state(self, state):
        setattr(self.env.unwrapped, self.rng_attribute, generator_from_state(state["np_random"]))
        self._seeded = True  # the next reset must not seed it again

    def get_obs_size(self):
        return self.obs_size

    def get_state_size(self):
        return self.n_agents * self.obs_size

    def get_total_actions(self):
        return self.n_actions

    def get_indi_terminated(self):
        return self._indi_terminated.copy()

    def get_env_info(self):
        info = super().get_env_info()
        if self.agents is not None:
            info["agent_names"] = self.agents
        info["obs_sizes"] = self.obs_sizes
        if self.continuous:
            info.update(action_space="continuous", action_low=self.action_low, action_high=self.action_high)
        return info


for _name, _doc in REQUIRED.items():
    setattr(MultiAgentEnv, _name, _required(_name, _doc))
