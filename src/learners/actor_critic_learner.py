from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from learners.policy_gradient import PolicyGradientLearner
from utils.rl_utils import masked_mean

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch


class ActorCriticLearner(PolicyGradientLearner):
    """IA2C (critic=ac_critic) and MAA2C (critic=cv_critic): one critic step on n-step or
    GAE(lambda) targets, then one policy-gradient step with advantages G - V taken from the
    critic before its step, and an entropy bonus."""

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        self.logging = self.log_due(t_env)
        args = self.args
        rewards, terminated, m, policy_m, value_m, alive_m = self.masks(batch)
        v = self.critic.values(batch)  # [B, T+1, N], normalised units if value_norm
        with torch.no_grad():
            vb = self.target_critic.values(batch) if self.target_critic is not None else v.detach()
            values = self.denormalise(v.detach()[:, :-1])
            returns, advantages = self.targets(rewards, terminated, m, values, self.denormalise(vb))
            critic_target = self.critic_targets(returns, value_m, update=True)
        self.critic_step(self.value_loss(v[:, :-1], critic_target, value_m))

        advantages = self.normalise_advantages(advantages, policy_m)
        out, logp, entropy = self.policy(batch)
        self.actor_step(-masked_mean(advantages * logp + args.entropy_coef * entropy, policy_m))
        self.finish_update(episode_num)
        self.record(
            policy_m, value_m, m, alive_m, out, batch["avail_actions"][:, :-1], entropy, values, returns
        )
        self.flush_stats(t_env)
