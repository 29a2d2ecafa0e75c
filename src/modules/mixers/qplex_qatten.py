import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.errors import ConfigError
from utils.keys import declare_keys

from .qplex import QPLEXMixer

declare_keys(
    "QPLEX with Qatten's transform (mixer=qplex_qatten)",
    ("qplex_qatten_heads", 4, "int >= 1", "mixer=qplex_qatten: attention heads"),
    (
        "qplex_qatten_keys",
        "state",
        "one of: state, obs",
        "mixer=qplex_qatten: each agent's attention key from its own block of the state (the QPLEX "
        "authors' SMAC code; SMAC-like envs) or from its observation (ICES's and CDS's football code)",
    ),
    (
        "qplex_qatten_reg",
        0.001,
        "float >= 0",
        "mixer=qplex_qatten: weight in the loss of the attention logits' mean square, summed over heads",
    ),
    (
        "qplex_qatten_target_obs",
        "next",
        "one of: next, current",
        "mixer=qplex_qatten with obs keys: the target mixer's keys from the observations of the step "
        "it values (next), or of the step before (current: ICES's football code passes the current "
        "observations beside the next state)",
    ),
)


class QPLEXQattenMixer(QPLEXMixer):
    """QPLEX whose per-agent transform Q_i -> w_i Q_i + v_i comes from Qatten's attention (the QPLEX
    authors' dmaq_qatten, which ICES runs on football): in each of H heads a query from the state
    attends over one key per agent (its block of the state, or its observation); w_i is the sum
    over heads of agent i's attention weight (each head weighted by |MLP(s)| with weighted_head),
    v_i = V(s) / N. The advantage weights lambda_i(s, u) are QPLEX's. penalty() is the attention
    logits' mean square times qplex_qatten_reg, which the learner adds to its loss."""

    def __init__(self, args):
        nn.Module.__init__(self)
        self._setup(args)
        self.keys_from = args.qplex_qatten_keys
        self.needs_obs = self.keys_from == "obs"
        self.target_obs = args.qplex_qatten_target_obs
        if self.keys_from == "obs":
            obs = args.obs_shape
            self.unit_dim = obs if isinstance(obs, int) else int(np.prod(obs))
        else:
            self.unit_dim = getattr(args, "state_agent_features", None)
            if not self.unit_dim:
                raise ConfigError(
                    f"mixer=qplex_qatten with qplex_qatten_keys=state reads each agent's own block of "
                    f"the state, which env {args.env!r} does not describe (SMAC-like envs do); set "
                    "qplex_qatten_keys=obs"
                )
        self.heads, self.embed = args.qplex_qatten_heads, args.mixing_embed_dim
        if self.heads < 1:
            raise ConfigError(f"qplex_qatten_heads={self.heads!r} must be >= 1")
        self.reg = args.qplex_qatten_reg
        s, h, e, hd = self.state_dim, args.hypernet_embed, self.embed, self.heads
        self.query = nn.Sequential(nn.Linear(s, h), nn.ReLU(), nn.Linear(h, hd * e, bias=False))
        self.unit_key = nn.Linear(self.unit_dim, hd * e, bias=False)
        if self.weighted_head:
            self.head_weights = nn.Sequential(nn.Linear(s, h), nn.ReLU(), nn.Linear(h, hd))
        self.V = nn.Sequential(nn.Linear(s, e), nn.ReLU(), nn.Linear(e, 1))
        self._lambda_networks(args)

    def logits(self, states, obs):
        """Attention logits [M, H, N] (before the 1/sqrt(E) scale) from states [M, S] and, with
        obs keys, obs [..., N, O]."""
        m, n = states.shape[0], self.n_agents
        if self.keys_from == "obs":
            units = obs.reshape(m, n, self.unit_dim)
        else:
            units = states[:, : n * self.unit_dim].reshape(m, n, self.unit_dim)
        q = self.query(states).view(m, self.heads, 1, self.embed)
        k = self.unit_key(units).view(m, n, self.heads, self.embed).permute(0, 2, 3, 1)  # [M, H, E, N]
        return torch.matmul(q, k).squeeze(2)

    def transform(self, states, q, obs=None):
        attend = F.softmax(self.logits(states, obs) / np.sqrt(self.embed), dim=-1)  # [M, H, N]
        if self.weighted_head:
            attend = attend * self.head_weights(states).abs().unsqueeze(-1)
        v = self.V(states) / self.n_agents
        return attend.sum(1) + 1e-10, v.expand_as(q)

    def penalty(self, states, obs=None, **_):
        """qplex_qatten_reg * sum over heads of the mean square of its logits (over every row)."""
        logits = self.logits(states.reshape(-1, self.state_dim), obs)
        return self.reg * (logits**2).mean(dim=(0, 2)).sum()

    def target_observations(self, obs):
        """The obs [B, T+1, N, O] the target mixer reads at each step: the step's own (next), or
        the step before's (current, as ICES's football code; step 0's own, never used)."""
        if self.target_obs == "next":
            return obs
        return torch.cat([obs[:, :1], obs[:, :-1]], dim=1)
