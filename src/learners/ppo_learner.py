from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from learners.policy_gradient import PolicyGradientLearner
from utils.errors import ConfigError
from utils.rl_utils import masked_mean, ppo_clip_objective

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch


class PPOLearner(PolicyGradientLearner):
    """IPPO (critic=ac_critic) and MAPPO (critic=cv_critic): the clipped surrogate objective over
    several epochs of the episodes just played. Behaviour log-probabilities come from the first
    actor pass, whose graph the first actor step then uses: nothing has changed the actor since it
    acted, so that pass is the behaviour policy.

    ppo_style=epymarl: each epoch takes one critic step and one actor step on the whole batch,
    advantages recomputed from the critic before its step (EPyMARL).
    ppo_style=mappo: values, targets and advantages are computed once; each epoch takes an actor
    and a critic step per minibatch of whole episodes (num_mini_batch), with value clipping
    around the values at collection (MAPPO)."""

    @classmethod
    def validate(cls, config: dict) -> None:
        super().validate(config)
        if config["ppo_style"] == "mappo" and config["num_mini_batch"] > config["batch_size"]:
            raise ConfigError(
                f"num_mini_batch={config['num_mini_batch']} minibatches of whole episodes need "
                f"batch_size >= {config['num_mini_batch']} (got {config['batch_size']})"
            )

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        self.logging = self.log_due(t_env)
        rewards, terminated, m, policy_m, value_m, alive_m = self.masks(batch)
        first = self.policy(batch)
        logp_old = first[1].detach()
        if self.args.ppo_style == "mappo":
            self._train_mappo(batch, rewards, terminated, m, policy_m, value_m, alive_m, logp_old, first)
        else:
            self._train_epymarl(batch, rewards, terminated, m, policy_m, value_m, alive_m, logp_old, first)
        self.finish_update(episode_num)
        self.flush_stats(t_env)

    def policy_loss(self, logp, logp_old, advantages, entropy, policy_m) -> torch.Tensor:
        args = self.args
        surrogate, ratio = ppo_clip_objective(logp, logp_old, advantages, args.eps_clip)
        with torch.no_grad():
            log_ratio = logp - logp_old
            self.stats["ratio_mean"].append(masked_mean(ratio, policy_m))
            self.stats["approx_kl"].append(masked_mean(ratio - 1 - log_ratio, policy_m))
            self.stats["clip_fraction"].append(
                masked_mean(((ratio - 1).abs() > args.eps_clip).float(), policy_m)
            )
        return -masked_mean(surrogate, policy_m) - args.entropy_coef * masked_mean(entropy, policy_m)

    def _train_epymarl(self, batch, rewards, terminated, m, policy_m, value_m, alive_m, logp_old, first):
        with torch.no_grad():
            vb = None if self.target_critic is None else self.target_critic.values(batch)
        for epoch in range(self.args.epochs):
            v = self.critic.values(batch)
            with torch.no_grad():
                values = self.denormalise(v.detach()[:, :-1])
                bootstrap = self.denormalise(v.detach() if vb is None else vb)
                returns, advantages = self.targets(rewards, terminated, m, values, bootstrap)
                critic_target = self.critic_targets(returns, value_m, update=epoch == 0)
            self.critic_step(self.value_loss(v[:, :-1], critic_target, value_m))
            advantages = self.normalise_advantages(advantages, policy_m)
            out, logp, entropy = first if epoch == 0 else self.policy(batch)
            self.actor_step(self.policy_loss(logp, logp_old, advantages, entropy, policy_m))
        self.record(
            policy_m, value_m, m, alive_m, out, batch["avail_actions"][:, :-1], entropy, values, returns
        )

    def _train_mappo(self, batch, rewards, terminated, m, policy_m, value_m, alive_m, logp_old, first):
        args = self.args
        with torch.no_grad():
            v_old = self.critic.values(batch)  # normalised units
            vb = v_old if self.target_critic is None else self.target_critic.values(batch)
            values = self.denormalise(v_old[:, :-1])
            returns, advantages = self.targets(rewards, terminated, m, values, self.denormalise(vb))
            advantages = self.normalise_advantages(advantages, policy_m)
        n_episodes = batch.batch_size
        size = n_episodes // args.num_mini_batch  # MAPPO drops the remainder
        fixed = (policy_m, value_m, m, alive_m, values, returns, advantages, logp_old, v_old[:, :-1])
        for epoch in range(args.epochs):
            order = torch.randperm(n_episodes)
            for k in range(args.num_mini_batch):
                if args.num_mini_batch > 1:
                    idx = order[k * size : (k + 1) * size]
                    mb, parts = batch[idx], [x[idx] for x in fixed]
                    pick = lambda x, idx=idx: x[idx]  # noqa: E731
                else:
                    mb, parts = batch, fixed
                    pick = lambda x: x  # noqa: E731
                mp, mq, mm, malive, mvalues, mreturns, madv, mlogp_old, mv_old = parts
                # episodes are independent rows of the actor, so the first pass serves any subset
                out, logp, entropy = (pick(x) for x in first) if epoch == k == 0 else self.policy(mb)
                self.actor_step(self.policy_loss(logp, mlogp_old, madv, entropy, mp))
                with torch.no_grad():
                    critic_target = self.critic_targets(mreturns, mq, update=True)
                v = self.critic.values(mb)[:, :-1]
                self.critic_step(self.value_loss(v, critic_target, mq, mv_old))
        # the figures of the last minibatch
        avail = mb["avail_actions"][:, :-1]
        self.record(mp, mq, mm, malive, out.detach(), avail, entropy.detach(), mvalues, mreturns)
