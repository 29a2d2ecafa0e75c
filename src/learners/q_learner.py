import copy

import torch

from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.rl_utils import (RunningMeanStd, bootstrap_terminated, bootstrap_values, lambda_returns,
                            make_optimiser, soft_update, valid_mask)


class QLearner:
    """IQL (mixer None), VDN and QMIX with one-step or TD(lambda) (double) Q-learning targets."""

    def __init__(self, mac, scheme, logger, args):
        self.args = args
        self.mac = mac
        self.logger = logger
        self.params = list(mac.parameters())
        self.mixer = None
        if args.mixer is not None:
            self.mixer = mixer_REGISTRY[args.mixer](args)
            self.params += list(self.mixer.parameters())
            self.target_mixer = copy.deepcopy(self.mixer)
        self._make_optimisers()
        self.target_mac = copy.deepcopy(mac)
        self.reward_rms = RunningMeanStd(device=args.device) if args.standardise_rewards else None
        self.last_target_update_episode = 0
        self.train_steps = 0
        self.log_stats_t = -args.learner_log_interval - 1

    def _make_optimisers(self):
        self.optimiser = make_optimiser(self.params, self.args)

    def train(self, batch, t_env, episode_num):
        args = self.args
        rewards = batch["reward"][:, :-1]  # [B, T, 1] or [B, T, N]
        actions = batch["actions"][:, :-1].long()  # [B, T, N, 1]
        terminated = bootstrap_terminated(batch, args.episode_limit, args.time_limit_bootstrap)  # [B, T, 1]
        mask = valid_mask(batch)  # [B, T, 1]
        avail_actions = batch["avail_actions"]  # [B, T+1, N, A]

        if self.reward_rms is not None:  # real transitions only (EPyMARL also counts padding)
            rewards = self.reward_rms.standardise(rewards, mask)

        inputs = self.mac.build_seq_inputs(batch)  # shared by the online and target networks
        mac_out = self.mac.forward_seq(batch, inputs)  # [B, T+1, N, A]
        chosen_action_qvals = torch.gather(mac_out[:, :-1], 3, actions).squeeze(3)  # [B, T, N]

        with torch.no_grad():
            target_out = self.target_mac.forward_seq(batch, inputs)  # [B, T+1, N, A]
            target_qvals = bootstrap_values(mac_out.detach(), target_out, avail_actions,
                                            args.double_q)  # [B, T+1, N]
            if self.mixer is not None:
                target_qvals = self.target_mixer(target_qvals, batch["state"])  # [B, T+1, 1]
            if args.td_lambda > 0:
                targets = lambda_returns(rewards, terminated, mask, target_qvals, args.gamma,
                                         args.td_lambda)
            else:
                targets = rewards + args.gamma * (1 - terminated) * target_qvals[:, 1:]

        if self.mixer is not None:
            chosen_action_qvals = self.mixer(chosen_action_qvals, batch["state"][:, :-1])

        td_error = chosen_action_qvals - targets
        mask = mask.expand_as(td_error)
        masked_td_error = td_error * mask
        loss = (masked_td_error ** 2).sum() / mask.sum()

        self.optimiser.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, args.grad_norm_clip)
        self.optimiser.step()
        self.train_steps += 1
        self._update_targets(episode_num)

        if t_env - self.log_stats_t >= args.learner_log_interval:
            mask_elems = mask.sum()
            self.logger.log_stat("loss", loss.item(), t_env)
            self.logger.log_stat("grad_norm", grad_norm.item(), t_env)
            self.logger.log_stat("td_error_abs", (masked_td_error.abs().sum() / mask_elems).item(), t_env)
            self.logger.log_stat("q_taken_mean", ((chosen_action_qvals * mask).sum() / mask_elems).item(), t_env)
            self.logger.log_stat("target_mean", ((targets * mask).sum() / mask_elems).item(), t_env)
            self.log_stats_t = t_env

    def _update_targets(self, episode_num):
        if self.args.target_update_mode == "soft":
            soft_update(self.target_mac.agent, self.mac.agent, self.args.tau)
            if self.mixer is not None:
                soft_update(self.target_mixer, self.mixer, self.args.tau)
        elif (episode_num - self.last_target_update_episode) / self.args.target_update_interval >= 1.0:
            self.update_targets_hard()
            self.last_target_update_episode = episode_num

    def update_targets_hard(self):
        self.target_mac.load_state(self.mac)
        if self.mixer is not None:
            self.target_mixer.load_state_dict(self.mixer.state_dict())

    def to(self, device):
        for module in (self.mac, self.target_mac):
            module.to(device)
        if self.mixer is not None:
            self.mixer.to(device)
            self.target_mixer.to(device)
        return self

    # --- checkpoints ------------------------------------------------------------------------
    def state_dict(self):
        state = {
            "agent": self.mac.state_dict(),
            "target_agent": self.target_mac.state_dict(),
            "last_target_update_episode": self.last_target_update_episode,
            "train_steps": self.train_steps,
        }
        if self.optimiser is not None:
            state["optimiser"] = self.optimiser.state_dict()
        if self.mixer is not None:
            state["mixer"] = self.mixer.state_dict()
            state["target_mixer"] = self.target_mixer.state_dict()
        if self.reward_rms is not None:
            state["reward_rms"] = self.reward_rms.state_dict()
        return state

    def load_state_dict(self, state):
        self.mac.load_state_dict(state["agent"])
        self.target_mac.load_state_dict(state["target_agent"])
        if self.mixer is not None:
            self.mixer.load_state_dict(state["mixer"])
            self.target_mixer.load_state_dict(state["target_mixer"])
        if self.optimiser is not None:
            self.optimiser.load_state_dict(state["optimiser"])
        self.last_target_update_episode = state["last_target_update_episode"]
        self.train_steps = state["train_steps"]
        if self.reward_rms is not None and "reward_rms" in state:
            self.reward_rms.load_state_dict(state["reward_rms"])
