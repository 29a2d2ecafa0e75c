"""How an actor's network outputs become actions: one object that acting and the learner share.

    greedy(out, avail)                -> the deterministic action (test episodes, target actors)
    policy_actions(out, avail, sample) -> actions as a critic sees them, [..., A], differentiable
    last_action_key                   -> the batch field of the previous action (agent inputs)

Exploration on top of these is an action selector (components/action_selectors.py).
"""

import torch

from utils.errors import ConfigError
from utils.rl_utils import gumbel_softmax, gumbel_softmax_st

MASKED_LOGIT = -1e10  # logit of an unavailable action: finite, so softmax has no NaN


class DiscreteActions:
    """Logits over the actions: one-hot actions; the learner differentiates through a
    straight-through Gumbel-softmax sample."""

    continuous = False
    last_action_key = "actions_onehot"
    exploration = "gumbel"

    def __init__(self, args):
        self.temperature = args.gumbel_temperature

    def greedy(self, out, avail):
        return out.masked_fill(avail == 0, -float("inf")).argmax(dim=-1)

    def policy_actions(self, out, avail, sample):
        logits = out.masked_fill(avail == 0, MASKED_LOGIT)
        if sample:
            return gumbel_softmax_st(logits, self.temperature)
        return torch.nn.functional.one_hot(logits.argmax(dim=-1), out.shape[-1]).to(out.dtype)


class BoundedActions:
    """tanh outputs mapped affinely onto the env's bounds [low, high]; deterministic."""

    continuous = True
    last_action_key = "actions"

    def __init__(self, args):
        self.low = torch.tensor(args.action_low, dtype=torch.float32)
        self.high = torch.tensor(args.action_high, dtype=torch.float32)
        self.exploration = args.exploration_mode

    def bounds(self, like):
        return self.low.to(like.device), self.high.to(like.device)

    def greedy(self, out, avail):
        low, high = self.bounds(out)
        return (low + (torch.tanh(out) + 1) * (high - low) / 2) * avail

    def policy_actions(self, out, avail, sample):
        return self.greedy(out, avail)


class SimplexActions:
    """The paper's MPE actor for [0, 1] action vectors: soft Gumbel-softmax samples of the
    logits in training (and for the learner), softmax(logits) as the greedy action."""

    continuous = True
    last_action_key = "actions"
    exploration = "soft_gumbel"

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


def action_form(args):
    """The form of this run's actions: discrete, or continuous with continuous_actor tanh/softmax."""
    if getattr(args, "action_space", "discrete") != "continuous":
        return DiscreteActions(args)
    return SimplexActions(args) if args.continuous_actor == "softmax" else BoundedActions(args)
