import math

import numpy as np
import torch
import torch.nn as nn

from utils.errors import ConfigError
from utils.keys import declare_keys

declare_keys(
    "QPLEX mixer (mixer=qplex)",
    (
        "num_kernel",
        4,
        "int >= 1",
        "QPLEX: attention heads of the advantage weights lambda_i(s, u)",
    ),
    (
        "adv_hypernet_layers",
        1,
        "one of: 1, 2, 3",
        "QPLEX: depth of each head's key, agent and action networks",
    ),
    (
        "adv_hypernet_embed",
        64,
        "int >= 1",
        "QPLEX: hidden width of those networks (adv_hypernet_layers > 1)",
    ),
    (
        "is_minus_one",
        True,
        None,
        "QPLEX: advantage term sum_i (lambda_i - 1) A_i (False: sum_i lambda_i A_i)",
    ),
    (
        "weighted_head",
        True,
        None,
        "QPLEX: transform each Q_i to w_i(s) Q_i + v_i(s) before the dueling split",
    ),
    (
        "is_stop_gradient",
        True,
        None,
        "QPLEX: the advantage term trains only lambda (its A_i are detached), as in the reference",
    ),
)


class KernelMLP(nn.Module):
    """K independent MLPs (one per attention head) evaluated as one batched product.

    Equivalent to K separate nn.Sequential(Linear, ReLU, ..., Linear) with PyTorch's default
    initialisation, without a Python loop over heads: [M, in] -> [M, K, out]."""

    def __init__(self, n_in, n_out, n_kernels, layers, hidden):
        super().__init__()
        if layers not in (1, 2, 3):
            raise ConfigError(f"adv_hypernet_layers={layers!r} is not supported; valid choices: 1, 2, 3")
        self.k, self.n_out = n_kernels, n_out
        dims = [n_in] + [hidden] * (layers - 1) + [n_out]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            shape = (a, n_kernels * b) if i == 0 else (n_kernels, a, b)
            bound = 1.0 / math.sqrt(a)  # nn.Linear's default for weight and bias
            self.weights.append(nn.Parameter(torch.empty(shape).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(n_kernels, b).uniform_(-bound, bound)))

    def forward(self, x):
        m = x.shape[0]
        h = (x @ self.weights[0]).view(m, self.k, -1) + self.biases[0]  # [M, K, d1]
        for w, b in zip(self.weights[1:], self.biases[1:], strict=True):
            h = torch.einsum("mkd,kde->mke", torch.relu(h), w) + b
        return h  # [M, K, out]


class QPLEXMixer(nn.Module):
    """QPLEX (Wang et al. 2021), the duplex dueling mixer of the authors' code and PyMARL2:

        Q_i'  = w_i(s) Q_i + v_i(s),   V_i' = w_i(s) max_a Q_i(a) + v_i(s)      (w_i > 0)
        Q_tot = sum_i Q_i' + sum_i (lambda_i(s, u) - 1) (Q_i' - V_i')           (is_minus_one)

    lambda_i(s, u) = sum_k |key_k(s)| sigmoid(agent_k(s))_i sigmoid(action_k(s, u))_i > 0, so
    the joint greedy action of the agents is greedy for Q_tot (IGM). As in the reference, the
    advantage term reaches the agent values only through lambda: (Q_i' - V_i') is detached when
    is_stop_gradient is set. Needs the joint action (one-hot) and each agent's max Q."""

    needs_actions = True

    def __init__(self, args):
        super().__init__()
        self._setup(args)
        s, h, n = self.state_dim, args.hypernet_embed, self.n_agents
        self.hyper_w_final = nn.Sequential(nn.Linear(s, h), nn.ReLU(), nn.Linear(h, n))
        self.V = nn.Sequential(nn.Linear(s, h), nn.ReLU(), nn.Linear(h, n))
        self._lambda_networks(args)

    def _setup(self, args):
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.state_dim = int(np.prod(args.state_shape))
        if args.num_kernel < 1:
            raise ConfigError(f"num_kernel={args.num_kernel!r} must be >= 1")
        self.minus_one = args.is_minus_one
        self.weighted_head = args.weighted_head
        self.stop_gradient = args.is_stop_gradient

    def _lambda_networks(self, args):
        s, n, k = self.state_dim, self.n_agents, args.num_kernel
        layers, adv_h = args.adv_hypernet_layers, args.adv_hypernet_embed
        self.key = KernelMLP(s, 1, k, layers, adv_h)
        self.agents = KernelMLP(s, n, k, layers, adv_h)
        self.action = KernelMLP(s + n * self.n_actions, n, k, layers, adv_h)

    def transform(self, states, q, obs=None):
        """(w [M, N] > 0, v [M, N]): each agent's Q_i -> w_i Q_i + v_i."""
        if self.weighted_head:
            return self.hyper_w_final(states).abs() + 1e-10, self.V(states)
        return torch.ones_like(q), torch.zeros_like(q)

    def lambdas(self, states, actions):
        """lambda_i(s, u) [M, N] from states [M, S] and joint one-hot actions [M, N * A]."""
        key = self.key(states).abs() + 1e-10  # [M, K, 1]
        agents = torch.sigmoid(self.agents(states))  # [M, K, N]
        action = torch.sigmoid(self.action(torch.cat([states, actions], dim=1)))
        return (key * agents * action).sum(dim=1)

    def _parts(self, agent_qs, states, actions, obs=None):
        lead = agent_qs.shape[:-1]
        st = states.reshape(-1, self.state_dim)
        q = agent_qs.reshape(-1, self.n_agents)
        w, v = self.transform(st, q, obs)
        lam = self.lambdas(st, actions.reshape(st.shape[0], -1))
        return lead, q, w, v, lam

    def forward(self, agent_qs, states, actions, max_qs, obs=None):
        # agent_qs, max_qs: [B, T, N]; states: [B, T, S]; actions: [B, T, N, A] one-hot;
        # obs [B, T, N, O]: only for a transform that reads the observations
        return self.forward_with_jacobian(agent_qs, states, actions, max_qs, obs, jacobian=False)[0]

    def forward_with_jacobian(self, agent_qs, states, actions, max_qs, obs=None, jacobian=True):
        """(Q_tot [B, T, 1], dQ_tot/dQ_i [B, T, N] or None). The Jacobian holds each agent's max Q
        fixed and stops no gradient: w_i lambda_i (w_i (1 + lambda_i) without is_minus_one)."""
        lead, q, w, v, lam = self._parts(agent_qs, states, actions, obs)
        adv = w * (q - max_qs.reshape(q.shape))  # = Q_i' - V_i'
        if self.stop_gradient:
            adv = adv.detach()
        coef = lam - 1.0 if self.minus_one else lam
        q_tot = ((w * q + v).sum(dim=1) + (adv * coef).sum(dim=1)).view(*lead, 1)
        jac = (w * (coef + 1.0)).view(*lead, self.n_agents) if jacobian else None
        return q_tot, jac
