from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from learners.base import Learner
from modules.critics import REGISTRY as critic_REGISTRY

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

    def __init__(self, mac: MADDPGMAC, scheme: dict, logger: Logger, args: SimpleNamespace) -> None:
        super().__init__(mac, scheme, logger, args)
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.critic = critic_REGISTRY[args.critic](scheme, args)
        self.target_mac = self.add_network("agent", mac)
        self.target_critic = self.add_network("critic", self.critic)
        self.actor_params = list(mac.parameters())
        self.critic_params = list(self.critic.parameters())
        self.actor_optimiser = self.add_optimiser("actor_optimiser", self.actor_params)
        self.critic_optimiser = self.add_optimiser(
            "critic_optimiser", self.critic_params, lr=args.critic_lr or args.lr
        )
        self._eye = None

    def _joint(self, actions):
        # [B, T, N, A] -> [B, T, N, N * A]: every agent's row holds the same joint action
        b, t = actions.shape[:2]
        return actions.reshape(b, t, 1, -1).expand(b, t, self.n_agents, -1)

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        args = self.args
        n = self.n_agents
        # rewards [B, T, 1] (team) or [B, T, N] (individual); terminated, mask [B, T, 1]
        rewards, terminated, mask = self.rewards_and_masks(batch)
        avail = batch["avail_actions"]  # [B, T+1, N, A]
        actions = batch["actions"] if self.mac.continuous else batch["actions_onehot"]
        actions = actions.float()  # [B, T+1, N, A]
        state = batch["state"]
        obs = batch["obs"] if args.critic_individual_obs else None
        rewards = rewards.expand(-1, -1, n)  # a team reward is every agent's reward

        inputs = self.mac.build_seq_inputs(batch)  # shared by the online and target actors

        # --- critics ---
        with torch.no_grad():
            target_out = self.target_mac.forward_seq(batch, inputs)  # [B, T+1, N, A]
            next_actions = self.mac.policy_actions(target_out[:, 1:], avail[:, 1:], sample=False)
            next_q = self.target_critic(
                self.critic.build_inputs(
                    state[:, 1:], self._joint(next_actions), None if obs is None else obs[:, 1:]
                )
            )
            targets = rewards + args.gamma * (1 - terminated) * next_q  # [B, T, N]

        q_taken = self.critic(
            self.critic.build_inputs(
                state[:, :-1], self._joint(actions[:, :-1]), None if obs is None else obs[:, :-1]
            )
        )
        mask_n = mask.expand_as(q_taken)
        n_valid = mask_n.sum()
        td_error = (q_taken - targets) * mask_n
        critic_loss = (td_error**2).sum() / n_valid
        critic_grad_norm = self.step(self.critic_optimiser, critic_loss, self.critic.clip_grad_norm_)

        # --- actors ---
        out = self.mac.forward_seq(batch, inputs)[:, :-1]  # [B, T, N, A]
        policy = self.mac.policy_actions(out, avail[:, :-1], sample=True)
        # Row i of the joint action: agent i's block from its policy (with gradient), the others
        # from the buffer or from their current policies (no gradient).
        if self._eye is None or self._eye.device != out.device:
            self._eye = torch.eye(n, device=out.device).view(1, 1, n, n, 1)
        if args.actor_other_actions == "policy":  # EPyMARL: the others' current policies
            others = policy.detach().unsqueeze(2)
        else:  # the paper: the others' actions from the buffer
            others = actions[:, :-1].unsqueeze(2)  # [B, T, 1, N, A]
        joint = others * (1 - self._eye) + policy.unsqueeze(2) * self._eye
        b, t = out.shape[:2]
        self.critic.requires_grad_(False)  # the actor loss steps the actors only
        q_policy = self.critic(
            self.critic.build_inputs(
                state[:, :-1], joint.reshape(b, t, n, -1), None if obs is None else obs[:, :-1]
            )
        )
        self.critic.requires_grad_(True)
        pre = out if self.mac.continuous else out.masked_fill(avail[:, :-1] == 0, 0.0)
        reg = ((pre**2).mean(dim=-1) * mask_n).sum() / n_valid
        actor_loss = -(q_policy * mask_n).sum() / n_valid + args.actor_reg * reg
        actor_grad_norm = self.step(self.actor_optimiser, actor_loss, self._clip_actors)
        self.finish_update(episode_num)

        if self.log_due(t_env):
            self.log(
                t_env,
                critic_loss=critic_loss,
                actor_loss=actor_loss,
                critic_grad_norm=critic_grad_norm,
                actor_grad_norm=actor_grad_norm,
                td_error_abs=td_error.abs().sum() / n_valid,
                q_taken_mean=(q_taken * mask_n).sum() / n_valid,
                target_mean=(targets * mask_n).sum() / n_valid,
            )

    def _clip_actors(self, max_norm):
        # Separate actors are clipped separately, like separate learners; a shared one as a whole.
        if hasattr(self.mac.agent, "clip_grad_norm_"):
            return self.mac.agent.clip_grad_norm_(max_norm)
        return torch.nn.utils.clip_grad_norm_(self.actor_params, max_norm)
