"""Stochastic policies of the actor-critic controller (ac_mac): the distribution an agent
network's outputs define, its log-probabilities and entropy for the learners, and the map from a
stored action to what the env receives.

    CategoricalPolicy  discrete actions: softmax over the available actions' logits
    GaussianPolicy     continuous actions: N(mu, sigma) per dimension, mu from the network and a
                       learned state-independent log sigma; samples are stored raw and mapped
                       onto the env's bounds by clipping or tanh (squash)

Every method takes `out` [..., A] (network outputs) and `avail` [..., A] (available actions, or
active dimensions for continuous actions) and works on any leading shape.
"""

import math

import torch
import torch.nn.functional as F

from components.action_forms import MASKED_LOGIT, bounds_on
from utils.rl_utils import gumbel_noise

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class CategoricalPolicy:
    """floor > 0 (PyMARL's COMA) mixes a uniform choice among the available actions into the
    policy, pi' = (1 - floor) pi + floor / n_available, for acting and for the learner alike."""

    continuous = False

    def __init__(self):
        self.floor = 0.0

    def log_probs(self, out, avail):
        """log pi over all actions; unavailable ones get a finite, vanishing log-probability
        (a row with no available action, a padded step, stays finite: uniform)."""
        log_pi = torch.log_softmax(out.masked_fill(avail == 0, MASKED_LOGIT), dim=-1)
        if self.floor == 0:
            return log_pi
        uniform = avail / avail.sum(-1, keepdim=True).clamp(min=1)
        mixed = (1 - self.floor) * log_pi.exp() + self.floor * uniform
        return mixed.clamp(min=1e-20).log()  # unavailable: a constant, so no gradient and no NaN

    def log_prob(self, out, actions, avail, log_std=None):
        """log pi(actions) [...]; actions [..., 1] (indices)."""
        return self.log_probs(out, avail).gather(-1, actions.long()).squeeze(-1)

    def entropy(self, out, avail, log_std=None):
        return self.entropy_of(self.log_probs(out, avail), avail)

    @staticmethod
    def entropy_of(log_pi, avail):
        """-sum over available actions of pi log pi (unavailable terms are exactly 0)."""
        return -(log_pi.exp() * log_pi).masked_fill(avail == 0, 0.0).sum(-1)

    def evaluate(self, out, actions, avail, log_std=None):
        """log pi(actions) and the entropy from one log-softmax."""
        log_pi = self.log_probs(out, avail)
        return log_pi.gather(-1, actions.long()).squeeze(-1), self.entropy_of(log_pi, avail)

    def sample(self, out, avail, log_std=None):
        """Gumbel-max: a draw from the masked softmax, from the run-seeded torch RNG."""
        logits = out if self.floor == 0 else self.log_probs(out, avail)
        logits = logits.masked_fill(avail == 0, -float("inf"))
        return (logits + gumbel_noise(logits)).argmax(dim=-1)

    def mode(self, out, avail, log_std=None):
        return out.masked_fill(avail == 0, -float("inf")).argmax(dim=-1)

    def env_actions(self, actions, avail):
        return actions


class GaussianPolicy:
    """Diagonal Gaussian over raw actions u; env action = low + (squash(u) + 1)(high - low) / 2
    with squash clip(u, -1, 1) or tanh(u). log-probabilities are of the raw sample (with tanh's
    change of variables), over the active dimensions only."""

    continuous = True

    def __init__(self, low, high, squash, log_std_min, log_std_max):
        self.low = torch.as_tensor(low, dtype=torch.float32)
        self.high = torch.as_tensor(high, dtype=torch.float32)
        self.squash = squash
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def std_of(self, log_std):
        return log_std.clamp(self.log_std_min, self.log_std_max)

    def log_prob(self, out, actions, avail, log_std):
        log_sigma = self.std_of(log_std)
        z = (actions - out) * torch.exp(-log_sigma)
        logp = -0.5 * z**2 - log_sigma - LOG_SQRT_2PI
        if self.squash == "tanh":  # log |d tanh(u)/du| = 2 (log 2 - u - softplus(-2u))
            logp = logp - 2 * (math.log(2) - actions - F.softplus(-2 * actions))
        return (logp * avail).sum(-1)

    def entropy(self, out, avail, log_std):
        """The base Gaussian's entropy (also in tanh mode, which has no closed form)."""
        h = 0.5 + LOG_SQRT_2PI + self.std_of(log_std)
        return (h.expand_as(out) * avail).sum(-1)

    def evaluate(self, out, actions, avail, log_std):
        return self.log_prob(out, actions, avail, log_std), self.entropy(out, avail, log_std)

    def sample(self, out, avail, log_std):
        return (out + torch.exp(self.std_of(log_std)) * torch.randn_like(out)) * avail

    def mode(self, out, avail, log_std=None):
        return out * avail

    def env_actions(self, actions, avail):
        low, high = bounds_on(self, actions.device)
        unit = actions.clamp(-1.0, 1.0) if self.squash == "clip" else torch.tanh(actions)
        return (low + (unit + 1) * (high - low) / 2) * avail
