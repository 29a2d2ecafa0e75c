from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from components.action_forms import MASKED_LOGIT, DiscreteActions, SquashedGaussianActions
from learners.maddpg_learner import MADDPGLearner
from utils.errors import ConfigError

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch


class MASACLearner(MADDPGLearner):
    """MASAC: soft actor-critic per agent with centralised critics Q_i(x, a_1 .. a_N)
    (critic=maddpg_critic) or local ones Q_i(o_i, a_i) (ISAC, critic=local_critic), twin critics
    and a learned temperature alpha_i per agent.

    Discrete actions, pi_i = softmax of the available logits, expectations over agent i's own
    action a (the others' from a sample of their policies at x', from the buffer at x):
        y_i   = r_i + gamma (1 - d) sum_a pi_i(a|o'_i) [min_k Q'_k,i(x', a'_-i, a) - alpha_i log pi_i(a|o'_i)]
        J_pi  = sum_a pi_i(a|o_i) [alpha_i log pi_i(a|o_i) - min_k Q_k,i(x, a_-i, a)]
        J_a   = -log alpha_i (sum_a pi_i log pi_i + H_i)
    Continuous actions (continuous_actor=squashed_gaussian): the same with one reparameterised
    sample a ~ pi_i instead of the sum, and log pi with the tanh correction. H_i = target_entropy,
    or by default -(action dimensions) / target_entropy_ratio * log(available actions)."""

    def __init__(self, mac, scheme, logger, args):
        super().__init__(mac, scheme, logger, args)
        self._check_form()
        self.log_alpha = torch.nn.Parameter(torch.full((args.n_agents,), math.log(args.alpha_init)))
        self.add_network("log_alpha", _ParamHolder(self.log_alpha), target=False)
        self.alpha_optimiser = self.add_optimiser(
            "alpha_optimiser", [self.log_alpha], lr=args.alpha_lr or args.critic_lr or args.lr
        )

    @classmethod
    def validate(cls, config: dict) -> None:
        super().validate(config)
        if not config["twin_critics"]:
            raise ConfigError(f"learner={config['learner']} needs twin_critics=True (SAC's clipped double Q)")

    def _check_form(self):
        form = self.mac.form
        if not isinstance(form, (DiscreteActions, SquashedGaussianActions)):
            raise ConfigError(
                "learner=masac_learner needs a stochastic actor: discrete actions, or continuous "
                f"ones with continuous_actor=squashed_gaussian (got {self.args.continuous_actor})"
            )
        return form

    # --- discrete: values of every own action at once ---------------------------------------
    def _all_own_actions(self, state, others, obs, t, critics):
        """min_k Q_k,i(x, a_-i, a) for every own action a: [B, T, N, A]. others [B, T, N, A] are
        the joint action's other blocks (agent i's block is replaced by each a in turn)."""
        b, tt, n, a = others.shape
        eye_n = torch.eye(n, device=others.device).view(1, 1, n, 1, n, 1)
        eye_a = torch.eye(a, device=others.device).view(1, 1, 1, a, 1, a)
        joint = others.view(b, tt, 1, 1, n, a) * (1 - eye_n) + eye_a * eye_n  # [B, T, N, A, N, A]
        # fold own actions into time: rows [B, T * A, N, N * A]
        joint = joint.permute(0, 1, 3, 2, 4, 5).reshape(b, tt * a, n, n * a)
        st = state[:, t].repeat_interleave(a, dim=1)
        ob = None if obs is None else obs[:, t].repeat_interleave(a, dim=1)
        inputs = self.critics[0].build_inputs(st, joint, ob)
        q = torch.stack([c(inputs) for c in critics]).min(dim=0).values  # [B, T * A, N]
        return q.view(b, tt, a, n).transpose(2, 3)

    def _discrete_policy(self, out, avail):
        logits = out.masked_fill(avail == 0, MASKED_LOGIT)
        log_pi = F.log_softmax(logits, dim=-1)
        pi = log_pi.exp() * (avail > 0)
        return pi, log_pi.masked_fill(avail == 0, 0.0)

    def _target_entropy(self, avail):
        """H_i per (batch, step, agent): the configured value, or SAC's default."""
        if self.args.target_entropy is not None:
            return torch.full(avail.shape[:-1], float(self.args.target_entropy), device=avail.device)
        if self.mac.continuous:
            return -(avail > 0).sum(dim=-1).float()
        return self.args.target_entropy_ratio * torch.log((avail > 0).sum(dim=-1).clamp(min=1).float())

    @torch.no_grad()
    def critic_targets(self, batch, inputs, out, rewards, terminated, obs):
        """Soft targets y_i [B, T, N] from the current policies at x' (online outputs `out`)
        and the target critics."""
        form, avail, state, nxt = self.mac.form, batch["avail_actions"][:, 1:], batch["state"], slice(1, None)
        alpha = self.log_alpha.exp()
        out_next = out[:, 1:].detach()
        if self.mac.continuous:
            a_next, logp_next = form.sample(out_next, avail)
            next_inputs = self._critic_inputs(state, self._joint(a_next), obs, nxt)
            q_next = torch.stack([c(next_inputs) for c in self.target_critics]).min(dim=0).values
            v_next = q_next - alpha * logp_next
        else:
            pi_next, logp_next = self._discrete_policy(out_next, avail)
            sampled = form.smoothed_target(out_next, avail, 0.0, 0.0)  # the others' sampled actions
            q_next = self._all_own_actions(state, sampled, obs, nxt, self.target_critics)
            v_next = (pi_next * (q_next - alpha[:, None] * logp_next)).sum(dim=-1)
        return rewards + self.args.gamma * (1 - terminated) * v_next

    def actor_terms(self, batch, out, actions, obs, alpha):
        """Per (episode, step, agent): the actor loss term alpha_i log pi - min_k Q_k,i (its
        expectation under pi_i for discrete actions) and E[log pi_i] (detached). out, actions
        [B, T, N, *] at the steps x; the others' actions are the buffer's (or, with
        actor_other_actions=policy, samples of their current policies)."""
        form = self.mac.form
        avail = batch["avail_actions"][:, :-1]
        state, prev = batch["state"], slice(None, -1)
        policy_others = self.args.actor_other_actions == "policy"
        if self.mac.continuous:
            a_now, logp = form.sample(out, avail)
            joint = self._own_into_joint(a_now, a_now.detach() if policy_others else actions)
            joint_inputs = self._critic_inputs(state, joint, obs, prev)
            q_pi = torch.stack([c(joint_inputs) for c in self.critics]).min(dim=0).values
            return alpha * logp - q_pi, logp.detach()
        pi, logp_all = self._discrete_policy(out, avail)
        others = form.smoothed_target(out.detach(), avail, 0.0, 0.0) if policy_others else actions
        q_all = self._all_own_actions(state, others, obs, prev, self.critics)
        per_agent = (pi * (alpha[:, None] * logp_all - q_all)).sum(dim=-1)
        return per_agent, (pi * logp_all).sum(dim=-1).detach()

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        inputs = self.mac.build_seq_inputs(batch)
        out = self.mac.forward_seq(batch, inputs)  # [B, T+1, N, *], with gradient (actor below)
        # --- critics: soft targets from the current policy and the target critics ---
        actions, obs, mask_n, n_valid, stats = self.update_critics(batch, inputs, out)

        # --- actors: minimise alpha log pi - min_k Q_k (critics frozen) ---
        alpha = self.log_alpha.exp().detach()  # [N]
        for c in self.critics:
            c.requires_grad_(False)
        per_agent, log_pi = self.actor_terms(batch, out[:, :-1], actions[:, :-1], obs, alpha)
        for c in self.critics:
            c.requires_grad_(True)
        actor_loss = (per_agent * mask_n).sum() / n_valid
        actor_grad_norm = self.step(self.actor_optimiser, actor_loss, self._clip_actors)

        # --- temperature ---
        target_h = self._target_entropy(batch["avail_actions"][:, :-1])
        alpha_loss = temperature_loss(self.log_alpha, log_pi, target_h, mask_n)
        if self.args.auto_alpha:
            self.alpha_optimiser.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_optimiser.step()
        self.finish_update(episode_num)

        if self.log_due(t_env):
            self.log(
                t_env,
                **stats,
                actor_loss=actor_loss,
                actor_grad_norm=actor_grad_norm,
                entropy_mean=(-log_pi * mask_n).sum() / n_valid,
                alpha_mean=self.log_alpha.exp().mean(),
                alpha_loss=alpha_loss,
            )


def temperature_loss(log_alpha, log_pi, target_entropy, mask):
    """SAC's temperature loss -log alpha_i (E[log pi_i] + H_i), averaged over valid steps:
    its gradient raises alpha_i while agent i's entropy is below its target H_i."""
    return -(log_alpha * ((log_pi + target_entropy) * mask)).sum() / mask.sum()


class _ParamHolder(torch.nn.Module):
    """Makes a bare parameter a module, so checkpoints and device moves include it."""

    def __init__(self, param):
        super().__init__()
        self.param = param
