import torch

from .batched_mlp import BatchedMLP, flat_size


class MADDPGCritic(BatchedMLP):
    """Centralised critic Q_i(x, a_1 .. a_N) for every agent i.

    Input of agent i, concatenated: the state (for MPE: all agents' observations), agent i's own
    observation if critic_individual_obs, the joint action of all agents (N * n_actions: one-hot
    for discrete actions, the action vectors for continuous ones), and agent i's one-hot id when
    the critic is shared. So input_shape = S + [O] + N * A + [N if shared].

    agent_param_sharing=False gives each agent its own MLP; the N MLPs run as one batched
    matrix product per layer (weights [N, in, out])."""

    def __init__(self, scheme, args):
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.individual_obs = args.critic_individual_obs
        self.input_shape = self.get_input_shape(scheme, args)
        h = args.critic_hidden_dim
        super().__init__(
            1 if args.agent_param_sharing else self.n_agents, (self.input_shape, h, h, 1), args.mlp_activation
        )
        self._ids = None

    @staticmethod
    def get_input_shape(scheme, args):
        size = flat_size(scheme["state"]["vshape"])
        if args.critic_individual_obs:
            size += flat_size(scheme["obs"]["vshape"])
        size += args.n_agents * args.n_actions
        if args.agent_param_sharing:
            size += args.n_agents
        return size

    def build_inputs(self, state, joint_actions, obs=None):
        """state [B, T, S]; joint_actions [B, T, N, N * A] (row i: the joint action that agent
        i's value is asked for); obs [B, T, N, O] -> [B, T, N, input_shape]."""
        b, t = joint_actions.shape[:2]
        parts = [state.unsqueeze(2).expand(b, t, self.n_agents, -1)]
        if self.individual_obs:
            parts.append(obs)
        parts.append(joint_actions)
        if self.shared:
            if self._ids is None or self._ids.device != state.device:
                self._ids = torch.eye(self.n_agents, device=state.device)
            parts.append(self._ids.expand(b, t, -1, -1))
        return torch.cat(parts, dim=-1)

    def forward(self, inputs):
        return super().forward(inputs).squeeze(-1)


class LocalCritic(MADDPGCritic):
    """Independent critic Q_i(o_i, a_i) for every agent i (IDDPG, ISAC): agent i's own observation
    and own action (its block of the joint action), plus its one-hot id when the critic is shared.
    input_shape = O + A + [N if shared]."""

    needs_obs = True

    @staticmethod
    def get_input_shape(scheme, args):
        size = flat_size(scheme["obs"]["vshape"]) + args.n_actions
        return size + (args.n_agents if args.agent_param_sharing else 0)

    def build_inputs(self, state, joint_actions, obs=None):
        """obs [B, T, N, O]; joint_actions [B, T, N, N * A], of which row i keeps block i."""
        b, t, n = joint_actions.shape[:3]
        own = torch.diagonal(joint_actions.view(b, t, n, n, self.n_actions), dim1=2, dim2=3)  # [B, T, A, N]
        parts = [obs, own.transpose(2, 3)]
        if self.shared:
            if self._ids is None or self._ids.device != obs.device:
                self._ids = torch.eye(self.n_agents, device=obs.device)
            parts.append(self._ids.expand(b, t, -1, -1))
        return torch.cat(parts, dim=-1)
