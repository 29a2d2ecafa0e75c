from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from components.action_selectors import REGISTRY as action_REGISTRY
from controllers.basic_controller import BasicMAC
from modules.agents.agent_group import AgentGroup

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch


class MADDPGMAC(BasicMAC):
    """Decentralised actors for MADDPG: each agent acts on its own observation.

    What an action is comes from the action form (components/action_forms.py: discrete logits,
    tanh onto the env's bounds, or the softmax actor on the simplex), how the actors explore
    from the selector the form names (components/action_selectors.py: Gumbel samples, Gaussian
    or Ornstein-Uhlenbeck noise). This class adds policy ensembles.

    policy_ensemble=K > 1 (the paper's policy ensembles, section 4.3): every agent has K
    sub-policies (K networks, or K shared ones with agent_param_sharing) and plays each episode
    with one drawn uniformly at random; the draw is stored with the episode (`policy_index`), so
    each sub-policy is trained on, and its target actions taken at, the transitions it played.
    The rows are routed by that draw, so each network runs only on the rows it played."""

    policy_ensembles = True

    def __init__(self, scheme: dict, groups: dict[str, int], args: SimpleNamespace) -> None:
        self.n_policies = getattr(args, "policy_ensemble", 1)
        self.policy_index = None  # [batch, N] sub-policy of each agent, drawn by init_hidden
        self._route = None  # the rows' routing to the networks of policy_index
        super().__init__(scheme, groups, args)

    def _build_selector(self, args):
        return action_REGISTRY[self.form.exploration](args, self.form)

    def policy_actions(self, out: torch.Tensor, avail: torch.Tensor, sample: bool) -> torch.Tensor:
        """Actions as the critic sees them, [B, T, N, A], from network outputs (the learner)."""
        return self.form.policy_actions(out, avail, sample)

    def init_hidden(self, batch_size: int) -> None:
        if self.n_policies == 1:
            return super().init_hidden(batch_size)
        self.policy_index = torch.randint(self.n_policies, (batch_size, self.n_agents), device=self.device())
        self._route = self.agent.route(self._networks(self.policy_index))
        self.hidden_states = self.agent.init_hidden(batch_size * self.n_agents, self._route)
        self.action_selector.start_episode(batch_size, self.n_agents, self.device())

    def episode_data(self) -> dict[str, torch.Tensor]:
        if self.n_policies == 1:
            return {}
        return {"policy_index": self.policy_index.unsqueeze(-1)}

    # --- sub-policies -----------------------------------------------------------------------
    def _build_agent(self, args):
        if self.n_policies == 1:
            return super()._build_agent(args)
        # K shared networks, or N * K: agent i's sub-policy k is network i * K + k
        return AgentGroup(
            self._make_agent, self.n_policies * (1 if args.agent_param_sharing else self.n_agents)
        )

    def _networks(self, index):
        """The network of each (episode, agent) row, from the sub-policy draws index [B, N]."""
        if self.args.agent_param_sharing:
            return index.reshape(-1)
        agent = torch.arange(self.n_agents, device=index.device)
        return (agent * self.n_policies + index).reshape(-1)

    def forward(self, ep_batch: EpisodeBatch, t: int) -> torch.Tensor:
        if self.n_policies == 1:
            return super().forward(ep_batch, t)
        x = self._to_rows(self._build_inputs(ep_batch, t, t + 1))
        out, self.hidden_states = self.agent(x, self.hidden_states, self._route)
        return out.view(ep_batch.batch_size, self.n_agents, -1)

    def forward_seq(self, batch: EpisodeBatch, inputs: torch.Tensor | None = None) -> torch.Tensor:
        if self.n_policies == 1:
            return super().forward_seq(batch, inputs)
        if inputs is None:
            inputs = self.build_seq_inputs(batch)
        route = self.agent.route(self._networks(batch["policy_index"][..., 0]))
        bn, t = inputs.shape[:2]
        out, _ = self.agent(inputs, self.agent.init_hidden(bn, route), route)
        return out.view(bn // self.n_agents, self.n_agents, t, -1).transpose(1, 2)
