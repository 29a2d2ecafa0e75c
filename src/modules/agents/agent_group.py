import torch
import torch.nn as nn


class AgentGroup(nn.Module):
    """One network per agent behind the shared-agent contract: rows are (episode, agent) with
    the agent index varying fastest, as the controllers lay them out. The loop is over agents
    (a handful), never over batch elements.

    With a `route` (from route(nets), nets [n] long: the network of each row) the rows are
    routed instead: each network runs only on its own rows, which is how policy ensembles run
    just the sub-policy played. A route can be kept for as long as the rows' networks stay."""

    def __init__(self, make_agent, n_agents):
        super().__init__()
        self.n_agents = n_agents
        self.agents = nn.ModuleList(make_agent() for _ in range(n_agents))

    def init_hidden(self, n, route=None):
        if route is not None:
            _, counts, inverse = route
            hidden = [a.init_hidden(c) for a, c in zip(self.agents, counts, strict=True) if c]
            return None if hidden[0] is None else torch.cat(hidden)[inverse]
        hidden = [a.init_hidden(n // self.n_agents) for a in self.agents]
        if hidden[0] is None:
            return None
        return torch.stack(hidden, dim=1).reshape(n, -1)

    def clip_grad_norm_(self, max_norm):
        """Clip each agent's network on its own gradient norm; returns the largest norm."""
        return torch.stack(
            [torch.nn.utils.clip_grad_norm_(a.parameters(), max_norm) for a in self.agents]
        ).max()

    def forward(self, inputs, hidden=None, route=None):
        if route is not None:
            return self._routed(inputs, hidden, route)
        n, t, d = inputs.shape
        x = inputs.view(n // self.n_agents, self.n_agents, t, d)
        h = None if hidden is None else hidden.view(n // self.n_agents, self.n_agents, -1)
        outs, hiddens = [], []
        for i, agent in enumerate(self.agents):
            out, h_i = agent(x[:, i], None if h is None else h[:, i])
            outs.append(out)
            hiddens.append(h_i)
        out = torch.stack(outs, dim=1).reshape(n, t, -1)
        new_hidden = None if hiddens[0] is None else torch.stack(hiddens, dim=1).reshape(n, -1)
        return out, new_hidden

    def route(self, nets):
        """The row order sorted by network, each network's row count, and the inverse order."""
        order = torch.argsort(nets, stable=True)
        counts = torch.bincount(nets, minlength=self.n_agents).tolist()
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order), device=order.device)
        return order, counts, inverse

    def _routed(self, inputs, hidden, route):
        """Each network on its own block of rows, then the rows back in their order."""
        order, counts, inverse = route
        xs = inputs[order].split(counts)
        hs = [None] * len(counts) if hidden is None else hidden[order].split(counts)
        outs, hiddens = [], []
        for agent, x, h, c in zip(self.agents, xs, hs, counts, strict=True):
            if c:
                out, h_new = agent(x, h)
                outs.append(out)
                hiddens.append(h_new)
        new_hidden = None if hiddens[0] is None else torch.cat(hiddens)[inverse]
        return torch.cat(outs)[inverse], new_hidden
