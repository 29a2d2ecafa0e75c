import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.errors import ConfigError
from utils.keys import declare_keys

declare_keys(
    "QMIX mixer (mixer=qmix; QPLEX reads hypernet_embed too)",
    (
        "mixing_embed_dim",
        32,
        "int >= 1",
        "QMIX mixing layer width",
    ),
    (
        "hypernet_layers",
        2,
        "one of: 1, 2",
        "QMIX hypernetwork depth: 1 or 2",
    ),
    (
        "hypernet_embed",
        64,
        "int >= 1",
        "QMIX hypernetwork hidden width (hypernet_layers=2); QPLEX: width of its w_i(s) and v_i(s) networks",
    ),
)


class QMixer(nn.Module):
    """Monotonic mixing network whose weights come from hypernetworks of the state."""

    def __init__(self, args):
        super().__init__()
        self.n_agents = args.n_agents
        self.state_dim = int(np.prod(args.state_shape))
        self.embed_dim = args.mixing_embed_dim
        s, e, n = self.state_dim, self.embed_dim, self.n_agents

        if args.hypernet_layers == 1:
            self.hyper_w_1 = nn.Linear(s, e * n)
            self.hyper_w_final = nn.Linear(s, e)
        elif args.hypernet_layers == 2:
            h = args.hypernet_embed
            self.hyper_w_1 = nn.Sequential(nn.Linear(s, h), nn.ReLU(), nn.Linear(h, e * n))
            self.hyper_w_final = nn.Sequential(nn.Linear(s, h), nn.ReLU(), nn.Linear(h, e))
        else:
            raise ConfigError(
                f"hypernet_layers={args.hypernet_layers!r} is not supported; valid choices: 1, 2"
            )
        self.hyper_b_1 = nn.Linear(s, e)
        self.V = nn.Sequential(nn.Linear(s, e), nn.ReLU(), nn.Linear(e, 1))

    def forward(self, agent_qs, states):
        # agent_qs: [B, T, N]; states: [B, T, S]
        bs = agent_qs.shape[:-1]
        states = states.reshape(-1, self.state_dim)
        agent_qs = agent_qs.reshape(-1, 1, self.n_agents)
        w1 = torch.abs(self.hyper_w_1(states)).view(-1, self.n_agents, self.embed_dim)
        b1 = self.hyper_b_1(states).view(-1, 1, self.embed_dim)
        hidden = F.elu(torch.bmm(agent_qs, w1) + b1)  # [BT, 1, E]
        w_final = torch.abs(self.hyper_w_final(states)).view(-1, self.embed_dim, 1)
        v = self.V(states).view(-1, 1, 1)
        q_tot = torch.bmm(hidden, w_final) + v  # [BT, 1, 1]
        return q_tot.view(*bs, 1)
