from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from learners.base import Learner
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.rl_utils import bootstrap_values, lambda_returns

if TYPE_CHECKING:  # annotations only
    from components.episode_buffer import EpisodeBatch
    from controllers.basic_controller import BasicMAC
    from utils.logger import Logger


class QLearner(Learner):
    """IQL (mixer None), VDN and QMIX with one-step or TD(lambda) (double) Q-learning targets."""

    mixer = "optional"

    def __init__(self, mac: BasicMAC, scheme: dict, logger: Logger, args: SimpleNamespace) -> None:
        super().__init__(mac, scheme, logger, args)
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

    def forward_and_targets(self, batch: EpisodeBatch) -> tuple[torch.Tensor, ...]:
        """The Q-learning quantities every value-based learner starts from:
        rewards, terminated, mask [B, T, .]; q_taken [B, T, N] (online, chosen actions);
        q_next [B, T+1, N] (per-agent bootstrap values of the target network, double Q as
        configured); targets [B, T, 1 or N] (one-step or TD(lambda), through the target mixer
        when there is one)."""
        args = self.args
        rewards, terminated, mask = self.rewards_and_masks(batch)
        actions = batch["actions"][:, :-1].long()  # [B, T, N, 1]
        inputs = self.mac.build_seq_inputs(batch)  # shared by the online and target networks
        mac_out = self.mac.forward_seq(batch, inputs)  # [B, T+1, N, A]
        q_taken = torch.gather(mac_out[:, :-1], 3, actions).squeeze(3)  # [B, T, N]
        with torch.no_grad():
            target_out = self.target_mac.forward_seq(batch, inputs)  # [B, T+1, N, A]
            q_next = bootstrap_values(
                mac_out.detach(), target_out, batch["avail_actions"], args.double_q
            )  # [B, T+1, N]
            values = q_next if self.mixer is None else self.target_mixer(q_next, batch["state"])
            if args.td_lambda > 0:
                targets = lambda_returns(rewards, terminated, mask, values, args.gamma, args.td_lambda)
            else:
                targets = rewards + args.gamma * (1 - terminated) * values[:, 1:]
        return rewards, terminated, mask, q_taken, q_next, targets

    def train(self, batch: EpisodeBatch, t_env: int, episode_num: int) -> None:
        _, _, mask, chosen_action_qvals, _, targets = self.forward_and_targets(batch)
        if self.mixer is not None:
            chosen_action_qvals = self.mixer(chosen_action_qvals, batch["state"][:, :-1])

        td_error = chosen_action_qvals - targets
        mask = mask.expand_as(td_error)
        masked_td_error = td_error * mask
        loss = (masked_td_error**2).sum() / mask.sum()
        grad_norm = self.step(self.optimiser, loss, self.params)
        self.finish_update(episode_num)

        if self.log_due(t_env):
            n = mask.sum()
            self.log(
                t_env,
                loss=loss,
                grad_norm=grad_norm,
                td_error_abs=masked_td_error.abs().sum() / n,
                q_taken_mean=(chosen_action_qvals * mask).sum() / n,
                target_mean=(targets * mask).sum() / n,
            )
