import torch
import torch.nn as nn


class AgentGroup(nn.Module):
    """One network per agent behind the shared-agent contract: rows are (episode, agent) with
    the agent index varying fastest, as the controllers lay them out. The loop is over agents
    (a handful), never over batch elements."""

    def __init__(self, make_agent, n_agents):
        super().__init__()
        self.n_agents = n_agents
        self.agents = nn.ModuleList(make_agent() for _ in range(n_agents))

    def init_hidden(self, n):
        hidden = [a.init_hidden(n // self.n_agents) for a in self.agents]
        if hidden[0] is None:
            return None
        return torch.stack(hidden, dim=1).reshape(n, -1)

    def clip_grad_norm_(self, max_norm):
        """Clip each agent's network on its own gradient norm; returns the largest norm."""
        return torch.stack([torch.nn.utils.clip_grad_norm_(a.parameters(), max_norm)
                            for a in self.agents]).max()

    def forward(self, inputs, hidden=None):
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
