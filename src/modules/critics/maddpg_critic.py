import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MADDPGCritic(nn.Module):
    """Centralised critic Q_i(x, a_1 .. a_N) for every agent i.

    Input of agent i, concatenated: the state (for MPE: all agents' observations), agent i's own
    observation if critic_individual_obs, the joint action of all agents (N * n_actions: one-hot
    for discrete actions, the action vectors for continuous ones), and agent i's one-hot id when
    the critic is shared. So input_shape = S + [O] + N * A + [N if shared].

    agent_param_sharing=False gives each agent its own MLP; the N MLPs run as one batched
    matrix product per layer (weights [N, in, out])."""

    def __init__(self, scheme, args):
        super().__init__()
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.shared = args.agent_param_sharing
        self.individual_obs = args.critic_individual_obs
        self.input_shape = self.get_input_shape(scheme, args)
        n_nets = 1 if self.shared else self.n_agents
        h = args.critic_hidden_dim
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in ((self.input_shape, h), (h, h), (h, 1)):
            w = torch.empty(n_nets, fan_in, fan_out)
            bound = 1.0 / math.sqrt(fan_in)  # nn.Linear's default initialisation
            nn.init.uniform_(w, -bound, bound)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.empty(n_nets, 1, fan_out).uniform_(-bound, bound)))
        self._ids = None

    @staticmethod
    def get_input_shape(scheme, args):
        state = scheme["state"]["vshape"]
        size = state if isinstance(state, int) else int(torch.tensor(state).prod())
        if args.critic_individual_obs:
            obs = scheme["obs"]["vshape"]
            size += obs if isinstance(obs, int) else obs[0]
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

    def clip_grad_norm_(self, max_norm):
        """Clip each agent's critic on its own gradient norm (one agent's reward must not
        rescale another's update); returns the largest norm before clipping."""
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        if self.shared:
            return torch.nn.utils.clip_grad_norm_(self.parameters(), max_norm)
        norms = torch.stack([g.pow(2).flatten(1).sum(1) for g in grads]).sum(0).sqrt()  # [N]
        scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.view(-1, *([1] * (g.dim() - 1))))
        return norms.max()

    def forward(self, inputs):
        b, t, n, d = inputs.shape
        if self.shared:  # one network: plain matrix products over all rows
            x = inputs.reshape(b * t * n, d)
            x = F.relu(torch.addmm(self.biases[0][0], x, self.weights[0][0]))
            x = F.relu(torch.addmm(self.biases[1][0], x, self.weights[1][0]))
            return torch.addmm(self.biases[2][0], x, self.weights[2][0]).view(b, t, n)
        x = inputs.permute(2, 0, 1, 3).reshape(n, b * t, d)  # [N, rows, in]: one slice per net
        x = F.relu(torch.baddbmm(self.biases[0], x, self.weights[0]))
        x = F.relu(torch.baddbmm(self.biases[1], x, self.weights[1]))
        q = torch.baddbmm(self.biases[2], x, self.weights[2])  # [N, rows, 1]
        return q.view(n, b, t).permute(1, 2, 0)
