from __future__ import annotations

import math
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F

from components.policies import CategoricalPolicy, GaussianPolicy
from components.schedules import LinearSchedule
from controllers.basic_controller import BasicMAC
from modules.agents import REGISTRY as agent_REGISTRY
from utils.errors import ConfigError

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch, Index


class ACMAC(BasicMAC):
    """Stochastic decentralised actors for the policy-gradient learners (IA2C, IPPO, MAA2C,
    MAPPO, COMA): the agent network's outputs are the logits of a categorical policy over the
    available actions, or the means of a Gaussian with a learned state-independent log std
    (components/policies.py). The policy follows the env's action space, so no action_selector
    is consulted. Training samples the policy; tests take its mode (test_greedy) or sample it.

    Continuous actions are stored as the raw Gaussian samples (what the log-probabilities are
    of) and mapped onto the env's bounds only on their way to the env. policy_std=network makes
    the standard deviation an output of the actor too (BenchMARL's and TorchRL's default): the
    network gives a mean and a scale per dimension, scale = softplus(x + b) + 1e-4 with b such
    that the initial scale is about 1."""

    SCALE_BIAS = math.log(math.expm1(1.0))  # softplus(SCALE_BIAS) = 1
    MIN_SCALE = 1e-4

    def __init__(self, scheme: dict, groups: dict[str, int], args: SimpleNamespace) -> None:
        super().__init__(scheme, groups, args)
        if self.continuous:
            self.policy = GaussianPolicy(
                args.action_low, args.action_high, args.squash, args.log_std_min, args.log_std_max
            )
            if not self.std_from_network:
                n_nets = 1 if args.agent_param_sharing else self.n_agents
                # A parameter of the agent module, so it is trained, saved and moved with it.
                self.agent.log_std = nn.Parameter(
                    torch.full((n_nets, args.n_actions), float(args.log_std_init))
                )
        else:
            self.policy = CategoricalPolicy()
        self.floor = None  # policy_epsilon_floor: the floor's schedule over training steps
        if args.policy_epsilon_floor:
            if self.continuous:
                raise ConfigError(
                    "policy_epsilon_floor=True is for discrete actions; this env's are continuous"
                )
            self.floor = LinearSchedule(args.epsilon_start, args.epsilon_finish, args.epsilon_anneal_time)

    @property
    def std_from_network(self) -> bool:
        return self.continuous and self.args.policy_std == "network"

    def _make_agent(self):
        if not self.std_from_network:
            return super()._make_agent()
        return agent_REGISTRY[self.args.agent](
            self.input_shape, self.args, output_dim=2 * self.args.n_actions
        )

    def _build_selector(self, args):
        return None

    def split(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the policy's parameters: logits or means, log std or None) from network outputs."""
        if not self.std_from_network:
            return out, self.log_std()
        a = self.args.n_actions
        scale = F.softplus(out[..., a:] + self.SCALE_BIAS) + self.MIN_SCALE
        return out[..., :a], scale.log()

    def init_hidden(self, batch_size: int) -> None:
        self.hidden_states = self.agent.init_hidden(batch_size * self.n_agents)

    def log_std(self) -> torch.Tensor | None:
        """[N, A] log standard deviations (continuous actions with a learned parameter), else None."""
        if not self.continuous or self.std_from_network:
            return None
        return self.agent.log_std.expand(self.n_agents, -1)

    # --- acting -----------------------------------------------------------------------------
    @torch.inference_mode()
    def select_actions(
        self, ep_batch: EpisodeBatch, t_ep: int, t_env: int, bs: Index = slice(None), test_mode: bool = False
    ) -> torch.Tensor:
        avail = ep_batch["avail_actions"][bs, t_ep]
        out = self.forward(ep_batch, t_ep)[bs]
        if self.floor is not None and not test_mode:  # the learner then uses the same floor
            self.policy.floor = self.floor.eval(t_env)
        out, log_std = self.split(out)
        if test_mode and self.args.test_greedy:
            return self.policy.mode(out, avail)
        return self.policy.sample(out, avail, log_std)

    def env_actions(self, actions: torch.Tensor, ep_batch: EpisodeBatch, t: int, bs: Index) -> torch.Tensor:
        if not self.continuous:
            return actions
        return self.policy.env_actions(actions, ep_batch["avail_actions"][bs, t])

    def last_actions(self, batch: EpisodeBatch) -> torch.Tensor:
        if not self.continuous:
            return super().last_actions(batch)
        return self.policy.env_actions(batch["actions"], batch["avail_actions"])

    # --- the learners' view -----------------------------------------------------------------
    def log_probs(self, out: torch.Tensor, avail: torch.Tensor) -> torch.Tensor:
        """log pi of every action [B, T, N, A] (discrete actions)."""
        return self.policy.log_probs(out, avail)

    def evaluate(
        self, out: torch.Tensor, actions: torch.Tensor, avail: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(actions) and entropies [B, T, N] from outputs [B, T, N, A] (actions: [.., 1]
        indices or raw continuous samples [.., A])."""
        out, log_std = self.split(out)
        return self.policy.evaluate(out, actions, avail, log_std)

    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Clip the agent networks (each on its own norm when they are not shared)."""
        if self.args.agent_param_sharing:
            return torch.nn.utils.clip_grad_norm_(self.agent.parameters(), max_norm)
        return self.agent.clip_grad_norm_(max_norm)
