"""What the on-policy actor-critic learners share (actor_critic_learner, ppo_learner,
coma_learner): an actor (the ac_mac controller) and a critic with separate optimisers, masks for
dead agents and padding, return targets, value normalisation and the critic loss.

Masks, all [B, T, N]: m the valid steps of the episode, M = m * alive (the agent still acts at
t; the step at which it dies is kept), P = M or m (policy_active_mask) for policy losses, Q = M
or m (value_active_mask) for value losses and statistics. Every mean is over its mask, so
padded steps never enter a loss or a statistic."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from learners.base import Learner
from modules.critics import REGISTRY as critic_REGISTRY
from utils.errors import ConfigError
from utils.keys import declare_keys
from utils.rl_utils import ValueNorm, alive_mask, gae, huber, masked_mean, masked_mean_std, nstep_returns

declare_keys(
    "policy-gradient learners (actor_critic_learner, ppo_learner, coma_learner; mac ac_mac)",
    (
        "entropy_coef",
        0.01,
        "float >= 0",
        "weight of the policy's entropy bonus",
    ),
    (
        "return_estimator",
        "nstep",
        "one of: nstep, gae, td_lambda",
        "critic targets: n-step returns (EPyMARL), GAE(lambda) (MAPPO) or TD(lambda) (PyMARL's COMA)",
    ),
    (
        "q_nstep",
        5,
        "int >= 1",
        "n of the n-step returns",
    ),
    (
        "gae_lambda",
        0.95,
        "float in [0, 1]",
        "GAE lambda",
    ),
    (
        "ppo_style",
        "epymarl",
        "one of: epymarl, mappo",
        "epymarl: per epoch one critic and one actor step on the whole batch, advantages recomputed; "
        "mappo: targets fixed, minibatches, value clipping",
    ),
    (
        "epochs",
        4,
        "int >= 1",
        "PPO epochs per train call",
    ),
    (
        "num_mini_batch",
        1,
        "int >= 1",
        "minibatches of whole episodes per PPO epoch (ppo_style=mappo)",
    ),
    (
        "eps_clip",
        0.2,
        "float > 0",
        "PPO ratio clip",
    ),
    (
        "value_clip",
        0.0,
        "float >= 0",
        "clip value predictions to v_old +- this (ppo_style=mappo; 0 = off)",
    ),
    (
        "value_loss",
        "mse",
        "one of: mse, huber",
        "critic loss on the error: e^2 or Huber",
    ),
    (
        "huber_delta",
        10.0,
        "float > 0",
        "Huber threshold",
    ),
    (
        "value_loss_coef",
        1.0,
        "float > 0",
        "weight of the critic loss",
    ),
    (
        "coma_critic_loss",
        "mean",
        "one of: mean, agent_sum",
        "coma_learner: the critic's squared error averaged over agent-steps, or summed over agents and "
        "averaged over steps (EPyMARL's COMA; with grad_norm_clip the two train differently)",
    ),
    (
        "value_norm",
        "none",
        "one of: none, running, ema",
        "critic learns normalised targets: running per-agent statistics (EPyMARL standardise_returns) "
        "or MAPPO's debiased moving average",
    ),
    (
        "value_norm_beta",
        0.99999,
        "float in (0, 1)",
        "value_norm=ema: averaging rate",
    ),
    (
        "advantage_norm",
        "none",
        "one of: none, batch",
        "batch: standardise advantages over the batch's active agent-steps (MAPPO)",
    ),
    (
        "policy_active_mask",
        True,
        None,
        "leave dead agents' steps out of the policy loss (the step at which an agent dies is kept)",
    ),
    (
        "value_active_mask",
        False,
        None,
        "leave dead agents' steps out of the value loss too",
    ),
    (
        "critic_death_mask",
        False,
        None,
        "zero a dead agent's critic inputs except its id (MAPPO)",
    ),
    (
        "critic_joint_obs",
        False,
        None,
        "cv_critic also sees every agent's observation",
    ),
    (
        "critic_last_action",
        False,
        None,
        "cv_critic and coma_critic also see the joint previous action",
    ),
    (
        "critic_agent_id",
        True,
        None,
        "a shared critic sees the agent's one-hot id (one critic per agent never does)",
    ),
    (
        "target_critic",
        True,
        None,
        "bootstrap from a target critic (target_update_mode, tau, target_update_interval); False: the "
        "critic before the update (MAPPO)",
    ),
    (
        "policy_epsilon_floor",
        False,
        None,
        "discrete ac_mac policies: mix a uniform choice among the available actions into the policy, "
        "weight epsilon_start -> epsilon_finish over epsilon_anneal_time steps, in acting and in the "
        "learner (PyMARL's COMA)",
    ),
    (
        "squash",
        "clip",
        "one of: clip, tanh",
        "continuous actions: the raw Gaussian sample is clipped to [-1, 1] (MAPPO) or squashed by tanh,"
        " then mapped onto the env's bounds",
    ),
    (
        "policy_std",
        "parameter",
        "one of: parameter, network",
        "continuous actions: a learned state-independent log std (MAPPO), or a scale output by the "
        "actor for each state (BenchMARL, TorchRL)",
    ),
    (
        "log_std_init",
        0.0,
        "float in [-20, 20]",
        "initial log std of the Gaussian policy",
    ),
    (
        "log_std_min",
        -5.0,
        "float in [-20, 20]",
        "log std is clamped to [log_std_min, log_std_max] when used",
    ),
    (
        "log_std_max",
        2.0,
        "float in [-20, 20]",
        "",
    ),
)


if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch
    from controllers.ac_controller import ACMAC
    from utils.logger import Logger


class PolicyGradientLearner(Learner):
    action_spaces = ("discrete", "continuous")
    macs = ("ac_mac",)
    on_policy = True
    critics = ("ac_critic", "cv_critic")
    return_estimators = ("nstep", "gae")

    def __init__(self, mac: ACMAC, scheme: dict, logger: Logger, args: SimpleNamespace) -> None:
        super().__init__(mac, scheme, logger, args)
        self.critic = critic_REGISTRY[args.critic](scheme, args)
        self.target_critic = self.add_network("critic", self.critic, target=args.target_critic)
        self.add_network("agent", mac, target=False)
        self.agent_params = list(mac.parameters())
        self.agent_optimiser = self.add_optimiser("agent_optimiser", self.agent_params)
        self.critic_optimiser = self.add_optimiser(
            "critic_optimiser", list(self.critic.parameters()), lr=args.critic_lr
        )
        self.value_norm = None
        if args.value_norm != "none":
            self.value_norm = ValueNorm(args.value_norm, args.n_agents, args.value_norm_beta, args.device)
        self.stats = defaultdict(list)  # this train call's figures, logged when due
        self.logging = False  # whether this train call's figures will be logged

    @classmethod
    def validate(cls, config: dict) -> None:
        name = config["learner"]
        if config["critic"] not in cls.critics:
            raise ConfigError(
                f"learner={name} trains critic={' or '.join(cls.critics)}, not critic={config['critic']}"
            )
        if config["return_estimator"] not in cls.return_estimators:
            raise ConfigError(
                f"learner={name} builds targets with return_estimator="
                f"{' or '.join(cls.return_estimators)}, not {config['return_estimator']}"
            )
        for key in ("transition_batch_size", "train_interval_steps"):
            if config[key]:
                raise ConfigError(
                    f"learner={name} is on-policy: it trains once on each batch of whole episodes "
                    f"just played, so {key} must be 0 (got {config[key]})"
                )
        if config["batch_size"] % config["batch_size_run"]:
            raise ConfigError(
                f"learner={name} trains on batch_size={config['batch_size']} episodes collected "
                f"batch_size_run={config['batch_size_run']} at a time: make batch_size a multiple of it"
            )
        if config["log_std_min"] >= config["log_std_max"]:
            raise ConfigError(
                f"log_std_min={config['log_std_min']} must be below log_std_max={config['log_std_max']}"
            )

    # --- masks and targets ------------------------------------------------------------------
    def masks(self, batch: EpisodeBatch) -> tuple[torch.Tensor, ...]:
        """-> rewards [B, T, N], terminated [B, T, 1], m, P (policy_m), Q (value_m), M [B, T, N]."""
        rewards, terminated, mask = self.rewards_and_masks(batch)
        n = self.args.n_agents
        rewards = rewards.expand(-1, -1, n)
        m = mask.expand(-1, -1, n)
        alive_m = m * alive_mask(batch)[:, :-1]
        policy_m = alive_m if self.args.policy_active_mask else m
        value_m = alive_m if self.args.value_active_mask else m
        return rewards, terminated, m, policy_m, value_m, alive_m

    def denormalise(self, v: torch.Tensor) -> torch.Tensor:
        return v if self.value_norm is None else self.value_norm.denormalise(v)

    def targets(self, rewards, terminated, m, values, next_values):
        """Returns G and advantages A = G - V [B, T, N] (return units) from the critic's values V
        [B, T, N] and bootstrap values Vb [B, T+1, N], both denormalised."""
        args = self.args
        if args.return_estimator == "gae":
            advantages, returns = gae(
                rewards, terminated, m, values, next_values, args.gamma, args.gae_lambda
            )
            return returns, advantages
        returns = nstep_returns(rewards, terminated, m, next_values, args.gamma, args.q_nstep)
        return returns, (returns - values) * m

    def normalise_advantages(self, advantages: torch.Tensor, policy_m: torch.Tensor) -> torch.Tensor:
        mean, std = masked_mean_std(advantages, policy_m)
        self.stats["advantage_mean"].append(mean)
        self.stats["advantage_std"].append(std)
        if self.args.advantage_norm == "batch":  # over the entries the policy loss uses only
            return (advantages - mean) / (std + 1e-5) * policy_m
        return advantages

    def critic_targets(self, returns: torch.Tensor, value_m: torch.Tensor, update: bool) -> torch.Tensor:
        """What the critic regresses on: the returns, normalised (after absorbing them into the
        statistics when `update`) if value_norm is on."""
        if self.value_norm is None:
            return returns
        if update:
            self.value_norm.update(returns, value_m)
        return self.value_norm.normalise(returns)

    def value_loss(self, v, target, value_m, v_old=None) -> torch.Tensor:
        """value_loss_coef * mean_Q of l(target - v), or of the larger of it and the clipped
        prediction's loss when value_clip > 0 (PPO's value clipping around v_old)."""
        args = self.args
        loss_fn = (lambda e: e**2) if args.value_loss == "mse" else (lambda e: huber(e, args.huber_delta))
        loss = loss_fn(target - v)
        if args.value_clip > 0 and v_old is not None:
            clipped = v_old + (v - v_old).clamp(-args.value_clip, args.value_clip)
            loss = torch.max(loss, loss_fn(target - clipped))
        return args.value_loss_coef * masked_mean(loss, value_m)

    # --- steps ------------------------------------------------------------------------------
    def critic_step(self, loss: torch.Tensor) -> None:
        self.stats["critic_loss"].append(loss.detach())
        self.stats["critic_grad_norm"].append(
            self.step(self.critic_optimiser, loss, self.critic.clip_grad_norm_)
        )

    def actor_step(self, loss: torch.Tensor) -> None:
        self.stats["pg_loss"].append(loss.detach())
        self.stats["agent_grad_norm"].append(self.step(self.agent_optimiser, loss, self.mac.clip_grad_norm_))

    def policy(self, batch: EpisodeBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The actor on the whole batch from a fresh hidden state: outputs [B, T, N, A],
        log-probabilities of the taken actions and entropies [B, T, N]."""
        out = self.mac.forward_seq(batch)[:, :-1]
        avail = batch["avail_actions"][:, :-1]
        logp, entropy = self.mac.evaluate(out, batch["actions"][:, :-1], avail)
        return out, logp, entropy

    # --- logging ----------------------------------------------------------------------------
    def record(self, policy_m, value_m, m, alive_m, out, avail, entropy, values, returns) -> None:
        """The figures of one update (tensors; read only when the log is due)."""
        if not self.logging:
            return
        s = self.stats
        s["entropy"].append(masked_mean(entropy, policy_m))
        s["value_mean"].append(masked_mean(values, value_m))
        s["target_mean"].append(masked_mean(returns, value_m))
        s["td_error_abs"].append(masked_mean((returns - values).abs(), value_m))
        var_g = masked_mean_std(returns, value_m)[1] ** 2
        var_e = masked_mean_std(returns - values, value_m)[1] ** 2
        s["explained_variance"].append(1 - var_e / var_g.clamp(min=1e-8))
        s["dead_ratio"].append(1 - alive_m.sum() / m.sum().clamp(min=1.0))
        if self.mac.continuous and self.mac.std_from_network:
            s["log_std_mean"].append(masked_mean(self.mac.split(out.detach())[1].mean(-1), policy_m))
        elif self.mac.continuous:
            s["log_std_mean"].append(self.mac.agent.log_std.detach().mean())
        else:
            probs = torch.softmax(out.detach().masked_fill(avail == 0, -1e10), dim=-1)
            s["pi_max"].append(masked_mean(probs.max(dim=-1)[0], policy_m))
        if self.value_norm is not None:
            mean, std = self.value_norm.stats()
            s["value_norm_mean"].append(mean.mean().float())
            s["value_norm_std"].append(std.mean().float())

    def flush_stats(self, t_env: int) -> None:
        if self.log_due(t_env):
            self.log(t_env, **{k: torch.stack([x.float() for x in v]).mean() for k, v in self.stats.items()})
        self.stats.clear()

    # --- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.value_norm is not None:
            state["value_norm"] = self.value_norm.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.value_norm is not None:
            self.value_norm.load_state_dict(state["value_norm"])
