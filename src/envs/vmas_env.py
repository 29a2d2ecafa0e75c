"""VMAS (Bettini et al. 2022): PyTorch-vectorised multi-robot scenarios, as a MultiAgentEnv.

    --env-config=vmas with env_args.scenario=navigation env_args.n_agents=4

One VMASEnv holds num_envs copies of the scenario stepped as one batch. The episode and parallel
runners use num_envs=1 through the MultiAgentEnv methods; the vector runner makes one env of
batch_size_run copies and calls reset_batch/step_batch, so B envs cost one simulator call per
step (the point of VMAS). Observations are zero-padded to the largest agent's size; the state is
all of them concatenated; every action is available. An episode ends when the scenario says done
(terminated) or after max_steps (a time-limit cut); its last step's info holds the episode's sum
of each scalar the scenario reports per agent (mean over agents), logged as <key>_mean. Any
env_args key the wrapper does not know goes to the scenario (its make_world kwargs), e.g.
env_args.n_agents=4."""

import contextlib

import numpy as np
import torch

from envs.multiagentenv import PerAgentSpacesEnv, action_layout
from utils.errors import ConfigError, first_line
from utils.registry import unknown_name_message
from utils.seeding import plain, unplain

WRAPPER_KEYS = {
    "scenario",
    "max_steps",
    "continuous_actions",
    "seed",
    "device",
    "num_envs",
    "common_reward",
    "reward_scalarisation",
}


def _vmas():
    try:
        import vmas
    except ImportError:
        raise ConfigError(
            "--env-config=vmas needs the package 'vmas': pip install vmas (requirements.txt pins it)"
        ) from None
    return vmas


def scenario_kwargs(env_args):
    return {k: v for k, v in env_args.items() if k not in WRAPPER_KEYS}


