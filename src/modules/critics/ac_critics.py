"""Critics of the policy-gradient learners. Each builds its per-agent inputs from an episode
batch and evaluates every step, [B, T+1, ...] (index T: the final observation):

    ac_critic    V(o_i [, id])                                  IA2C, IPPO
    cv_critic    V(s [, o_i] [, o_1..o_N] [, u_{t-1}] [, id])      MAA2C, MAPPO
    coma_critic  Q_i(s [, o_i], u^{-i}_t [, u_{t-1}] [, id], .)  COMA: one value per action of agent i

The id is agent i's one-hot index; it is given to a shared critic with critic_agent_id, never to
one critic per agent (agent_param_sharing=False). With critic_death_mask every feature but the id
is zero once the agent is dead (MAPPO's death masking)."""

import torch

from utils.rl_utils import alive_mask

from .batched_mlp import BatchedMLP, flat_size


class _PerAgentCritic(BatchedMLP):
    per_action = False  # one value per agent, or one per action of the agent (Q critics)

    def __init__(self, scheme, args):
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.args = args
        self.action_key = (
            "actions" if getattr(args, "action_space", "discrete") == "continuous" else "actions_onehot"
        )
        self.with_id = args.agent_param_sharing and args.critic_agent_id
        self.input_shape = self.featureflat_size(scheme, args) + (self.n_agents if self.with_id else 0)
        h = args.critic_hidden_dim
        n_out = self.n_actions if self.per_action else 1
        super().__init__(
            1 if args.agent_param_sharing else self.n_agents,
            (self.input_shape, h, h, n_out),
            args.mlp_activation,
        )

    def featureflat_size(self, scheme, args):
        raise NotImplementedError

    def features(self, batch):
        """[B, T+1, N, features] without the id."""
        raise NotImplementedError

    def build_inputs(self, batch):
        x = self.features(batch)
        b, t = x.shape[:2]
        if self.args.critic_death_mask:
            x = x * alive_mask(batch).unsqueeze(-1)
        if self.with_id:
            ids = torch.eye(self.n_agents, device=x.device).expand(b, t, -1, -1)
            x = torch.cat([x, ids], dim=-1)
        return x

    def values(self, batch):
        """[B, T+1, N] (or [B, T+1, N, A] for Q critics)."""
        out = self(self.build_inputs(batch))
        return out if self.per_action else out.squeeze(-1)

    def _per_agent(self, x):
        """[B, T, F] -> [B, T, N, F], the same for every agent."""
        return x.unsqueeze(2).expand(-1, -1, self.n_agents, -1)

    def _joint_last_actions(self, batch):
        u = batch[self.action_key]
        b, t = u.shape[:2]
        joint = u.reshape(b, t, -1)
        return self._per_agent(torch.cat([torch.zeros_like(joint[:, :1]), joint[:, :-1]], dim=1))


class ACCritic(_PerAgentCritic):
    def featureflat_size(self, scheme, args):
        return flat_size(scheme["obs"]["vshape"])

    def features(self, batch):
        return batch["obs"]


class CVCritic(_PerAgentCritic):
    def featureflat_size(self, scheme, args):
        obs, n = flat_size(scheme["obs"]["vshape"]), args.n_agents
        size = flat_size(scheme["state"]["vshape"])
        size += obs if args.critic_individual_obs else 0
        size += n * obs if args.critic_joint_obs else 0
        size += n * args.n_actions if args.critic_last_action else 0
        return size

    def features(self, batch):
        obs = batch["obs"]
        b, t = obs.shape[:2]
        parts = [self._per_agent(batch["state"])]
        if self.args.critic_individual_obs:
            parts.append(obs)
        if self.args.critic_joint_obs:
            parts.append(self._per_agent(obs.reshape(b, t, -1)))
        if self.args.critic_last_action:
            parts.append(self._joint_last_actions(batch))
        return torch.cat(parts, dim=-1)


class COMACritic(_PerAgentCritic):
    per_action = True

    def featureflat_size(self, scheme, args):
        size = flat_size(scheme["state"]["vshape"]) + args.n_agents * args.n_actions
        size += flat_size(scheme["obs"]["vshape"]) if args.critic_individual_obs else 0
        size += args.n_agents * args.n_actions if args.critic_last_action else 0
        return size

    def features(self, batch):
        u = batch["actions_onehot"]  # [B, T+1, N, A]
        b, t, n, a = u.shape
        # row i: the joint action with agent i's own block zeroed, so Q_i's input does not
        # depend on the action it is evaluated for
        others = u.reshape(b, t, 1, n * a).expand(-1, -1, n, -1)
        keep = 1 - torch.eye(n, device=u.device).repeat_interleave(a, dim=1)  # [N, N * A]
        parts = [self._per_agent(batch["state"])]
        if self.args.critic_individual_obs:
            parts.append(batch["obs"])
        parts.append(others * keep)
        if self.args.critic_last_action:
            parts.append(self._joint_last_actions(batch))
        return torch.cat(parts, dim=-1)
