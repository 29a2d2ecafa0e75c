from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from learners.base import Learner
from modules.critics import REGISTRY as critic_REGISTRY
from utils.errors import ConfigError

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch
    from controllers.maddpg_controller import MADDPGMAC
    from utils.logger import Logger


class MADDPGLearner(Learner):
    """MADDPG (Lowe et al. 2017): per-agent critics Q_i(x, a_1 .. a_N) trained on each agent's
    own reward (or the team reward), and decentralised actors trained through their critic.

    Critic target: y_i = r_i + gamma * (1 - d) * Q_i^-(x', a'_1 .. a'_N), a'_j from the target
    actors (argmax one-hot / deterministic). Actor i: maximise Q_i with a_i from its current
    policy (straight-through Gumbel-softmax for discrete actions) and the other agents' actions
    from the buffer, plus actor_reg * mean(pre-activation outputs ^ 2). All agents and time
    steps are handled in one batched pass."""

    action_spaces = ("discrete", "continuous")
    macs = ("maddpg_mac",)
    critics = ("maddpg_critic", "local_critic")

    def __init__(self, mac: MADDPGMAC, scheme: dict, logger: Logger, args: SimpleNamespace) -> None:
        super().__init__(mac, scheme, logger, args)
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.critic = critic_REGISTRY[args.critic](scheme, args)
        self.target_mac = self.add_network("agent", mac)
        self.target_critic = self.add_network("critic", self.critic)
        self.critics = [self.critic]
        self.target_critics = [self.target_critic]
        if args.twin_critics:  # TD3/SAC: a second critic, the minimum of the two in the targets
            self.critics.append(critic_REGISTRY[args.critic](scheme, args))
            self.target_critics.append(self.add_network("critic2", self.critics[1]))
        self.actor_params = list(mac.parameters())
        self.critic_params = [p for c in self.critics for p in c.parameters()]
        self.actor_optimiser = self.add_optimiser("actor_optimiser", self.actor_params)
        self.critic_optimiser = self.add_optimiser(
            "critic_optimiser", self.critic_params, lr=args.critic_lr or args.lr
        )
        self.critic_updates = 0  # policy_delay counts these
        self._eye = None

    @classmethod
    def validate(cls, config: dict) -> None:
        if config["critic"] not in cls.critics:
            raise ConfigError(
                f"learner={config['learner']} trains critic={' or '.join(cls.critics)}, "
                f"not critic={config['critic']}"
            )

    def _critic_inputs(self, state, joint, obs, t):
        """Critic inputs at time slice t of state [B, T+1, S] and obs, for joint [B, T, N, N*A]."""
        return self.critics[0].build_inputs(state[:, t], joint, None if obs is None else obs[:, t])

    def _own_into_joint(self, own, others):
        """Row i of the joint action for agent i's critic, [B, T, N, N * A]: agent i's block from
        own [B, T, N, A] (with its gradient), every other block from others [B, T, N, A]."""
        n = self.n_agents
        if self._eye is None or self._eye.device != own.device:
            self._eye = torch.eye(n, device=own.device).view(1, 1, n, n, 1)
        joint = others.unsqueeze(2) * (1 - self._eye) + own.unsqueeze(2) * self._eye
        return joint.reshape(*own.shape[:2], n, -1)

    def _clip_critics(self, max_norm):
        return torch.stack([c.clip_grad_norm_(max_norm) for c in self.critics]).max()

    def state_dict(self) -> dict:
        return {**super().state_dict(), "critic_updates": self.critic_updates}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.critic_updates = state.get("critic_updates", self.train_steps)

    def _joint(self, actions):
        # [B, T, N, A] -> [B, T, N, N * A]: every agent's row holds the same joint action
        b, t = actions.shape[:2]
        return actions.reshape(b, t, 1, -1).expand(b, t, self.n_agents, -1)

    def obs_for_critic(self, batch):
        return (
            batch["obs"]
            if self.args.critic_individual_obs or getattr(self.critic, "needs_obs", False)
            else None
        )

    @torch.no_grad()
    def critic_targets(self, batch, inputs, out, rewards, terminated, obs):
        """y_i = r_i + gamma (1 - d) min_k Q'_k,i(x', a') [B, T, N], a' from the target actors
        (smoothed with target_noise > 0). `out` (the online actors' outputs) is not used here."""
        args = self.args
        avail = batch["avail_actions"]
        target_out = self.target_mac.forward_seq(batch, inputs)  # [B, T+1, N, A]
        if args.target_noise > 0:  # TD3's target policy smoothing
            next_actions = self.mac.form.smoothed_target(
                target_out[:, 1:], avail[:, 1:], args.target_noise, args.target_noise_clip
            )
        else:
            next_actions = self.mac.policy_actions(target_out[:, 1:], avail[:, 1:], sample=False)
        next_inputs = self._critic_inputs(batch["state"], self._joint(next_actions), obs, slice(1, None))
        next_q = torch.stack([c(next_inputs) for c in self.target_critics]).min(dim=0).values
        return rewards + args.gamma * (1 - terminated) * next_q

    def update_critics(self, batch, inputs, out=None):
        """One step of every critic towards critic_targets (out: the online actors' outputs,
        where the targets need them). -> (actions [B, T+1, N, A] as the critics see them, the
        critics' observations or None, mask [B, T, N], its count, the critic figures to log)."""
        # rewards [B, T, 1] (team) or [B, T, N] (individual); terminated, mask [B, T, 1]
        rewards, terminated, mask = self.rewards_and_masks(batch)
        rewards = rewards.expand(-1, -1, self.n_agents)  # a team reward is every agent's reward
        actions = (batch["actions"] if self.mac.continuous else batch["actions_onehot"]).float()
        obs = self.obs_for_critic(batch)
        targets = self.critic_targets(batch, inputs, out, rewards, terminated, obs)
        taken_inputs = self._critic_inputs(batch["state"], self._joint(actions[:, :-1]), obs, slice(None, -1))
        q_taken_all = [c(taken_inputs) for c in self.critics]
        q_taken = q_taken_all[0]
        mask_n = mask.expand_as(q_taken)
        n_valid = mask_n.sum()
        critic_loss = sum((((q - targets) * mask_n) ** 2).sum() for q in q_taken_all) / n_valid
        critic_grad_norm = self.step(self.critic_optimiser, critic_loss, self._clip_critics)
        self.critic_updates += 1
        stats = dict(
            critic_loss=critic_loss,
            critic_grad_norm=critic_grad_norm,
            td_error_abs=((q_taken - targets) * mask_n).abs().sum() / n_valid,
            q_taken_mean=(q_taken * mask_n).sum() / n_valid,
            target_mean=(targets * mask_n).sum() / n_valid,
        )
        return actions, obs, mask_n, n_valid, stats

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        args = self.args
        avail = batch["avail_actions"]  # [B, T+1, N, A]
        inputs = self.mac.build_seq_inputs(batch)  # shared by the online and target actors
        actions, obs, mask_n, n_valid, stats = self.update_critics(batch, inputs)

        # --- actors and targets, every policy_delay critic updates (TD3) ---
        if self.critic_updates % args.policy_delay == 0:
            out = self.mac.forward_seq(batch, inputs)[:, :-1]  # [B, T, N, A]
            policy = self.mac.policy_actions(out, avail[:, :-1], sample=True)
            # the others' actions: their current policies' (EPyMARL) or the buffer's (the paper)
            others = policy.detach() if args.actor_other_actions == "policy" else actions[:, :-1]
            joint = self._own_into_joint(policy, others)
            self.critic.requires_grad_(False)  # the actor loss steps the actors only
            q_policy = self.critic(self._critic_inputs(batch["state"], joint, obs, slice(None, -1)))
            self.critic.requires_grad_(True)
            pre = out if self.mac.continuous else out.masked_fill(avail[:, :-1] == 0, 0.0)
            reg = ((pre**2).mean(dim=-1) * mask_n).sum() / n_valid
            actor_loss = -(q_policy * mask_n).sum() / n_valid + args.actor_reg * reg
            stats["actor_grad_norm"] = self.step(self.actor_optimiser, actor_loss, self._clip_actors)
            stats["actor_loss"] = actor_loss
            self.finish_update(episode_num)

        if self.log_due(t_env) and "actor_loss" in stats:
            self.log(t_env, **stats)

    def _clip_actors(self, max_norm):
        # Separate actors are clipped separately, like separate learners; a shared one as a whole.
        if hasattr(self.mac.agent, "clip_grad_norm_"):
            return self.mac.agent.clip_grad_norm_(max_norm)
        return torch.nn.utils.clip_grad_norm_(self.actor_params, max_norm)
