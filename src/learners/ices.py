"""ICES (Li et al., ICML 2024): exploitation is the Q learner on the env's reward (plus
ices_step_penalty per step); exploration is a separate policy (controllers/ices_controller.py)
trained by policy gradient on an intrinsic reward from a world model of the state change
(modules/world_model.py): agent i's reward is 1 - exp(-KL(global prior || prior with i's action
hidden)), the influence of its action on what the model expects to happen.

Per update: the Q update (QLearner.train), then one update of the exploration policy and its
critic on the same batch, then the world model on two further batches (learner.aux_batches):
the global branch on the first, the local one on the second. The critic predicts the step's
intrinsic reward (no bootstrap, as published); the advantage is that reward minus the critic's
value, with an entropy bonus.

Settings where the authors' code is not what their paper describes are named options, the
published value in ices_qmix.yaml and the sound one the default (docs/algorithms/value_based.md):
    ices_kl_log2           the divergence's log-scale term in bits (then it is no divergence)
    ices_world_padded_rows the world model's losses also count the padding after each episode
    ices_policy_all_actions the policy's log-probabilities and entropy over every action, the
                           unavailable ones included
    ices_state_norm=published one mean and variance of the state change for all features, over
                           the padded steps too
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from components.schedules import horizon
from learners.q_learner import QLearner
from modules.agents import REGISTRY as agent_REGISTRY
from modules.world_model import StateChangeModel, hide_each, hide_one_at_random, normal_divergence
from utils.errors import ConfigError
from utils.keys import declare_keys
from utils.rl_utils import valid_mask

declare_keys(
    "ICES (mac ices_mac with learner ices_learner)",
    (
        "ices_step_penalty",
        0.0,
        "float",
        "added to every step's reward the Q agents learn from (their SMAC runs: -0.02)",
    ),
    ("ices_int_lr", 0.01, "float > 0", "the exploration policy's learning rate (the run's optimizer)"),
    ("ices_int_critic_lr", 0.01, "float > 0", "its critic's learning rate"),
    ("ices_int_ent_coef", 0.1, "float >= 0", "the exploration policy's entropy bonus"),
    (
        "ices_int_loss_scale",
        1.0,
        "float > 0",
        "factor on the exploration policy's and critic's losses (their football code: 10)",
    ),
    ("ices_world_hidden_dim", 64, "int >= 1", "width of the world model's networks"),
    ("ices_world_embed_dim", 4, "int >= 1", "size of each agent's action embedding in the world model"),
    ("ices_world_z_dim", 16, "int >= 1", "the world model's latent size"),
    ("ices_world_baseline_lr", 0.0001, "float > 0", "Adam learning rate of the baseline predictors"),
    (
        "ices_world_lr",
        0.0001,
        "float > 0",
        "initial learning rate of the ELBO's networks (Adam, betas 0.95 and 0.999)",
    ),
    (
        "ices_world_lr_decay",
        0.01,
        "float > 0",
        "the ELBO's learning rate after one update per horizon episode (schedule_horizon / episode_limit), "
        "as a fraction of ices_world_lr",
    ),
    (
        "ices_world_clip",
        0.1,
        "float > 0",
        "each ELBO gradient element clamped to +- this (pyro's ClippedAdam)",
    ),
    (
        "ices_state_norm",
        "per_feature",
        "one of: per_feature, published, none",
        "the state change the world model learns: normalised per feature over real steps, by one mean and "
        "variance over every padded step (the authors' SMAC code), or raw (their football code)",
    ),
    (
        "ices_kl_log2",
        False,
        None,
        "the divergence's log-scale term in bits as the authors' code writes it (True; then it can be "
        "negative) instead of nats",
    ),
    (
        "ices_world_padded_rows",
        False,
        None,
        "the world model's losses also count the padded steps after each episode as rows of zeros (the "
        "authors' code: True)",
    ),
    (
        "ices_policy_all_actions",
        False,
        None,
        "the exploration policy's log-probabilities and entropy over every action, unavailable ones "
        "included (the authors' code: True)",
    ),
)

NORM_BETA = 0.99999
NORM_MIN_VAR = 0.01
BASELINE_EPS = 1e-5  # the authors' Adam epsilon for the baseline predictors (their optim_eps)


class ChangeNormaliser:
    """Running mean and variance of the state change s' - s, updated with each batch of new
    episodes: a debiased exponential average (beta 0.99999), the variance at least 0.01.
    per_feature: per state feature, over the episodes' real steps; published: one mean and one
    variance for every feature, over every step of the padded episodes."""

    def __init__(self, size: int, mode: str) -> None:
        self.mode = mode
        self.mean = torch.zeros(size)
        self.mean_sq = torch.zeros(size)
        self.weight = 0.0

    @torch.no_grad()
    def update(self, batch) -> None:
        state = batch["state"].float().cpu()
        change = state[:, 1:] - state[:, :-1]
        if self.mode == "published":
            m, sq = change.mean(), (change**2).mean()
        else:
            mask = valid_mask(batch).cpu()
            n = mask.sum()
            if n == 0:
                return
            m = (change * mask).sum((0, 1)) / n
            sq = (change**2 * mask).sum((0, 1)) / n
        self.mean.mul_(NORM_BETA).add_(m * (1 - NORM_BETA))
        self.mean_sq.mul_(NORM_BETA).add_(sq * (1 - NORM_BETA))
        self.weight = self.weight * NORM_BETA + (1 - NORM_BETA)

    def normalise(self, change: torch.Tensor) -> torch.Tensor:
        w = max(self.weight, 1e-5)
        mean, mean_sq = self.mean.to(change.device) / w, self.mean_sq.to(change.device) / w
        var = (mean_sq - mean**2).clamp(min=NORM_MIN_VAR)
        return (change - mean) / var.sqrt()

    def state_dict(self) -> dict:
        return {"mean": self.mean.clone(), "mean_sq": self.mean_sq.clone(), "weight": self.weight}

    def load_state_dict(self, state: dict) -> None:
        self.mean.copy_(state["mean"])
        self.mean_sq.copy_(state["mean_sq"])
        self.weight = float(state["weight"])


def world_rows(batch, normaliser, padded_rows, hide=False):
    """The world model's rows (one per step of every episode): state [R, S], joint action [R, N]
    (one agent's hidden per row where `hide`), state change [R, S] (normalised where a normaliser
    is given) and each row's weight in the losses [R]: 1 / R for every row, padding included as rows
    of zeros with action 0 (padded_rows, the authors' code), else the real steps' share."""
    state = batch["state"]
    s = state[:, :-1]
    change = state[:, 1:] - s
    if normaliser is not None:
        change = normaliser.normalise(change)
    a = batch["actions"][:, :-1, :, 0].long()
    mask = valid_mask(batch)  # [B, T, 1]
    rows = s.shape[0] * s.shape[1]
    s, change, a, mask = (x.reshape(rows, -1) for x in (s, change, a, mask))
    mask = mask[:, 0]
    if hide:
        a = hide_one_at_random(a)
    if padded_rows:
        keep = mask[:, None]
        return s * keep, (a * keep).long(), change * keep, torch.full_like(mask, 1.0 / rows)
    return s, a, change, mask / mask.sum().clamp(min=1.0)


def policy_terms(logits, actions, avail=None):
    """-> log pi(taken action) [B, T, N] and the entropy [B, T, N] of softmax(logits), over the
    available actions where `avail` is given, else over every action."""
    if avail is not None:
        logits = logits.masked_fill(avail == 0, -1e10)
    log_pi = F.log_softmax(logits, dim=-1)
    entropy = -(log_pi.exp() * log_pi).sum(-1)
    return torch.gather(log_pi, 3, actions).squeeze(3), entropy


class ICESLearner(QLearner):
    macs = ("ices_mac",)
    aux_batches = 2  # the world model's global and local branch, one further batch each

    @classmethod
    def validate(cls, config: dict) -> None:
        if (rule := config["share_rule"]) != "none":
            raise ConfigError(f"learner=ices_learner shares no TD errors: share_rule={rule}")
        if config["agent"] not in ("rnn", "mlp"):
            raise ConfigError(
                f"learner=ices_learner builds its exploration policy like the Q agents and takes "
                f"agent=rnn or agent=mlp, not agent={config['agent']}"
            )
        if config["action_selector"] != "epsilon_greedy":
            raise ConfigError(
                f"mac=ices_mac mixes its exploration policy into epsilon-greedy acting: "
                f"action_selector=epsilon_greedy, not {config['action_selector']}"
            )
        if config["transition_batch_size"]:
            raise ConfigError("learner=ices_learner trains on whole episodes: transition_batch_size=0")

    def __init__(self, mac, scheme, logger, args) -> None:
        super().__init__(mac, scheme, logger, args)
        n, n_actions = args.n_agents, args.n_actions
        state_dim = int(np.prod(args.state_shape))
        self.explorer = mac.explorer
        self.add_network("explorer", self.explorer, target=False)
        in_dim = mac.input_shape + state_dim
        self.critic = agent_REGISTRY[args.agent](in_dim, args, output_dim=1).to(args.device)
        self.add_network("explorer_critic", self.critic, target=False)
        self.explorer_optimiser = self.add_optimiser(
            "explorer_optimiser", list(self.explorer.parameters()), lr=args.ices_int_lr
        )
        self.critic_optimiser = self.add_optimiser(
            "explorer_critic_optimiser", list(self.critic.parameters()), lr=args.ices_int_critic_lr
        )
        self.world = StateChangeModel(
            state_dim,
            n,
            n_actions,
            args.ices_world_hidden_dim,
            args.ices_world_embed_dim,
            args.ices_world_z_dim,
        ).to(args.device)
        self.add_network("world_model", self.world, target=False)
        self.world_optimisers = {}
        for branch in StateChangeModel.BRANCHES:
            baseline = self.world.branches[branch].baseline.parameters()
            # Adam whatever the run's optimizer, as in the authors' code
            self._world_optimiser(
                f"{branch}_baseline",
                torch.optim.Adam(baseline, lr=args.ices_world_baseline_lr, eps=BASELINE_EPS),
            )
            # pyro's ClippedAdam as the authors use it: betas (0.95, 0.999), each gradient element
            # clamped to +-ices_world_clip, the step size decayed by a constant factor per step so
            # that it reaches ices_world_lr_decay of itself after one step per horizon episode.
            elbo = self.world.elbo_parameters(branch)
            self._world_optimiser(branch, torch.optim.Adam(elbo, lr=args.ices_world_lr, betas=(0.95, 0.999)))
        self.world_lr_factor = args.ices_world_lr_decay ** (1.0 / max(horizon(args) // args.episode_limit, 1))
        self.normaliser = (
            None if args.ices_state_norm == "none" else ChangeNormaliser(state_dim, args.ices_state_norm)
        )
        self.world_stats = {}
        logger.console_logger.info(
            f"ICES: exploration policy mixed in at ratio {args.ices_int_ratio} -> {args.ices_int_finish}, "
            f"world model on {state_dim} state features ({args.ices_state_norm} normalisation)"
        )

    def _world_optimiser(self, name, optimiser):
        self.world_optimisers[name] = self._optimisers[f"world_{name}_optimiser"] = optimiser

    # --- hooks of the run loop ------------------------------------------------------------------
    def observe(self, episode_batch) -> None:
        if self.normaliser is not None:
            self.normaliser.update(episode_batch)

    def train_aux(self, batch, t_env: int, k: int) -> None:
        """The world model's branch k (0 global, 1 local) on a batch of its own."""
        args = self.args
        branch = StateChangeModel.BRANCHES[k]
        s, a, change, weights = world_rows(
            batch, self.normaliser, args.ices_world_padded_rows, hide=branch == "local"
        )
        baseline_loss = (weights * self.world.baseline_errors(branch, s, a, change)).sum() / change.shape[-1]
        params = list(self.world.branches[branch].baseline.parameters())
        baseline_norm = self.step(self.world_optimisers[f"{branch}_baseline"], baseline_loss, params)
        elbo = (weights * self.world.negative_elbo(branch, s, a, change)).sum()
        optimiser = self.world_optimisers[branch]
        optimiser.zero_grad(set_to_none=True)
        elbo.backward()
        params = self.world.elbo_parameters(branch)
        for p in params:
            if p.grad is not None:
                p.grad.clamp_(-args.ices_world_clip, args.ices_world_clip)
        for group in optimiser.param_groups:  # decayed before each step, as ClippedAdam does
            group["lr"] *= self.world_lr_factor
        optimiser.step()
        self.world_stats[f"world_{branch}_baseline_loss"] = baseline_loss.detach()
        self.world_stats[f"world_{branch}_baseline_grad_norm"] = baseline_norm
        self.world_stats[f"world_{branch}_neg_elbo"] = elbo.detach()

    # --- the update -----------------------------------------------------------------------------
    def rewards_and_masks(self, batch):
        rewards, terminated, mask = super().rewards_and_masks(batch)
        if self.args.ices_step_penalty:
            rewards = rewards + self.args.ices_step_penalty
        return rewards, terminated, mask

    def intrinsic_rewards(self, batch) -> torch.Tensor:
        """[B, T, N]: 1 - exp(-KL(p(z | s, a) || p(z | s, a without agent i's action))) at the
        episodes' real steps, 0 on the padding (which every loss masks out): the local prior runs
        N times per step, and the padding is often half a batch."""
        a = batch["actions"][:, :-1, :, 0].long()
        b, t, n = a.shape
        real = valid_mask(batch).reshape(b * t) > 0
        s = batch["state"][:, :-1].reshape(b * t, -1)[real]
        a = a.reshape(b * t, n)[real]
        r = s.shape[0]
        rewards = torch.zeros(b * t, n, device=a.device)
        with torch.no_grad():
            g_mu, g_scale = self.world.prior("global", s, a)
            s_each = s[:, None, :].expand(-1, n, -1).reshape(r * n, -1)
            l_mu, l_scale = self.world.prior("local", s_each, hide_each(a).reshape(r * n, n))
            z = g_mu.shape[-1]
            kl = normal_divergence(
                g_mu[:, None],
                g_scale[:, None],
                l_mu.view(-1, n, z),
                l_scale.view(-1, n, z),
                log2=self.args.ices_kl_log2,
            )
            rewards[real] = 1.0 - torch.exp(-kl)
        return rewards.view(b, t, n)

    def train_explorer(self, batch) -> dict:
        args = self.args
        actions = batch["actions"][:, :-1].long()
        mask = valid_mask(batch).expand(-1, -1, args.n_agents)
        rows = self.mac.explorer_seq_inputs(batch)  # the policy's and the critic's inputs
        logits = self.mac.explorer_forward_seq(batch, rows)[:, :-1]  # [B, T, N, A]
        avail = None if args.ices_policy_all_actions else batch["avail_actions"][:, :-1]
        log_pi_taken, entropy = policy_terms(logits, actions, avail)
        values, _ = self.critic(rows, self.critic.init_hidden(rows.shape[0]))
        values = values.view(batch.batch_size, args.n_agents, -1).transpose(1, 2)[:, :-1]  # [B, T, N]
        rewards = self.intrinsic_rewards(batch)
        advantage = (rewards - values).detach()
        n = mask.sum().clamp(min=1.0)
        scale = args.ices_int_loss_scale
        policy_loss = (
            -scale
            * ((advantage * log_pi_taken * mask).sum() + args.ices_int_ent_coef * (entropy * mask).sum())
            / n
        )
        policy_norm = self.step(self.explorer_optimiser, policy_loss, list(self.explorer.parameters()))
        critic_loss = scale * (((values - rewards) * mask) ** 2).sum() / n
        critic_norm = self.step(self.critic_optimiser, critic_loss, list(self.critic.parameters()))
        return {
            "int_reward_mean": (rewards * mask).sum() / n,
            "int_policy_loss": policy_loss.detach(),
            "int_critic_loss": critic_loss.detach(),
            "int_entropy": (entropy.detach() * mask).sum() / n,
            "int_grad_norm": policy_norm,
            "int_critic_grad_norm": critic_norm,
        }

    def train(self, batch, t_env: int, episode_num: int) -> dict | None:
        due = self.log_due(t_env)
        feedback = super().train(batch, t_env, episode_num)
        stats = self.train_explorer(batch)
        if due:
            self.log(t_env, **stats, **self.world_stats, int_ratio=self.mac.int_ratio)
        return feedback

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.normaliser is not None:
            state["change_normaliser"] = self.normaliser.state_dict()
        # the world model's last losses, logged with the next update's statistics
        state["world_stats"] = {k: float(v) for k, v in self.world_stats.items()}
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.normaliser is not None:
            self.normaliser.load_state_dict(state["change_normaliser"])
        self.world_stats = dict(state.get("world_stats", {}))
