import torch

from components.schedules import LinearSchedule
from controllers.basic_controller import BasicMAC
from modules.agents import REGISTRY as agent_REGISTRY
from modules.agents.agent_group import AgentGroup
from utils.errors import ConfigError
from utils.rl_utils import gumbel_noise, gumbel_softmax, gumbel_softmax_st


class MADDPGMAC(BasicMAC):
    """Decentralised actors for MADDPG: each agent acts on its own observation.

    Discrete actions: the network outputs logits; training actions are samples of
    softmax(logits) (Gumbel-max), test actions the argmax; the learner differentiates through a
    straight-through Gumbel-softmax. Continuous actions: tanh outputs mapped affinely onto the
    env's bounds, exploration noise (act_noise * half the range, annealed) in training, clipped
    to the bounds; uniform random actions before start_steps env steps. The noise is white
    Gaussian, or with exploration_mode=ornstein_uhlenbeck temporally correlated: an OU process
    per agent and action dimension, restarted at 0 each episode (correlated noise moves an agent
    consistently for several steps, so exploration covers more ground).
    continuous_actor=softmax (action bounds [0, 1], as mpe2's): the paper's MPE actor, whose
    training actions are soft Gumbel-softmax samples of its logits and test actions
    softmax(logits), as are the target actions (the paper samples those); the learner
    differentiates through the soft sample.
    agent_param_sharing=False gives every agent its own network.

    policy_ensemble=K > 1 (the paper's policy ensembles, section 4.3): every agent has K
    sub-policies (K networks, or K shared ones with agent_param_sharing) and plays each episode
    with one drawn uniformly at random; the draw is stored with the episode (`policy_index`), so
    each sub-policy is trained on, and its target actions taken at, the transitions it played.
    The rows are routed by that draw, so each network runs only on the rows it played."""

    policy_ensembles = True

    def __init__(self, scheme, groups, args):
        self.n_agents = args.n_agents
        self.args = args
        self.n_policies = getattr(args, "policy_ensemble", 1)
        self.policy_index = None  # [batch, N] sub-policy of each agent, drawn by init_hidden
        self._route = None  # the rows' routing to the networks of policy_index
        self.continuous = getattr(args, "action_space", "discrete") == "continuous"
        self.input_shape = self._get_input_shape(scheme)
        self.agent = self._build_agent(args)
        self.action_selector = None
        self.hidden_states = None
        self._agent_ids = None
        self.softmax_actor = self.continuous and args.continuous_actor == "softmax"
        if self.softmax_actor and not (set(args.action_low) <= {0} and set(args.action_high) <= {1}):
            raise ConfigError(f"continuous_actor=softmax emits action vectors on the simplex, so it "
                              f"needs action bounds [0, 1]; this env's are low={args.action_low}, "
                              f"high={args.action_high}; use continuous_actor=tanh")
        if self.continuous:
            self.low = torch.tensor(args.action_low, dtype=torch.float32)
            self.high = torch.tensor(args.action_high, dtype=torch.float32)
            self.noise = LinearSchedule(args.act_noise_start, args.act_noise_finish,
                                        args.act_noise_anneal_time)
            self.ou = args.exploration_mode == "ornstein_uhlenbeck"
            self.ou_state = None  # [batch, N, A], restarted by init_hidden
            self.noise_stop = (None if args.ou_stop_episode is None
                               else args.ou_stop_episode * args.episode_limit)

    # --- acting -----------------------------------------------------------------------------
    @torch.inference_mode()
    def select_actions(self, ep_batch, t_ep, t_env, bs=slice(None), test_mode=False):
        """Discrete: action indices [len(bs), N]; continuous: action vectors [len(bs), N, A]."""
        out = self.forward(ep_batch, t_ep)[bs]
        avail = ep_batch["avail_actions"][bs, t_ep]
        if not self.continuous:
            logits = out.masked_fill(avail == 0, -float("inf"))
            if not test_mode or not self.args.test_greedy:
                logits = logits + gumbel_noise(logits)  # argmax: a sample of softmax(logits)
            return logits.argmax(dim=-1)
        if self.softmax_actor:  # the paper's MPE actions: soft Gumbel samples go to the env
            return self.policy_actions(out, avail, sample=not test_mode)
        low, high = self.low.to(out.device), self.high.to(out.device)
        if test_mode:
            actions = self.to_bounds(out)
        elif t_env < self.args.start_steps:
            actions = low + torch.rand_like(out) * (high - low)
        else:
            scale = self.noise.eval(t_env) * (high - low) / 2
            noisy = self.to_bounds(out) + scale * self._noise(out, bs, t_env)
            actions = torch.minimum(torch.maximum(noisy, low), high)
        return actions * avail  # padded action dimensions stay 0

    def _noise(self, out, bs, t_env):
        if not self.ou:
            return torch.randn_like(out)
        if self.noise_stop is not None and t_env >= self.noise_stop:
            return torch.zeros_like(out)
        # x <- x + theta (0 - x) + sigma xi: the rows `bs` of the episodes being played
        x = self.ou_state[bs]
        x = x - self.args.ou_theta * x + self.args.ou_sigma * torch.randn_like(out)
        self.ou_state[bs] = x
        return x

    def init_hidden(self, batch_size):
        if self.n_policies == 1:
            super().init_hidden(batch_size)
        else:
            self.policy_index = torch.randint(self.n_policies, (batch_size, self.n_agents),
                                              device=next(self.agent.parameters()).device)
            self._route = self.agent.route(self._networks(self.policy_index))
            self.hidden_states = self.agent.init_hidden(batch_size * self.n_agents, self._route)
        if self.continuous and self.ou:
            self.ou_state = torch.zeros(batch_size, self.n_agents, len(self.args.action_low),
                                        device=next(self.agent.parameters()).device)

    def episode_data(self):
        if self.n_policies == 1:
            return {}
        return {"policy_index": self.policy_index.unsqueeze(-1)}

    # --- sub-policies -----------------------------------------------------------------------
    def _build_agent(self, args):
        if self.n_policies == 1:
            return super()._build_agent(args)
        make = lambda: agent_REGISTRY[args.agent](self.input_shape, args)  # noqa: E731
        # K shared networks, or N * K: agent i's sub-policy k is network i * K + k
        return AgentGroup(make, self.n_policies * (1 if args.agent_param_sharing else self.n_agents))

    def _networks(self, index):
        """The network of each (episode, agent) row, from the sub-policy draws index [B, N]."""
        if self.args.agent_param_sharing:
            return index.reshape(-1)
        agent = torch.arange(self.n_agents, device=index.device)
        return (agent * self.n_policies + index).reshape(-1)

    def forward(self, ep_batch, t):
        if self.n_policies == 1:
            return super().forward(ep_batch, t)
        x = self._to_rows(self._build_inputs(ep_batch, t, t + 1))
        out, self.hidden_states = self.agent(x, self.hidden_states, self._route)
        return out.view(ep_batch.batch_size, self.n_agents, -1)

    def forward_seq(self, batch, inputs=None):
        if self.n_policies == 1:
            return super().forward_seq(batch, inputs)
        if inputs is None:
            inputs = self.build_seq_inputs(batch)
        route = self.agent.route(self._networks(batch["policy_index"][..., 0]))
        bn, t = inputs.shape[:2]
        out, _ = self.agent(inputs, self.agent.init_hidden(bn, route), route)
        return out.view(bn // self.n_agents, self.n_agents, t, -1).transpose(1, 2)

    # --- differentiable policy outputs (learner) --------------------------------------------
    def to_bounds(self, out):
        low, high = self.low.to(out.device), self.high.to(out.device)
        return low + (torch.tanh(out) + 1) * (high - low) / 2

    def policy_actions(self, out, avail, sample):
        """Actions as the critic sees them, [B, T, N, A], from network outputs `out`.

        Discrete: straight-through Gumbel-softmax samples (sample=True) or the one-hot argmax
        over available actions; continuous: the deterministic bounded action, or for the softmax
        actor a soft Gumbel-softmax sample (sample=True) or softmax(logits)."""
        if self.continuous and not self.softmax_actor:
            return self.to_bounds(out) * avail
        logits = out.masked_fill(avail == 0, -1e10)
        if self.softmax_actor:
            if sample:
                return gumbel_softmax(logits, self.args.gumbel_temperature)
            return torch.softmax(logits, dim=-1)
        if sample:
            return gumbel_softmax_st(logits, self.args.gumbel_temperature)
        return torch.nn.functional.one_hot(logits.argmax(dim=-1), out.shape[-1]).to(out.dtype)

    # --- inputs -----------------------------------------------------------------------------
    def _last_action_key(self):
        return "actions" if self.continuous else "actions_onehot"
