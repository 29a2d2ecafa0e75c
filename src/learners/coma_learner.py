from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from learners.policy_gradient import PolicyGradientLearner
from utils.errors import ConfigError
from utils.rl_utils import lambda_returns, masked_mean, nstep_returns

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch


class COMALearner(PolicyGradientLearner):
    """COMA: a centralised critic Q_i(s, u^{-i}, .) of every action of agent i, trained on n-step
    (EPyMARL) or TD(lambda) (PyMARL) targets on the target critic's values of the actions taken;
    the policy gradient uses the counterfactual advantage Q_i(u_i) - sum_a pi(a) Q_i(a), with the
    critic's values from before its step (EPyMARL's batch cadence)."""

    action_spaces = ("discrete",)
    critics = ("coma_critic",)
    return_estimators = ("nstep", "td_lambda")

    @classmethod
    def validate(cls, config: dict) -> None:
        super().validate(config)
        if not config["common_reward"]:
            raise ConfigError(
                "learner=coma_learner's counterfactual baseline needs one team reward: set common_reward=True"
            )
        if config["value_norm"] != "none":
            raise ConfigError("learner=coma_learner uses no value normalisation; set value_norm=none")

    def critic_loss(self, sq_error, q_mask, m) -> torch.Tensor:
        """mean: over the agent-steps in q_mask; agent_sum: each step's errors summed over those
        agents, averaged over the valid steps (EPyMARL)."""
        if self.args.coma_critic_loss == "agent_sum":
            return (sq_error * q_mask).sum() / m[..., 0].sum().clamp(min=1.0)
        return masked_mean(sq_error, q_mask)

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        self.logging = self.log_due(t_env)
        args = self.args
        rewards, terminated, m, p, q_mask, alive_m = self.masks(batch)
        actions = batch["actions"].long()  # [B, T+1, N, 1]; index T: the runner's extra action
        q = self.critic.values(batch)  # [B, T+1, N, A]
        q_taken = q.gather(3, actions).squeeze(3)
        with torch.no_grad():
            source = q if self.target_critic is None else self.target_critic.values(batch)
            z = source.gather(3, actions).squeeze(3)  # [B, T+1, N]
            if args.return_estimator == "td_lambda":
                returns = lambda_returns(rewards, terminated, m, z, args.gamma, args.td_lambda)
            else:
                returns = nstep_returns(rewards, terminated, m, z, args.gamma, args.q_nstep)
        self.critic_step(self.critic_loss((q_taken[:, :-1] - returns) ** 2, q_mask, m))

        avail = batch["avail_actions"][:, :-1]
        out = self.mac.forward_seq(batch)[:, :-1]
        log_pi = self.mac.log_probs(out, avail)  # [B, T, N, A]
        q_before = q[:, :-1].detach()
        baseline = (log_pi.exp().detach() * q_before).sum(-1)
        advantages = self.normalise_advantages((q_taken[:, :-1].detach() - baseline) * m, p)
        logp = log_pi.gather(3, actions[:, :-1]).squeeze(3)
        entropy = self.mac.policy.entropy_of(log_pi, avail)
        self.actor_step(-masked_mean(advantages * logp + args.entropy_coef * entropy, p))
        self.finish_update(episode_num)
        self.record(p, q_mask, m, alive_m, out, avail, entropy, q_taken[:, :-1].detach(), returns)
        self.flush_stats(t_env)
