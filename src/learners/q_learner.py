from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, NamedTuple

import torch

from learners.base import Learner
from learners.kalei import Kaleidoscope
from learners.sharing import Sharer, needed_fields
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.errors import ConfigError
from utils.rl_utils import alive_mask, bootstrap_actions, bootstrap_values, greedy_actions, lambda_returns

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch
    from controllers.basic_controller import BasicMAC
    from utils.logger import Logger


class QTargets(NamedTuple):
    rewards: torch.Tensor  # [B, T, 1 or N] (standardised if asked)
    terminated: torch.Tensor  # [B, T, 1]
    mask: torch.Tensor  # [B, T, 1]
    q_taken: torch.Tensor  # [B, T, N] online values of the actions taken (with gradient)
    q_next: torch.Tensor  # [B, T+1, N] per-agent bootstrap values (target network, double Q as set)
    targets: torch.Tensor  # [B, T, 1 or N] one-step or TD(lambda), through the target mixer if any
    mix_kwargs: dict  # what the online mixer takes besides (q_taken, states): QPLEX's actions, max_qs


class QLearner(Learner):
    """IQL (mixer None), VDN and QMIX with one-step or TD(lambda) (double) Q-learning targets.
    IQL can share its agents' TD errors (learners/sharing.py), as SUPER does on independent DQNs."""

    mixer_use = "optional"

    @classmethod
    def validate(cls, config: dict) -> None:
        if config["agent"] == "kalei_rnn" and config["learner"] != "q_learner":
            raise ConfigError(
                f"agent=kalei_rnn (Kaleidoscope) adds its diversity loss in learner=q_learner "
                f"(QMIX, VDN), not learner={config['learner']}"
            )
        if config["share_rule"] == "none":
            return
        if config["learner"] == "q_learner" and config["mixer"] is not None:
            raise ConfigError(
                f"share_rule={config['share_rule']} shares each agent's own TD errors: q_learner has "
                f"them with mixer=None (IQL); with mixer={config['mixer']} use learner=q_divide_learner"
            )
        if config["share_target"] == "receiver" and config["agent_param_sharing"]:
            raise ConfigError(
                "share_target=receiver trains each receiver's own network and needs "
                "agent_param_sharing=False; with one shared network use share_target=reweight"
            )
        if config["share_control"] == "mass" and config["share_target"] != "reweight":
            raise ConfigError("share_control=mass is the control for share_target=reweight")
        if config["share_target"] in ("rows", "detached_rows") and config["learner"] != "q_divide_learner":
            raise ConfigError(
                f"share_target={config['share_target']} adds rows to DIFFER's individual errors and "
                f"needs learner=q_divide_learner, not learner={config['learner']}"
            )

    @classmethod
    def batch_fields(cls, config: dict) -> set[str]:
        return needed_fields(config)

    def __init__(self, mac: BasicMAC, scheme: dict, logger: Logger, args: SimpleNamespace) -> None:
        super().__init__(mac, scheme, logger, args)
        self.n_agents = args.n_agents
        rule = getattr(args, "share_rule", "none")
        self.sharer = None if rule == "none" else Sharer(args, args.n_agents, args.device)
        agent = getattr(mac, "agent", None)
        self.kalei = Kaleidoscope(args, agent) if hasattr(agent, "diversity_loss") else None
        if self.kalei is not None:
            logger.console_logger.info(f"Kaleidoscope: {self.kalei.describe()}")
        self.params = list(mac.parameters())
        self.mixer = None
        if args.mixer is not None:
            self.mixer = mixer_REGISTRY[args.mixer](args)
            self.params += list(self.mixer.parameters())
            self.target_mixer = self.add_network("mixer", self.mixer)
        self._make_optimisers()
        self.target_mac = self.add_network("agent", mac)

    def _make_optimisers(self):
        self.optimiser = self.add_optimiser("optimiser", self.params)

    def forward_and_targets(self, batch: EpisodeBatch) -> QTargets:
        """The Q-learning quantities every value-based learner starts from (see QTargets)."""
        args = self.args
        rewards, terminated, mask = self.rewards_and_masks(batch)
        actions = batch["actions"][:, :-1].long()  # [B, T, N, 1]
        inputs = self.mac.build_seq_inputs(batch)  # shared by the online and target networks
        mac_out = self.mac.forward_seq(batch, inputs)  # [B, T+1, N, A]
        q_taken = torch.gather(mac_out[:, :-1], 3, actions).squeeze(3)  # [B, T, N]
        mix_kwargs = {}
        with torch.no_grad():
            target_out = self.target_mac.forward_seq(batch, inputs)  # [B, T+1, N, A]
            avail = batch["avail_actions"]
            next_actions = bootstrap_actions(mac_out.detach(), target_out, avail, args.double_q)
            q_next = torch.gather(target_out, 3, next_actions).squeeze(3)  # [B, T+1, N]
            if self.mixer is None:
                values = q_next
            elif getattr(self.mixer, "needs_actions", False):
                # QPLEX: the online mixer sees the actions taken and the online greedy values; the
                # target one the bootstrap actions and the target network's own greedy values.
                online_greedy = next_actions if args.double_q else greedy_actions(mac_out.detach(), avail)
                target_greedy = greedy_actions(target_out, avail) if args.double_q else next_actions
                online_best = torch.gather(mac_out.detach(), 3, online_greedy)
                mix_kwargs = {"actions": batch["actions_onehot"][:, :-1], "max_qs": online_best[:, :-1, :, 0]}
                target_best = torch.gather(target_out, 3, target_greedy).squeeze(3)
                onehot = torch.zeros_like(target_out).scatter_(3, next_actions, 1.0)
                seen = {}
                if getattr(self.mixer, "needs_obs", False):  # QPLEX with attention keys from obs
                    mix_kwargs["obs"] = batch["obs"][:, :-1]
                    seen["obs"] = self.mixer.target_observations(batch["obs"])
                values = self.target_mixer(q_next, batch["state"], actions=onehot, max_qs=target_best, **seen)
            else:
                values = self.target_mixer(q_next, batch["state"])
            if args.td_lambda > 0:
                targets = lambda_returns(rewards, terminated, mask, values, args.gamma, args.td_lambda)
            else:
                targets = rewards + args.gamma * (1 - terminated) * values[:, 1:]
        return QTargets(rewards, terminated, mask, q_taken, q_next, targets, mix_kwargs)

    def mixer_penalty(self, batch, out):
        """A mixer's own loss term (QPLEX-Qatten's attention logits), or None."""
        if not hasattr(self.mixer, "penalty"):
            return None
        return self.mixer.penalty(batch["state"][:, :-1], **out.mix_kwargs)

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> dict | None:
        resets = self.kalei.maybe_reset(t_env) if self.kalei is not None else None
        out = self.forward_and_targets(batch)
        mask, chosen_action_qvals, targets = out.mask, out.q_taken, out.targets
        if self.mixer is not None:
            chosen_action_qvals = self.mixer(chosen_action_qvals, batch["state"][:, :-1], **out.mix_kwargs)

        td_error = chosen_action_qvals - targets
        step_mask = mask
        mask = mask.expand_as(td_error)
        masked_td_error = td_error * mask
        squared = self.weigh_episodes(masked_td_error**2, batch)
        shared = None
        if self.sharer is not None:  # IQL: each agent's own errors, from the steps it is alive
            alive = mask * alive_mask(batch)[:, :-1]
            with torch.no_grad():
                shared = self.sharer.share(masked_td_error * alive, alive, batch, t_env)
            if self.args.share_target == "reweight":
                squared = squared * (1 + shared.extra)
        loss = squared.sum() / mask.sum()
        penalty = self.mixer_penalty(batch, out)
        if penalty is not None:
            loss = loss + penalty
        if shared is not None and self.args.share_target == "receiver":
            n = self.n_agents
            rewards = out.rewards.expand(-1, -1, n)
            loss = (
                loss
                + self.receiver_loss(batch, rewards, out.terminated.expand(-1, -1, n), shared) / mask.sum()
            )
        kalei = {}
        if self.kalei is not None:  # the masks' diversity term, weighed against the TD loss
            term, kalei = self.kalei.loss(loss)
            kalei["td_loss"] = loss.detach()
            loss = loss + term
            if resets is not None:
                kalei["kalei_weights_reset"] = resets
        grad_norm = self.step(self.optimiser, loss, self.params)
        self.finish_update(episode_num)

        if self.log_due(t_env):
            n = mask.sum()
            if self.kalei is not None:
                kalei["mask_sparsity"] = self.kalei.agent.sparsity()
            self.log(
                t_env,
                **kalei,
                **({"mixer_penalty": penalty} if penalty is not None else {}),
                loss=loss,
                grad_norm=grad_norm,
                td_error_abs=masked_td_error.abs().sum() / n,
                q_taken_mean=(chosen_action_qvals * mask).sum() / n,
                target_mean=(targets * mask).sum() / n,
                **(shared.stats if shared is not None else {}),
            )
        return self.feedback(masked_td_error, step_mask)

    def receiver_loss(self, batch, rewards, terminated, shared) -> torch.Tensor:
        """SUPER's semantics with one network per agent: receiver j's own network on sender i's
        transition (its inputs, action and reward r_i [B, T, N], one-step target through j's
        target network, double Q as set), weighted by how often i shared the step with j. Each
        shift k pairs receiver j with sender (j + k) mod N; only j's network sees the term. The
        shifts that carry any weight go through the networks together, stacked along the batch
        (one call per network instead of one per shift and network)."""
        args, n = self.args, self.n_agents
        inputs = self.mac.build_seq_inputs(batch)  # [B * N, T + 1, in]
        b = batch.batch_size
        rows = inputs.view(b, n, *inputs.shape[1:])
        receivers_idx = torch.arange(n, device=inputs.device)
        senders, weights = [], []
        for k in range(1, n):  # agents, never samples
            sender = (receivers_idx + k) % n  # receiver j's sender
            weight = shared.senders[..., sender] * shared.receivers[:, :, sender, receivers_idx]  # [B, T, N]
            weight = self.weigh_episodes(weight, batch)
            if bool((weight > 0).any()):
                senders.append(sender)
                weights.append(weight)
        if not senders:
            return torch.zeros((), device=inputs.device)
        sender = torch.stack(senders)  # [K, N]
        k = len(senders)
        crossed = rows[:, sender].transpose(0, 1).reshape(k * b * n, *inputs.shape[1:])  # [(K B N), T+1, in]
        q_out = self.mac.forward_seq(batch, crossed)  # [K * B, T + 1, N, A]: net j on its sender's inputs
        actions = batch["actions"][:, :-1, sender].long().movedim(2, 0).flatten(0, 1)  # [K * B, T, N, 1]
        avail = batch["avail_actions"][:, :, sender].movedim(2, 0).flatten(0, 1)
        q_taken = torch.gather(q_out[:, :-1], 3, actions).squeeze(3)
        with torch.no_grad():
            target_out = self.target_mac.forward_seq(batch, crossed)
            q_next = bootstrap_values(q_out.detach(), target_out, avail, args.double_q)[:, 1:]
            reward = rewards[:, :, sender].movedim(2, 0).flatten(0, 1)
            done = terminated[:, :, sender].movedim(2, 0).flatten(0, 1)
            targets = reward + args.gamma * (1 - done) * q_next
        weight = torch.stack(weights).flatten(0, 1)  # [K * B, T, N]
        if args.share_weight != 1.0:
            weight = weight * args.share_weight
        return (weight * (q_taken - targets) ** 2).sum()

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.sharer is not None:
            state["sharer"] = self.sharer.state_dict()
        if self.kalei is not None:
            state["kalei"] = self.kalei.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.sharer is not None and "sharer" in state:
            self.sharer.load_state_dict(state["sharer"])
        if self.kalei is not None and "kalei" in state:
            self.kalei.load_state_dict(state["kalei"])
