from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from components.action_forms import action_form
from components.action_selectors import REGISTRY as action_REGISTRY
from modules.agents import REGISTRY as agent_REGISTRY
from modules.agents.agent_group import AgentGroup

if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterator

    from components.episode_buffer import EpisodeBatch, Index


class BasicMAC:
    """Multi-agent controller: one agent network shared by all agents (parameter sharing), or
    one network per agent with agent_param_sharing=False."""

    policy_ensembles = False  # plays one of several sub-policies per episode (policy_ensemble > 1)

    def __init__(self, scheme: dict, groups: dict[str, int], args: SimpleNamespace) -> None:
        self.n_agents = args.n_agents
        self.args = args
        self.form = action_form(args)  # what an action is (components/action_forms.py)
        self.input_shape = self._get_input_shape(scheme)
        self.agent = self._build_agent(args)
        self.action_selector = self._build_selector(args)
        self.hidden_states = None
        self._agent_ids = None

    @property
    def continuous(self) -> bool:
        return self.form.continuous

    def _build_selector(self, args):
        return action_REGISTRY[args.action_selector](args, self.form)

    def _make_agent(self):
        out = self.form.outputs_per_action * self.args.n_actions  # e.g. means and log stds
        return agent_REGISTRY[self.args.agent](self.input_shape, self.args, output_dim=out)

    def _build_agent(self, args):
        return self._make_agent() if args.agent_param_sharing else AgentGroup(self._make_agent, self.n_agents)

    # --- acting -----------------------------------------------------------------------------
    @torch.inference_mode()  # cheaper than no_grad; acting never feeds autograd
    def select_actions(
        self, ep_batch: EpisodeBatch, t_ep: int, t_env: int, bs: Index = slice(None), test_mode: bool = False
    ) -> torch.Tensor:
        """Actions [len(bs), N] for the episodes `bs` of `ep_batch` at step `t_ep`."""
        avail_actions = ep_batch["avail_actions"][bs, t_ep]
        agent_outputs = self.forward(ep_batch, t_ep)
        return self.action_selector.select_action(
            agent_outputs[bs], avail_actions, t_env, test_mode=test_mode, bs=bs
        )

    def env_actions(self, actions: torch.Tensor, ep_batch: EpisodeBatch, t: int, bs: Index) -> torch.Tensor:
        """What the env receives for the stored `actions` (the same, unless a controller stores
        raw samples that the env's bounds still have to be applied to)."""
        return actions

    def forward(self, ep_batch: EpisodeBatch, t: int) -> torch.Tensor:
        """One step for every episode of the batch, carrying the hidden state: [B, N, A]."""
        x = self._to_rows(self._build_inputs(ep_batch, t, t + 1))  # [B * N, 1, in]
        out, self.hidden_states = self.agent(x, self.hidden_states)
        return out.view(ep_batch.batch_size, self.n_agents, -1)

    # --- training ---------------------------------------------------------------------------
    def forward_seq(self, batch: EpisodeBatch, inputs: torch.Tensor | None = None) -> torch.Tensor:
        """All steps of `batch` in one call from a fresh hidden state: [B, T, N, A].

        `inputs` from build_seq_inputs may be passed to share them between networks."""
        if inputs is None:
            inputs = self.build_seq_inputs(batch)
        bn, t = inputs.shape[:2]
        out, _ = self.agent(inputs, self.agent.init_hidden(bn))
        return out.view(bn // self.n_agents, self.n_agents, t, -1).transpose(1, 2)

    def build_seq_inputs(self, batch: EpisodeBatch) -> torch.Tensor:
        """[B * N, T, input_shape]: one row per (episode, agent), time along dim 1."""
        return self._to_rows(self._build_inputs(batch, 0, batch.max_seq_length))

    def init_hidden(self, batch_size: int) -> None:
        self.hidden_states = self.agent.init_hidden(batch_size * self.n_agents)
        self.action_selector.start_episode(batch_size, self.n_agents, self.device())

    def device(self) -> torch.device:
        return next(self.agent.parameters()).device

    def episode_data(self) -> dict[str, torch.Tensor]:
        """Episode-constant fields the runners store with each episode (none here)."""
        return {}

    # --- inputs -----------------------------------------------------------------------------
    def _to_rows(self, inputs):
        # [B, T, N, in] -> [B * N, T, in]: the agent network's rows
        b, t = inputs.shape[:2]
        return inputs.transpose(1, 2).reshape(b * self.n_agents, t, -1)

    def _build_inputs(self, batch, t0, t1):
        # -> [B, t1 - t0, N, input_shape]: obs, last action one-hot, agent id one-hot
        obs = batch["obs"][:, t0:t1]
        parts = [obs]
        if self.args.obs_last_action:
            onehot = self.last_actions(batch)
            if t0 == 0:  # no action before the first step
                last = torch.cat([torch.zeros_like(onehot[:, :1]), onehot[:, : t1 - 1]], dim=1)
            else:
                last = onehot[:, t0 - 1 : t1 - 1]
            parts.append(last)
        if self.args.obs_agent_id:
            if self._agent_ids is None or self._agent_ids.device != obs.device:
                self._agent_ids = torch.eye(self.n_agents, device=obs.device)
            parts.append(self._agent_ids.expand(*obs.shape[:2], -1, -1))
        return torch.cat(parts, dim=-1) if len(parts) > 1 else obs

    def last_actions(self, batch: EpisodeBatch) -> torch.Tensor:
        """The actions an agent sees as its previous ones, [B, T, N, A]."""
        return batch[self.form.last_action_key]

    def _get_input_shape(self, scheme):
        input_shape = scheme["obs"]["vshape"]
        input_shape = input_shape if isinstance(input_shape, int) else input_shape[0]
        if self.args.obs_last_action:
            input_shape += scheme[self.form.last_action_key]["vshape"][0]
        if self.args.obs_agent_id:
            input_shape += self.n_agents
        return input_shape

    # --- parameters -------------------------------------------------------------------------
    def parameters(self) -> Iterator[torch.nn.Parameter]:
        return self.agent.parameters()

    def load_state(self, other_mac: BasicMAC) -> None:
        self.agent.load_state_dict(other_mac.agent.state_dict())

    def state_dict(self) -> dict:
        return self.agent.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.agent.load_state_dict(state)

    def to(self, device: str | torch.device) -> BasicMAC:
        self.agent.to(device)
        return self
