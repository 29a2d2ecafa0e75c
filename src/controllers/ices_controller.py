from __future__ import annotations

import numpy as np
import torch

from components.action_selectors import greedy_np, uniform_available_np
from components.schedules import horizon, linear
from controllers.basic_controller import BasicMAC
from modules.agents import REGISTRY as agent_REGISTRY
from utils.keys import declare_keys

declare_keys(
    "ICES (mac ices_mac with learner ices_learner)",
    (
        "ices_int_ratio",
        0.1,
        "float in [0, 1]",
        "chance that an agent plays the exploration policy's sample in training, annealed linearly over "
        "the schedule horizon to ices_int_finish",
    ),
    ("ices_int_finish", 0.1, "float in [0, 1]", "the floor of that chance"),
)


class ICESMAC(BasicMAC):
    """ICES's controller: the Q agents (trained by the learner on the env's reward) and an
    exploration policy of the same architecture that also sees the global state (training only:
    its actions are stored and learned from like any other).

    In training each agent takes, in this order of precedence, a uniformly random available
    action with probability epsilon, a sample of the exploration policy (softmax over the
    available actions) with probability ices_int_ratio, annealed linearly to ices_int_finish over
    the schedule horizon, else its greedy Q action. Tests use the Q agents only (greedy, or
    evaluation_epsilon)."""

    def __init__(self, scheme: dict, groups: dict[str, int], args) -> None:
        super().__init__(scheme, groups, args)
        self.explorer = agent_REGISTRY[args.agent](
            self.input_shape + int(np.prod(args.state_shape)), args, output_dim=args.n_actions
        )
        self.explorer_hidden = None
        self.int_ratio = self.explorer_ratio(0)

    def explorer_ratio(self, t_env: int) -> float:
        a = self.args
        return max(linear(a.ices_int_ratio, 0.0, t_env, horizon(a)), a.ices_int_finish)  # ICES: to 0, floored

    def init_hidden(self, batch_size: int) -> None:
        super().init_hidden(batch_size)
        self.explorer_hidden = self.explorer.init_hidden(batch_size * self.n_agents)

    def explorer_inputs(self, batch, t0: int, t1: int) -> torch.Tensor:
        """[B, t1 - t0, N, in + state]: the Q agents' inputs and the global state."""
        x = self._build_inputs(batch, t0, t1)
        state = batch["state"][:, t0:t1, None, :].expand(-1, -1, self.n_agents, -1)
        return torch.cat([x, state], dim=-1)

    def explorer_seq_inputs(self, batch) -> torch.Tensor:
        """[B * N, T, in + state]: one row per (episode, agent), time along dim 1."""
        return self._to_rows(self.explorer_inputs(batch, 0, batch.max_seq_length))

    def explorer_forward_seq(self, batch, rows=None) -> torch.Tensor:
        """The exploration policy's logits at every step of `batch`: [B, T, N, A]."""
        rows = self.explorer_seq_inputs(batch) if rows is None else rows
        out, _ = self.explorer(rows, self.explorer.init_hidden(rows.shape[0]))
        return out.view(batch.batch_size, self.n_agents, rows.shape[1], -1).transpose(1, 2)

    @torch.inference_mode()
    def select_actions(self, ep_batch, t_ep, t_env, bs=slice(None), test_mode=False):
        if test_mode:  # the Q policy alone; the exploration policy's state is not needed
            return super().select_actions(ep_batch, t_ep, t_env, bs=bs, test_mode=True)
        q = self.forward(ep_batch, t_ep)
        rows = self._to_rows(self.explorer_inputs(ep_batch, t_ep, t_ep + 1))
        logits, self.explorer_hidden = self.explorer(rows, self.explorer_hidden)
        logits = logits.view(ep_batch.batch_size, self.n_agents, -1)
        selector = self.action_selector
        selector.epsilon = selector.schedule.eval(t_env)
        self.int_ratio = self.explorer_ratio(t_env)
        avail = ep_batch["avail_actions"][bs, t_ep].cpu().numpy()
        q, logits = q[bs].cpu().numpy(), logits[bs].cpu().numpy().astype(np.float64)
        n_act = avail.shape[-1]
        # Per agent: Gumbel noise for the policy sample, uniform noise for a random action, and
        # the two coins (numpy.random, which the run seeds).
        u = np.random.random_sample(avail.shape[:-1] + (2 * n_act + 2,))
        with np.errstate(divide="ignore"):
            gumbel = -np.log(-np.log(u[..., :n_act]))
        sampled = greedy_np(logits + gumbel, avail)
        random_actions = uniform_available_np(u[..., n_act : 2 * n_act], avail)
        actions = greedy_np(q, avail)
        actions = np.where(u[..., -2] < self.int_ratio, sampled, actions)
        actions = np.where(u[..., -1] < selector.epsilon, random_actions, actions)
        return torch.from_numpy(actions).to(ep_batch["avail_actions"].device)

    def to(self, device) -> ICESMAC:
        super().to(device)
        self.explorer.to(device)
        return self
