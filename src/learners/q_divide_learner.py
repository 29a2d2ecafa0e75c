from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from learners.q_learner import QLearner
from learners.selection import MODES, per_beta, selected_ratio, selection_weights
from utils.errors import ConfigError
from utils.registry import unknown_name_message
from utils.rl_utils import alive_mask

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch
    from controllers.basic_controller import BasicMAC
    from utils.logger import Logger


class QDivideLearner(QLearner):
    """DIFFER (Hu et al. 2023): the mixer learns from the team TD error; the agent network learns
    from individual TD errors whose rewards are decomposed from the team error,

        rho_i = clamp(dL/dQ_i / dL/dQ_tot, -10, 10)  (= dQ_tot/dQ_i; QPLEX gives it directly)
        r_i   = -rho_i * delta_tot + Q_i - gamma * (1 - D_i) * Q_i^next
        delta_i = Q_i - (r_i + gamma * (1 - D_i) * Q_i^next)  (= rho_i * delta_tot)

    and weighted by a selection of (episode, step, agent) samples (learners/selection.py).
    Two optimisers: one for the mixer, one for the agent network, each clipped on its own."""

    mixer = "required"

    def __init__(self, mac: BasicMAC, scheme: dict, logger: Logger, args: SimpleNamespace) -> None:
        super().__init__(mac, scheme, logger, args)
        self.last = {}

    @classmethod
    def validate(cls, config: dict) -> None:
        if config["selected"] not in MODES:
            raise ConfigError(unknown_name_message("selected", config["selected"], list(MODES)))

    def _make_optimisers(self):
        # Separate optimisers instead of QLearner's single one over agent and mixer.
        self.agent_params = list(self.mac.parameters())
        self.mixer_params = list(self.mixer.parameters())
        self.q_optimiser = self.add_optimiser("q_optimiser", self.agent_params)
        # VDN has no parameters: nothing to optimise, and rho is exactly 1.
        self.mixer_optimiser = (
            self.add_optimiser("mixer_optimiser", self.mixer_params) if self.mixer_params else None
        )

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        args = self.args
        out = self.forward_and_targets(batch)
        mask, q_taken, team_targets = out.mask, out.q_taken, out.targets
        indi_terminated = batch["indi_terminated"][:, :-1].float()  # D: [B, T, N]
        q_next = out.q_next[:, 1:]

        # --- mixer on a detached leaf: its input gradient gives rho ---
        q_leaf = q_taken.detach().clone().requires_grad_(True)
        states = batch["state"][:, :-1]
        if hasattr(self.mixer, "forward_with_jacobian"):
            # QPLEX stops part of dQ_tot/dQ_i in its training gradient; rho takes the whole of it.
            q_tot, jacobian = self.mixer.forward_with_jacobian(q_leaf, states, **out.mix_kwargs)
        else:
            q_tot, jacobian = self.mixer(q_leaf, states, **out.mix_kwargs), None  # [B, T, 1]
        q_tot.retain_grad()
        delta_tot = q_tot - team_targets
        n_valid_team = mask.sum()
        mixer_loss = ((delta_tot * mask) ** 2).sum() / n_valid_team
        if self.mixer_optimiser is not None:
            self.mixer_optimiser.zero_grad(set_to_none=True)
        mixer_loss.backward()  # stepped below, once rho is read from the input gradients
        if jacobian is not None:
            rho = (jacobian.detach() * mask).clamp(-10.0, 10.0)
        else:
            g_tot, g_i = q_tot.grad, q_leaf.grad  # [B, T, 1], [B, T, N]
            nonzero = g_tot != 0
            rho = torch.where(
                nonzero, g_i / torch.where(nonzero, g_tot, torch.ones_like(g_tot)), torch.zeros_like(g_i)
            ).clamp(-10.0, 10.0)
        if self.mixer_optimiser is not None:
            mixer_grad_norm = torch.nn.utils.clip_grad_norm_(self.mixer_params, args.grad_norm_clip)
            self.mixer_optimiser.step()
        else:
            mixer_grad_norm = torch.zeros(())
        delta_tot = delta_tot.detach()

        # --- individual rewards, targets and mask ---
        with torch.no_grad():
            bootstrap = args.gamma * (1 - indi_terminated) * q_next
            reward_i = -rho * delta_tot + q_taken.detach() - bootstrap
            targets_i = reward_i + bootstrap
            # An agent drops out from the step after the one at whose end it died.
            indi_mask = mask * alive_mask(batch)[:, :-1]
        delta_i = (q_taken - targets_i) * indi_mask
        with torch.no_grad():
            ratio = selected_ratio(args, t_env)
            weights = selection_weights(
                delta_i.detach().abs(),
                indi_mask,
                args.selected,
                ratio,
                args.selected_alpha,
                args.selected_epsilon,
                per_beta(args, t_env),
            )
        n_valid = indi_mask.sum()
        q_loss = (delta_i**2 * weights).sum() / n_valid
        q_grad_norm = self.step(self.q_optimiser, q_loss, self.agent_params)
        self.finish_update(episode_num)
        # The last update's decomposition, for inspection and tests (references, no copies).
        self.last = dict(
            rho=rho,
            delta_tot=delta_tot,
            reward_i=reward_i,
            delta_i=delta_i.detach(),
            indi_mask=indi_mask,
            weights=weights,
            q_taken=q_taken.detach(),
            q_next=q_next,
            mixer_loss=mixer_loss.detach(),
            q_loss=q_loss.detach(),
        )

        if self.log_due(t_env):
            self.log(
                t_env,
                selected_ratio=ratio,
                mixer_loss=mixer_loss,
                mixer_grad_norm=mixer_grad_norm,
                mixer_td_error_abs=(delta_tot * mask).abs().sum() / n_valid_team,
                mixer_target_mean=(team_targets * mask).sum() / n_valid_team,
                q_loss=q_loss,
                q_grad_norm=q_grad_norm,
                q_td_error_abs=delta_i.abs().sum() / n_valid,
                q_taken_mean=(q_taken * indi_mask).sum() / n_valid,
                reward_i_mean=(reward_i * indi_mask).sum() / n_valid,
                q_selected_weight_mean=(weights * indi_mask).sum() / n_valid,
            )
