from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from learners.base import Learner
from modules.critics import REGISTRY as critic_REGISTRY
from utils.errors import ConfigError
from utils.keys import declare_keys

declare_keys(
    "off-policy actor-critic learners (maddpg_learner: MADDPG, MATD3, IDDPG; masac_learner: MASAC, ISAC)",
    (
        "critic",
        "maddpg_critic",
        None,
        "critic registry name (maddpg_learner, masac_learner: maddpg_critic, or local_critic for IDDPG/ISAC)",
    ),
    (
        "critic_hidden_dim",
        64,
        "int >= 1",
        "width of the critic's two hidden layers",
    ),
    (
        "critic_lr",
        None,
        "float > 0 or null",
        "critic learning rate (null: lr)",
    ),
    (
        "critic_individual_obs",
        False,
        None,
        "critic also sees the agent's own observation (besides the state)",
    ),
    (
        "actor_other_actions",
        "buffer",
        "one of: buffer, policy",
        "other agents' actions in agent i's actor loss: buffer (paper) or policy (EPyMARL)",
    ),
    (
        "actor_reg",
        0.001,
        "float >= 0",
        "weight of mean(pre-activation actor outputs^2) in the actor loss",
    ),
    (
        "test_greedy",
        True,
        None,
        "MADDPG discrete test actions: argmax (False: samples of the policy, as EPyMARL)",
    ),
    (
        "continuous_actor",
        "tanh",
        "one of: tanh, softmax, squashed_gaussian",
        "continuous actions: tanh (bounded, Gaussian noise), softmax (the paper's soft Gumbel samples; "
        "[0, 1] action vectors) or squashed_gaussian (SAC: tanh of a Gaussian sample, mean and log std "
        "from the network)",
    ),
    (
        "gumbel_temperature",
        1.0,
        "float > 0",
        "temperature of the straight-through Gumbel-softmax (discrete actions)",
    ),
    (
        "act_noise_start",
        0.1,
        "float >= 0",
        "Gaussian exploration std, in half action ranges (continuous actions)",
    ),
    (
        "act_noise_finish",
        0.1,
        "float >= 0",
        "exploration std after the anneal",
    ),
    (
        "act_noise_anneal_time",
        50000,
        "int >= 0",
        "env steps of linear annealing of the exploration std",
    ),
    (
        "exploration_mode",
        "gaussian",
        "one of: gaussian, ornstein_uhlenbeck",
        "continuous noise: gaussian (white) or ornstein_uhlenbeck (act_noise * OU process)",
    ),
    (
        "ou_theta",
        0.15,
        "float in (0, 1]",
        "OU mean reversion per step (correlation time about 1 / theta steps)",
    ),
    (
        "ou_sigma",
        0.2,
        "float >= 0",
        "OU step std: stationary std sigma / sqrt(2 theta - theta^2), 0.38 here",
    ),
    (
        "ou_stop_episode",
        None,
        "int >= 0 or null",
        "OU noise off after this many episodes' steps (FACMAC: 100); null: never",
    ),
    (
        "start_steps",
        0,
        "int >= 0",
        "env steps of uniform random actions before the actor acts (continuous)",
    ),
    (
        "policy_ensemble",
        1,
        "int >= 1",
        "sub-policies per agent (the paper's ensembles, K=3 there); one drawn per agent per episode",
    ),
    (
        "twin_critics",
        False,
        None,
        "MATD3, MASAC: two critics per agent; targets take the minimum of their target copies",
    ),
    (
        "policy_delay",
        1,
        "int >= 1",
        "MATD3: critic updates per actor update and target update",
    ),
    (
        "target_noise",
        0.0,
        "float >= 0",
        "MATD3 target smoothing, in half action ranges (continuous); >0 with discrete actions: a sample"
        " of the target policy instead of its argmax",
    ),
    (
        "target_noise_clip",
        0.5,
        "float >= 0",
        "MATD3: the smoothing noise is clipped to +- this many half ranges",
    ),
    (
        "alpha_init",
        0.2,
        "float > 0",
        "MASAC: initial entropy temperature",
    ),
    (
        "auto_alpha",
        True,
        None,
        "MASAC: learn the temperature towards target_entropy (False: alpha_init throughout)",
    ),
    (
        "alpha_lr",
        None,
        "float > 0 or null",
        "MASAC temperature learning rate (null: critic_lr, else lr)",
    ),
    (
        "target_entropy",
        None,
        "float or null",
        "MASAC per-agent entropy target; null: -(action dimensions) for continuous actions, "
        "target_entropy_ratio * log(available actions) for discrete",
    ),
    (
        "target_entropy_ratio",
        0.98,
        "float in [0, 1]",
        "MASAC discrete: target entropy as a share of the uniform policy's",
    ),
)


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
