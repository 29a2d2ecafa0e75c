"""What every learner shares, so that a learner adds only its loss.

A learner registers its networks (each gets a target copy, updated hard or soft as the config
says) and its optimisers; the base class owns the counters, the target updates, clip-and-step,
reward standardisation, the logging cadence, moving to a device and checkpoints.

Class attributes declare what a learner supports and needs; `config.validate` and `run.py` read
them instead of lists of learner names:

    action_spaces  the env action spaces it can learn ("discrete", "continuous")
    macs           the controllers it can train
    mixer_use      "none", "optional" or "required" (self.mixer is the network, where there is one)
    on_policy      trains on the episodes just collected instead of a replay buffer
    aux_batches    further batches each update draws for models of its own (ICES's world model):
                   train_aux(batch, t_env, k) for k in range(aux_batches), after train()

`batch_fields(config)` names the env's extra step fields a learner needs; `train()` returns what
the replay buffer should learn about the batch it trained on ({"priorities": [B]}) or None.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch

from utils.rl_utils import RunningMeanStd, bootstrap_terminated, make_optimiser, soft_update, valid_mask

if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable
    from typing import Any

    from components.episode_buffer import EpisodeBatch
    from controllers.basic_controller import BasicMAC
    from utils.logger import Logger


class Learner:
    action_spaces = ("discrete",)
    macs = ("basic_mac",)
    mixer_use = "none"
    on_policy = False
    aux_batches = 0

    def __init__(self, mac: BasicMAC, scheme: dict, logger: Logger, args: SimpleNamespace) -> None:
        self.args = args
        self.mac = mac
        self.logger = logger
        # EPyMARL's standardise_rewards: per reward column (one, or one per agent), sample variances
        columns = 1 if args.common_reward else args.n_agents
        self.reward_rms = (
            RunningMeanStd(shape=(columns,), device=args.device, unbiased=True)
            if args.standardise_rewards
            else None
        )
        self.last_target_update_episode = 0
        self.train_steps = 0
        self.log_stats_t = -args.learner_log_interval - 1
        self._networks = {}  # name -> (online, target); checkpoint keys <name>, target_<name>
        self._optimisers = {}  # name -> optimiser; checkpoint key <name>

    @classmethod
    def validate(cls, config: dict) -> None:
        """Refuse settings this learner cannot use (ConfigError); called by config.validate."""

    @classmethod
    def batch_fields(cls, config: dict) -> set[str]:
        """The env's extra step fields (envs/multiagentenv.STEP_FIELDS) this learner reads from its
        batches with these settings; the run records them, and refuses an env without them."""
        return set()

    def observe(self, episode_batch: EpisodeBatch) -> None:
        """Sees each batch of new episodes as it enters the replay buffer (running statistics)."""

    def train_aux(self, batch: EpisodeBatch, t_env: int, k: int) -> None:
        """Trains on further batch k of this update (see aux_batches)."""

    # --- construction -----------------------------------------------------------------------
    def add_network(self, name: str, online: Any, target: bool = True) -> Any:
        """Register a network (or the controller) and return its target copy (None without)."""
        copied = copy.deepcopy(online) if target else None
        self._networks[name] = (online, copied)
        return copied

    def add_optimiser(self, name: str, params: list, lr: float | None = None) -> torch.optim.Optimizer:
        optimiser = make_optimiser(params, self.args, lr=lr)
        self._optimisers[name] = optimiser
        return optimiser

    # --- one update -------------------------------------------------------------------------
    def rewards_and_masks(self, batch: EpisodeBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> rewards [B, T, 1 or N] (standardised if asked), terminated [B, T, 1] (time-limit cuts
        bootstrapped or not, as configured) and the valid-step mask [B, T, 1]."""
        rewards = batch["reward"][:, :-1]
        terminated = bootstrap_terminated(batch, self.args.episode_limit, self.args.time_limit_bootstrap)
        mask = valid_mask(batch)
        if self.reward_rms is not None:  # real transitions only (EPyMARL also counts padding)
            rewards = self.reward_rms.standardise(rewards, mask)
        return rewards, terminated, mask

    def episode_weights(self, batch: EpisodeBatch) -> torch.Tensor | None:
        """Prioritised replay's importance weights of the batch's episodes, [B, 1, 1], or None."""
        w = getattr(batch, "is_weights", None)
        return None if w is None else w.to(self.args.device).view(-1, 1, 1)

    def weigh_episodes(self, x: torch.Tensor, batch: EpisodeBatch, copies: int = 1) -> torch.Tensor:
        """x [copies * B, ...] (per-episode terms of the loss, `copies` stacks of the batch) times
        prioritised replay's importance weight of each term's episode; x itself without PER. The
        one place the weights are applied."""
        w = self.episode_weights(batch)
        if w is None:
            return x
        return x * (w if copies == 1 else torch.cat([w] * copies, 0))

    def feedback(self, td_error: torch.Tensor, mask: torch.Tensor) -> dict | None:
        """What the buffer learns from this update: with use_per, each episode's priority
        sum_t |delta_t| / sqrt(its steps) (PyMARL2's), from the masked TD errors [B, T, C] and
        the step mask [B, T, 1]; else None."""
        if not getattr(self.args, "use_per", False):
            return None
        with torch.no_grad():
            steps = mask[:, :, 0].sum(1).clamp(min=1.0)
            return {"priorities": (td_error.detach().abs().sum((1, 2)) / steps.sqrt()).cpu()}

    def step(
        self,
        optimiser: torch.optim.Optimizer,
        loss: torch.Tensor,
        clip: list | Callable[[float], torch.Tensor],
    ) -> torch.Tensor:
        """Zero, backpropagate, clip and step; -> the gradient norm before clipping. `clip` is a
        list of parameters, or a callable taking the max norm (networks that clip their parts
        separately)."""
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        if callable(clip):
            grad_norm = clip(self.args.grad_norm_clip)
        else:
            grad_norm = torch.nn.utils.clip_grad_norm_(clip, self.args.grad_norm_clip)
        optimiser.step()
        return grad_norm

    def finish_update(self, episode_num: int) -> None:
        """Count the update and update the targets (soft every update, or hard every
        target_update_interval episodes)."""
        self.train_steps += 1
        if self.args.target_update_mode == "soft":
            for online, target in self._targets():
                soft_update(_module(target), _module(online), self.args.tau)
        elif (episode_num - self.last_target_update_episode) / self.args.target_update_interval >= 1.0:
            self.update_targets_hard()
            self.last_target_update_episode = episode_num

    def update_targets_hard(self) -> None:
        for online, target in self._targets():
            _module(target).load_state_dict(_module(online).state_dict())

    def _targets(self):
        return [(online, target) for online, target in self._networks.values() if target is not None]

    # --- logging ----------------------------------------------------------------------------
    def log_due(self, t_env: int) -> bool:
        return t_env - self.log_stats_t >= self.args.learner_log_interval

    def log(self, t_env: int, **stats: float | torch.Tensor) -> None:
        """Log each stat (tensors are read with .item()) and restart the logging interval."""
        for key, value in stats.items():
            self.logger.log_stat(key, value.item() if torch.is_tensor(value) else float(value), t_env)
        self.log_stats_t = t_env

    # --- device and checkpoints ---------------------------------------------------------------
    def to(self, device: str | torch.device) -> Learner:
        for online, target in self._networks.values():
            online.to(device)
            if target is not None:
                target.to(device)
        return self

    def state_dict(self) -> dict:
        state = {
            "last_target_update_episode": self.last_target_update_episode,
            "train_steps": self.train_steps,
            "log_stats_t": self.log_stats_t,  # a resumed run logs on the uninterrupted run's steps
        }
        for name, (online, target) in self._networks.items():
            state[name] = online.state_dict()
            if target is not None:
                state[f"target_{name}"] = target.state_dict()
        for name, optimiser in self._optimisers.items():
            state[name] = optimiser.state_dict()
        if self.reward_rms is not None:
            state["reward_rms"] = self.reward_rms.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        for name, (online, target) in self._networks.items():
            online.load_state_dict(state[name])
            if target is not None:
                target.load_state_dict(state[f"target_{name}"])
        for name, optimiser in self._optimisers.items():
            optimiser.load_state_dict(state[name])
        self.last_target_update_episode = state["last_target_update_episode"]
        self.train_steps = state["train_steps"]
        self.log_stats_t = state.get("log_stats_t", self.log_stats_t)
        if self.reward_rms is not None and "reward_rms" in state:
            self.reward_rms.load_state_dict(state["reward_rms"])


def _module(net):
    """The torch module of a network or of a controller (whose agent network it is)."""
    return net.agent if hasattr(net, "load_state") else net
