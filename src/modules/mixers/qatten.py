import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.errors import ConfigError
from utils.keys import declare_keys

declare_keys(
    "Qatten mixer (mixer=qatten)",
    (
        "qatten_heads",
        4,
        "int >= 1",
        "mixer=qatten: attention heads",
    ),
    (
        "qatten_embed_dim",
        32,
        "int >= 1",
        "mixer=qatten: the query and key size of each head (and the constant's hidden layer); "
        "hypernet_embed sizes the query's and head weights' hidden layers",
    ),
    (
        "qatten_weighted",
        True,
        None,
        "mixer=qatten: each head weighted by |MLP(state)| (PyMARL2's weighted type); False sums the heads",
    ),
)


class QattenMixer(nn.Module):
    """Qatten (Yang et al. 2020), as PyMARL2 configures it: in each of H heads, a query from the
    state attends over keys from each agent's own block of the state; the head's value is the
    attention-weighted sum of the agents' Qs. Q_tot = sum_h w_h(s) * head_h + c(s), with
    w_h = |MLP(s)| (qatten_weighted; else 1), so Q_tot is monotonic in every Q_i."""

    needs_agent_state = True  # SMAC-like envs only (their state opens with one block per agent)

    def __init__(self, args):
        super().__init__()
        if not getattr(args, "state_agent_features", None):
            raise ConfigError(
                f"mixer=qatten reads each agent's own block of the state, which env {args.env!r} does "
                "not describe (SMAC-like envs do: skirmish, skirmish_v2, sc2, sc2v2); use mixer=qmix"
            )
        self.n_agents, self.n_heads = args.n_agents, args.qatten_heads
        self.state_dim = int(np.prod(args.state_shape))
        self.agent_dim = args.state_agent_features
        self.embed, self.weighted = args.qatten_embed_dim, args.qatten_weighted
        s, h, e = self.state_dim, args.hypernet_embed, self.embed
        self.query = nn.Sequential(nn.Linear(s, h), nn.ReLU(), nn.Linear(h, self.n_heads * e))
        self.key = nn.Linear(self.agent_dim, self.n_heads * e)
        self.head_weights = nn.Sequential(nn.Linear(s, h), nn.ReLU(), nn.Linear(h, self.n_heads))
        self.constant = nn.Sequential(nn.Linear(s, e), nn.ReLU(), nn.Linear(e, 1))

    def attention(self, states):
        """-> lambda [M, H, N]: each head's weights over the agents, M = B * T."""
        m, n, hd, e = states.shape[0], self.n_agents, self.n_heads, self.embed
        own = states[:, : n * self.agent_dim].reshape(m, n, self.agent_dim).detach()
        q = self.query(states).view(m, hd, 1, e)
        k = self.key(own).view(m, n, hd, e).permute(0, 2, 3, 1)  # [M, H, E, N]
        return F.softmax(torch.matmul(q, k).squeeze(2) / np.sqrt(e), dim=-1)

    def forward(self, agent_qs, states):
        # agent_qs: [B, T, N]; states: [B, T, S]
        bs = agent_qs.shape[:-1]
        states = states.reshape(-1, self.state_dim)
        lam = self.attention(states)  # [M, H, N]
        heads = (lam * agent_qs.reshape(-1, 1, self.n_agents)).sum(-1)  # [M, H]
        if self.weighted:
            heads = heads * torch.abs(self.head_weights(states))
        q_tot = heads.sum(-1, keepdim=True) + self.constant(states)
        return q_tot.view(*bs, 1)
