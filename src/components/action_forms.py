"""How an actor's network outputs become actions: one object that acting and the learner share.

    greedy(out, avail)                -> the deterministic action (test episodes, target actors)
    policy_actions(out, avail, sample) -> actions as a critic sees them, [..., A], differentiable
    smoothed_target(out, avail, noise, clip) -> a target actor's action with TD3's smoothing
    last_action_key                   -> the batch field of the previous action (agent inputs)
    outputs_per_action                -> network outputs per action dimension (2: mean, log std)

Exploration on top of these is an action selector (components/action_selectors.py).
"""

import math

import torch

from utils.errors import ConfigError
from utils.rl_utils import gumbel_noise, gumbel_softmax, gumbel_softmax_st

MASKED_LOGIT = -1e10  # logit of an unavailable action: finite, so softmax has no NaN


class DiscreteActions:
    """Logits over the actions: one-hot actions; the learner differentiates through a
    straight-through Gumbel-softmax sample."""

    continuous = False
    last_action_key = "actions_onehot"
    exploration = "gumbel"
    outputs_per_action = 1

    def __init__(self, args):
        self.temperature = args.gumbel_temperature

    def greedy(self, out, avail):
        return out.masked_fill(avail == 0, -float("inf")).argmax(dim=-1)

    def policy_actions(self, out, avail, sample):
        logits = out.masked_fill(avail == 0, MASKED_LOGIT)
        if sample:
            return gumbel_softmax_st(logits, self.temperature)
        return torch.nn.functional.one_hot(logits.argmax(dim=-1), out.shape[-1]).to(out.dtype)

    def smoothed_target(self, out, avail, noise, clip):
        """Discrete smoothing: a one-hot sample of the target policy's softmax instead of its argmax."""
        logits = out.masked_fill(avail == 0, MASKED_LOGIT)
        sample = (logits + gumbel_noise(logits)).argmax(dim=-1)
        return torch.nn.functional.one_hot(sample, out.shape[-1]).to(out.dtype)


def bounds_on(holder, device):
    """holder.low and holder.high on `device`, moved there once rather than copied at every step."""
    if holder.low.device != device:
        holder.low, holder.high = holder.low.to(device), holder.high.to(device)
    return holder.low, holder.high


class BoundedActions:
    """tanh outputs mapped affinely onto the env's bounds [low, high]; deterministic."""

    continuous = True
    last_action_key = "actions"
    outputs_per_action = 1

    def __init__(self, args):
        self.low = torch.tensor(args.action_low, dtype=torch.float32)
        self.high = torch.tensor(args.action_high, dtype=torch.float32)
        self.exploration = args.exploration_mode

    def bounds(self, like):
        return bounds_on(self, like.device)

    def greedy(self, out, avail):
        low, high = self.bounds(out)
        return (low + (torch.tanh(out) + 1) * (high - low) / 2) * avail

    def policy_actions(self, out, avail, sample):
        return self.greedy(out, avail)

    def smoothed_target(self, out, avail, noise, clip):
        """TD3: the deterministic action plus Gaussian noise of `noise` half ranges, clipped to
        +-`clip` half ranges, then to the bounds."""
        low, high = self.bounds(out)
        half = (high - low) / 2
        eps = (torch.randn_like(out) * noise).clamp(-clip, clip) * half
        return torch.minimum(torch.maximum(self.greedy(out, avail) + eps, low), high) * avail


class SquashedGaussianActions(BoundedActions):
    """SAC's actor: u ~ N(mean, exp(log_std)) with both from the network (2 outputs per action
    dimension: means, then log stds, clamped to [-20, 2]), a = low + (tanh(u) + 1)(high - low)/2;
    log pi(a) = sum over the agent's dimensions of log N(u) - log(1 - tanh(u)^2) - log(half range)."""

    exploration = "policy_sample"
    outputs_per_action = 2
    LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0

    def __init__(self, args):
        super().__init__(args)
        self.exploration = "policy_sample"

    def split(self, out):
        mean, log_std = out.chunk(2, dim=-1)
        return mean, log_std.clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)

    def greedy(self, out, avail):
        return super().greedy(self.split(out)[0], avail)

    def policy_actions(self, out, avail, sample):
        return self.sample(out, avail)[0] if sample else self.greedy(out, avail)

    def smoothed_target(self, out, avail, noise, clip):
        return self.sample(out, avail)[0]

    def sample(self, out, avail):
        """(action [..., A], log pi(action) [...]) with a reparameterised sample (gradients flow)."""
        mean, log_std = self.split(out)
        u = mean + log_std.exp() * torch.randn_like(mean)
        low, high = self.bounds(out)
        half = (high - low) / 2
        action = (low + (torch.tanh(u) + 1) * half) * avail
        # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u|
        log_det = 2 * (math.log(2.0) - u - torch.nn.functional.softplus(-2 * u))
        gauss = -0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
        log_prob = ((gauss - log_det - torch.log(half)) * avail).sum(dim=-1)
        return action, log_prob


class SimplexActions:
    """The paper's MPE actor for [0, 1] action vectors: soft Gumbel-softmax samples of the
    logits in training (and for the learner), softmax(logits) as the greedy action."""

    continuous = True
    last_action_key = "actions"
    exploration = "soft_gumbel"
    outputs_per_action = 1

    def __init__(self, args):
        if not (set(args.action_low) <= {0} and set(args.action_high) <= {1}):
            raise ConfigError(
                f"continuous_actor=softmax emits action vectors on the simplex, so it "
                f"needs action bounds [0, 1]; this env's are low={args.action_low}, "
                f"high={args.action_high}; use continuous_actor=tanh"
            )
        self.temperature = args.gumbel_temperature

    def greedy(self, out, avail):
        return torch.softmax(out.masked_fill(avail == 0, MASKED_LOGIT), dim=-1)

    def policy_actions(self, out, avail, sample):
        if sample:
            return gumbel_softmax(out.masked_fill(avail == 0, MASKED_LOGIT), self.temperature)
        return self.greedy(out, avail)

    def smoothed_target(self, out, avail, noise, clip):
        return self.policy_actions(out, avail, sample=True)


CONTINUOUS_FORMS = {
    "tanh": BoundedActions,
    "softmax": SimplexActions,
    "squashed_gaussian": SquashedGaussianActions,
}


def action_form(args):
    """The form of this run's actions: discrete, or continuous as continuous_actor says."""
    if getattr(args, "action_space", "discrete") != "continuous":
        return DiscreteActions(args)
    return CONTINUOUS_FORMS[args.continuous_actor](args)