def validate_env_args(env_args):
    vmas = _vmas()
    scenario = env_args.get("scenario")
    if scenario not in vmas.scenarios:
        raise ConfigError(unknown_name_message("VMAS scenario (env_args.scenario)", scenario, vmas.scenarios))
    steps = env_args.get("max_steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"env_args.max_steps={steps!r} must be a positive integer (the episode limit)")
    try:
        VMASEnv(**{**env_args, "num_envs": 1})
    except ConfigError:
        raise
    except Exception as e:  # the scenario refused its kwargs: say so in one line
        kwargs = scenario_kwargs(env_args)
        raise ConfigError(
            f"VMAS scenario {scenario} cannot be built with {kwargs}: {type(e).__name__}: {first_line(e)}"
        ) from None


class VMASEnv(PerAgentSpacesEnv):
    step_fields = ("pos",)
    record_fields = ()  # the step fields the batched paths return (the vector runner sets them)

    def get_step_fields(self, names):
        """One copy's (num_envs=1) agents' positions [N, 2]."""
        return {"pos": np.stack([a.state.pos[0].cpu().numpy() for a in self.env.agents]).astype(np.float32)}

    def __init__(self, **env_args):
        vmas = _vmas()
        self.scenario = env_args["scenario"]
        self.num_envs = int(env_args.get("num_envs") or 1)
        self.episode_limit = int(env_args.get("max_steps") or 100)
        self.continuous = bool(env_args.get("continuous_actions", False))
        self.common_reward = env_args.get("common_reward", True)
        self.reward_scalarisation = env_args.get("reward_scalarisation", "sum")
        self.device = torch.device(env_args.get("device") or "cpu")
        # Episodes follow from env_args.seed alone, whatever the run or other envs draw.
        self._rng = None
        with self._own_rng():
            self.env = vmas.make_env(
                self.scenario,
                num_envs=self.num_envs,
                device=self.device,
                continuous_actions=self.continuous,
                max_steps=self.episode_limit,
                seed=env_args.get("seed"),
                terminated_truncated=True,
                **scenario_kwargs(env_args),
            )
        self.n_agents = self.env.n_agents
        self.agents = [a.name for a in self.env.agents]
        spaces = list(self.env.action_space)
        self.agent_action_sizes, self.n_actions, self.action_low, self.action_high = action_layout(
            spaces, self.continuous
        )
        self.obs_sizes = [int(np.prod(s.shape)) for s in self.env.observation_space]
        self.obs_size = max(self.obs_sizes)
        self._avail = np.zeros((self.n_agents, self.n_actions), dtype=np.uint8)
        for i, n in enumerate(self.agent_action_sizes):
            self._avail[i, :n] = 1
        # every action is available in every copy; written into the batch, never changed
        self._avail_batch = np.broadcast_to(self._avail, (self.num_envs, *self._avail.shape))
        self._avail_t = torch.as_tensor(self._avail, device=self.device).expand(self.num_envs, -1, -1)
        self._obs = None  # [num_envs, N, obs_size], a fresh array each step
        self.reset_batch()

    @contextlib.contextmanager
    def _own_rng(self):
        """Run the block on this env's own random streams. VMAS keeps one set of generator
        states (torch CPU, numpy, random) for all its envs in a process and swaps it in around
        each call; this env swaps its own set in there (and its own CUDA state on a GPU), so that
        two envs in one process do not share one stream."""
        from vmas.simulator.environment.environment import Environment

        shared = Environment.vmas_random_state
        outer = list(shared)
        cuda = self.device.type == "cuda"
        outer_cuda = torch.cuda.get_rng_state(self.device) if cuda else None
        if self._rng is not None:
            shared[:] = self._rng[0]
            if cuda:
                torch.cuda.set_rng_state(self._rng[1], self.device)
        try:
            yield
        finally:
            self._rng = (list(shared), torch.cuda.get_rng_state(self.device) if cuda else None)
            shared[:] = outer
            if cuda:
                torch.cuda.set_rng_state(outer_cuda, self.device)

    # --- the whole batch as tensors on VMAS's device (the vector runner's GPU-resident path) -
    def _obs_tensor(self, obs):
        if len(set(self.obs_sizes)) == 1:
            return torch.stack([o.reshape(self.num_envs, -1) for o in obs], dim=1).float()
        out = torch.zeros((self.num_envs, self.n_agents, self.obs_size), device=self.device)
        for i, o in enumerate(obs):
            out[:, i, : self.obs_sizes[i]] = o.reshape(self.num_envs, -1)
        return out

    def _tensor_data(self, obs):
        data = {"state": obs.reshape(self.num_envs, -1), "avail_actions": self._avail_t, "obs": obs}
        if "pos" in self.record_fields:  # [E, N, 2]
            data["pos"] = torch.stack([a.state.pos for a in self.env.agents], dim=1).float()
        return data

    def reset_tensors(self):
        """Reset every copy: {state [E, S], avail_actions [E, N, A], obs [E, N, O]} as tensors on
        the env's device."""
        with self._own_rng():
            obs = self.env.reset()
        return self._tensor_data(self._obs_tensor(obs))

    def step_tensors(self, actions):
        """actions [E, N] (discrete) or [E, N, A] (continuous), a tensor on the env's device ->
        tensors there: the data after the step, reward [E] or [E, N], terminated [E] (the
        scenario's done), cut [E] (a time-limit cut), and infos {key: [E]}: each scalar the
        scenario reports per agent this step, averaged over the agents that report it. Every
        copy steps, whether or not its episode is over; nothing is read back to the host."""
        # copies: VMAS edits actions in place, and a controller's are inference tensors
        if self.continuous:
            per_agent = [
                actions[:, i, : self.agent_action_sizes[i]].float().clone() for i in range(self.n_agents)
            ]
        else:
            per_agent = [actions[:, i].long().reshape(-1).clone() for i in range(self.n_agents)]
        with self._own_rng():
            obs, rewards, terminated, truncated, infos = self.env.step(per_agent)
        reward = torch.stack([r.reshape(-1) for r in rewards], dim=1).float()
        if self.common_reward:
            reward = reward.sum(1) if self.reward_scalarisation == "sum" else reward.mean(1)
        term = terminated.reshape(-1).bool()
        out = self._tensor_data(self._obs_tensor(obs))
        out.update(
            reward=reward,
            terminated=term,
            cut=truncated.reshape(-1).bool() & ~term,  # VMAS: steps >= max_steps
            infos=self._info_means(infos),
        )
        return out

    def _info_means(self, infos):
        """{key: [E]}: each per-agent scalar of this step's infos (navigation: pos_rew,
        final_rew, agent_collisions), averaged over the agents that report it."""
        means = {}
        for key in sorted({k for info in infos for k in info}):
            vals = [info[key] for info in infos if key in info and info[key].numel() == self.num_envs]
            if vals:
                means[key] = torch.stack([v.reshape(-1).float() for v in vals]).mean(0)
        return means

    # --- the whole batch as NumPy arrays (the vector runner) --------------------------------
    def _set_obs(self, obs):
        self._obs = obs.detach().cpu().numpy()  # a fresh array each step: the views below stay valid

    def _data(self):
        data = {
            "state": self._obs.reshape(self.num_envs, -1),
            "avail_actions": self._avail_batch,
            "obs": self._obs,
        }
        if "pos" in self.record_fields:
            data["pos"] = np.stack([a.state.pos.cpu().numpy() for a in self.env.agents], axis=1)
        return data

    def reset_batch(self):
        """Reset every copy: {state [E, S], avail_actions [E, N, A], obs [E, N, O]}."""
        self._set_obs(self.reset_tensors()["obs"])
        self._indi_terminated = np.zeros(self.n_agents, dtype=np.uint8)
        self._info_sums = {}
        return self._data()

    def step_batch(self, actions):
        """actions [E, N] (discrete) or [E, N, A] (continuous) for every copy -> the data after
        the step plus reward [E] or [E, N], terminated [E], indi_terminated [E, N] and one info
        dict per copy (episode_limit: the step was a time-limit cut; on an episode's last step
        also its sum of each of the scenario's infos)."""
        out_t = self.step_tensors(torch.as_tensor(np.asarray(actions), device=self.device))
        self._set_obs(out_t["obs"])
        for key, v in out_t["infos"].items():  # kept on VMAS's device; read once, when an episode ends
            self._info_sums[key] = self._info_sums.get(key, 0.0) + v
        term = out_t["terminated"].cpu().numpy()
        cut = out_t["cut"].cpu().numpy()
        out = self._data()
        out.update(
            reward=out_t["reward"].cpu().numpy(),
            terminated=term | cut,
            indi_terminated=np.repeat(term[:, None], self.n_agents, axis=1).astype(np.uint8),
            info=[{"episode_limit": bool(c)} for c in cut],
        )
        ended = np.flatnonzero(term | cut)
        if len(ended):  # an episode's last step: its sums of the scenario's infos
            sums = {k: v.cpu().numpy() for k, v in self._info_sums.items()}
            for i in ended:
                out["info"][i].update({k: float(v[i]) for k, v in sums.items()})
        return out

    def get_rng_state(self):
        return {"shared": plain(list(self._rng[0])), "cuda": self._rng[1]}

    def set_rng_state(self, state):
        # A state saved on the CPU has no CUDA part (device is not a training setting): keep ours.
        cuda = state["cuda"] if state["cuda"] is not None else self._rng[1]
        self._rng = (unplain(state["shared"]), cuda)

    # --- one env (episode and parallel runners) ---------------------------------------------
    def reset(self):
        self.reset_batch()
        return self.get_obs(), self.get_state()

    def step(self, actions):
        if self.num_envs != 1:
            raise RuntimeError("VMASEnv.step drives one env; a batch of envs steps with step_batch")
        out = self.step_batch(np.asarray(actions)[None])
        self._indi_terminated = out["indi_terminated"][0]
        reward = out["reward"][0]
        return (float(reward) if np.ndim(reward) == 0 else reward), bool(out["terminated"][0]), out["info"][0]

    def get_obs(self):
        return list(self._obs[0])

    def get_state(self):
        return self._obs[0].reshape(-1).copy()

    def get_avail_actions(self):
        return self._avail.copy()

    def close(self):
        pass
