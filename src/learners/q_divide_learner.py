from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from learners.q_learner import QLearner
from learners.selection import MODES, per_beta, selected_ratio, selection_weights
from learners.sharing_rows import ROW_TARGETS, expected_selection_weights, gather_rows
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

    and weighted by a selection of (episode, step, agent) samples (learners/selection.py), plus,
    where asked, the errors agents share with each other (learners/sharing.py).
    Two optimisers: one for the mixer, one for the agent network, each clipped on its own."""

    mixer_use = "required"

    def __init__(self, mac: BasicMAC, scheme: dict, logger: Logger, args: SimpleNamespace) -> None:
        super().__init__(mac, scheme, logger, args)
        self.last = {}

    @classmethod
    def validate(cls, config: dict) -> None:
        if config["selected"] not in MODES:
            raise ConfigError(unknown_name_message("selected", config["selected"], list(MODES)))
        super().validate(config)

    def _make_optimisers(self):
        # Separate optimisers instead of QLearner's single one over agent and mixer.
        self.agent_params = list(self.mac.parameters())
        self.mixer_params = list(self.mixer.parameters())
        self.q_optimiser = self.add_optimiser("q_optimiser", self.agent_params)
        # VDN has no parameters: nothing to optimise, and rho is exactly 1.
        self.mixer_optimiser = (
            self.add_optimiser("mixer_optimiser", self.mixer_params) if self.mixer_params else None
        )

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> dict | None:
        """One update, in steps a subclass or a rule can replace: the mixer's team step (rho),
        the individual errors, DIFFER's selection, sharing, the agent network's step."""
        out = self.forward_and_targets(batch)
        team = self.team_step(batch, out)
        indi = self.individual_errors(batch, out, team)
        weights, ratio = self.selection(indi, t_env)
        shared = self.sharing(batch, indi, t_env)
        rows = None
        if shared is not None and self.args.share_target in ROW_TARGETS:
            weights, q_loss, rows = self.row_loss(batch, indi, shared, ratio, t_env)
        else:
            if shared is not None and self.args.share_target == "reweight":
                weights = weights + shared.extra
            q_loss = self.agent_loss(batch, out, indi, weights, shared)
        row_stats = (
            self.row_stats(indi, rows, ratio, t_env) if rows is not None and self.log_due(t_env) else {}
        )
        q_grad_norm = self.step(self.q_optimiser, q_loss, self.agent_params)
        self.finish_update(episode_num)
        # The last update's decomposition, for inspection and tests (references, no copies).
        self.last = dict(
            rho=team.rho,
            delta_tot=team.delta_tot,
            reward_i=indi.reward_i,
            delta_i=indi.delta_i.detach(),
            indi_mask=indi.mask,
            weights=weights,
            q_taken=out.q_taken.detach(),
            q_next=indi.q_next,
            mixer_loss=team.loss.detach(),
            q_loss=q_loss.detach(),
            shared=shared,
        )

        if self.log_due(t_env):
            mask, n_valid_team, n_valid = out.mask, team.n_valid, indi.mask.sum()
            delta_i, indi_mask = indi.delta_i, indi.mask
            # rho near 0 means the mixer no longer reads the agents' utilities (and delta_i fades);
            # the signed means show whether extra weight lands on one sign of delta_i.
            lean = {}
            if shared is not None and rows is None and (mass := shared.extra.sum()) > 0:
                lean["share_delta_i_mean"] = (shared.extra * delta_i).sum() / mass
            self.log(
                t_env,
                selected_ratio=ratio,
                mixer_loss=team.loss,
                mixer_grad_norm=team.grad_norm,
                mixer_td_error_abs=(team.delta_tot * mask).abs().sum() / n_valid_team,
                mixer_target_mean=(out.targets * mask).sum() / n_valid_team,
                q_loss=q_loss,
                q_grad_norm=q_grad_norm,
                q_td_error_abs=delta_i.abs().sum() / n_valid,
                q_taken_mean=(out.q_taken * indi_mask).sum() / n_valid,
                reward_i_mean=(indi.reward_i * indi_mask).sum() / n_valid,
                q_selected_weight_mean=(weights * indi_mask).sum() / n_valid,
                rho_abs_mean=(team.rho.abs() * indi_mask).sum() / n_valid,
                delta_i_mean=delta_i.sum() / n_valid,
                **(shared.stats if shared is not None else {}),
                **lean,
                **row_stats,
            )
        return self.feedback(team.delta_tot * out.mask, out.mask)

    # --- the steps ----------------------------------------------------------------------------
    def team_step(self, batch: EpisodeBatch, out) -> SimpleNamespace:
        """The mixer's update on the team TD error, on a detached leaf whose input gradient gives
        rho = dQ_tot/dQ_i. -> rho [B, T, N], delta_tot [B, T, 1] (detached), loss, grad_norm."""
        args, mask = self.args, out.mask
        q_leaf = out.q_taken.detach().clone().requires_grad_(True)
        states = batch["state"][:, :-1]
        if hasattr(self.mixer, "forward_with_jacobian"):
            # QPLEX stops part of dQ_tot/dQ_i in its training gradient; rho takes the whole of it.
            q_tot, jacobian = self.mixer.forward_with_jacobian(q_leaf, states, **out.mix_kwargs)
        else:
            q_tot, jacobian = self.mixer(q_leaf, states, **out.mix_kwargs), None  # [B, T, 1]
        q_tot.retain_grad()
        delta_tot = q_tot - out.targets
        n_valid_team = mask.sum()
        squared = self.weigh_episodes((delta_tot * mask) ** 2, batch)
        mixer_loss = squared.sum() / n_valid_team
        penalty = self.mixer_penalty(batch, out)
        if penalty is not None:
            mixer_loss = mixer_loss + penalty
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
        return SimpleNamespace(
            rho=rho,
            delta_tot=delta_tot.detach(),
            loss=mixer_loss,
            grad_norm=mixer_grad_norm,
            n_valid=n_valid_team,
        )

    def individual_errors(self, batch: EpisodeBatch, out, team) -> SimpleNamespace:
        """DIFFER's individual rewards r_i and errors delta_i [B, T, N] (masked to the steps at
        which each agent is alive), with what they were made from."""
        args = self.args
        indi_terminated = batch["indi_terminated"][:, :-1].float()  # D: [B, T, N]
        q_next = out.q_next[:, 1:]
        with torch.no_grad():
            bootstrap = args.gamma * (1 - indi_terminated) * q_next
            reward_i = -team.rho * team.delta_tot + out.q_taken.detach() - bootstrap
            targets_i = reward_i + bootstrap
            # An agent drops out from the step after the one at whose end it died.
            indi_mask = out.mask * alive_mask(batch)[:, :-1]
        delta_i = (out.q_taken - targets_i) * indi_mask
        return SimpleNamespace(
            delta_i=delta_i, mask=indi_mask, reward_i=reward_i, q_next=q_next, terminated=indi_terminated
        )

    def selection(self, indi, t_env: int) -> tuple[torch.Tensor, float]:
        """DIFFER's selection weights W [B, T, N] (learners/selection.py) and the ratio used."""
        args = self.args
        with torch.no_grad():
            ratio = selected_ratio(args, t_env)
            weights = selection_weights(
                indi.delta_i.detach().abs(),
                indi.mask,
                args.selected,
                ratio,
                args.selected_alpha,
                args.selected_epsilon,
                per_beta(args, t_env),
            )
        return weights, ratio

    def sharing(self, batch: EpisodeBatch, indi, t_env: int) -> SimpleNamespace | None:
        """Who shares which errors with whom (learners/sharing.py), or None without sharing."""
        if self.sharer is None:
            return None
        with torch.no_grad():
            return self.sharer.share(indi.delta_i, indi.mask, batch, t_env)

    def row_loss(self, batch: EpisodeBatch, indi, shared, ratio: float, t_env: int):
        """Received errors as extra rows after the batch's own (learners/sharing_rows.py): DIFFER's
        selection runs over both, and the loss is sum W delta^2 over both / the count of both's
        valid entries. detached_rows: the extra rows carry no gradient. -> (the real rows'
        weights, the loss, what the rows were made of)."""
        args, b = self.args, indi.delta_i.shape[0]
        received = gather_rows(indi.delta_i, shared.source, shared.has, args.share_target == "detached_rows")
        pool_mask = torch.cat([indi.mask, (received.detach() != 0).to(indi.mask.dtype)], 0)
        pool_e = torch.cat([indi.delta_i.detach().abs(), received.detach().abs()], 0) * pool_mask
        with torch.no_grad():
            pool_w = selection_weights(
                pool_e, pool_mask, args.selected, ratio, args.selected_alpha, args.selected_epsilon,
                per_beta(args, t_env),
            )  # fmt: skip
        weights, received_w = pool_w[:b], pool_w[b:]
        squared = torch.cat([indi.delta_i**2 * weights, received**2 * received_w], 0)
        squared = self.weigh_episodes(squared, batch, copies=2)  # the real rows, then the received
        n = pool_mask.sum()
        q_loss = squared.sum() / n
        rows = SimpleNamespace(received=received, received_w=received_w, pool_mask=pool_mask, n=n)
        return weights, q_loss, rows

    def row_stats(self, indi, rows, ratio: float, t_env: int) -> dict:
        """What the extra rows did to this update: how many, the share of the loss's count they
        add, the change they make in the real rows' expected selection weights (relative to the
        weights without them), and the gradient norm their own terms give the agent network (0
        for detached rows, whose terms hold no gradient)."""
        args, b = self.args, indi.delta_i.shape[0]
        n_received = rows.pool_mask[b:].sum()
        e = indi.delta_i.detach().abs()
        pool_e = torch.cat([e, rows.received.detach().abs()], 0) * rows.pool_mask
        beta = per_beta(args, t_env)
        terms = (args.selected_alpha, args.selected_epsilon, beta)
        if args.selected == "PER_weight":
            alone = expected_selection_weights(e * indi.mask, indi.mask, ratio, *terms)
            along = expected_selection_weights(pool_e, rows.pool_mask, ratio, *terms)[:b]
            change = ((along - alone).abs() * indi.mask).sum() / (alone * indi.mask).sum().clamp(min=1e-12)
        else:
            change = torch.zeros(())
        own = (rows.received**2 * rows.received_w).sum() / rows.n
        if own.requires_grad:
            grads = torch.autograd.grad(own, self.agent_params, retain_graph=True, allow_unused=True)
            grad_norm = torch.sqrt(sum((g**2).sum() for g in grads if g is not None))
        else:
            grad_norm = torch.zeros(())
        return dict(
            share_rows_received=n_received,
            share_rows_count_added=n_received / rows.n,
            share_rows_weight_change=change,
            share_rows_grad_norm=grad_norm,
        )

    def agent_loss(self, batch: EpisodeBatch, out, indi, weights, shared) -> torch.Tensor:
        """sum W delta_i^2 / valid agent-steps (episodes weighted by PER's importance weights),
        plus, with share_target=receiver, the receivers' own errors on the shared transitions."""
        delta_i, n_valid = indi.delta_i, indi.mask.sum()
        q_loss = self.weigh_episodes(delta_i**2 * weights, batch).sum() / n_valid
        if shared is not None and self.args.share_target == "receiver":
            q_loss = q_loss + self.receiver_loss(batch, indi.reward_i, indi.terminated, shared) / n_valid
        return q_loss
