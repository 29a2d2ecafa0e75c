import math

import torch
import torch.nn as nn

from modules.activations import ACTIVATIONS


def flat_size(vshape: int | tuple) -> int:
    """Entries of one item of a scheme field: an int vshape, or the product of a tuple."""
    return vshape if isinstance(vshape, int) else math.prod(vshape)


class BatchedMLP(nn.Module):
    """n_nets MLPs (ReLU or tanh between layers) over per-agent inputs [B, T, N, in] -> [B, T, N, out].

    One net (n_nets = 1) serves every agent with plain matrix products; with one net per agent
    (n_nets = N) the N nets run as one batched matrix product per layer (weights [N, in, out]),
    never as a loop over agents. nn.Linear's default initialisation."""

    def __init__(self, n_nets: int, sizes: tuple[int, ...], activation: str = "relu") -> None:
        super().__init__()
        self.shared = n_nets == 1
        self.act = ACTIVATIONS[activation]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            w = torch.empty(n_nets, fan_in, fan_out)
            bound = 1.0 / math.sqrt(fan_in)
            nn.init.uniform_(w, -bound, bound)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.empty(n_nets, 1, fan_out).uniform_(-bound, bound)))

    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Clip each agent's net on its own gradient norm (one agent's targets must not rescale
        another's update); returns the largest norm before clipping."""
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        if self.shared:
            return torch.nn.utils.clip_grad_norm_(self.parameters(), max_norm)
        norms = torch.stack([g.pow(2).flatten(1).sum(1) for g in grads]).sum(0).sqrt()  # [N]
        scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.view(-1, *([1] * (g.dim() - 1))))
        return norms.max()

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        *lead, n, d = inputs.shape
        last = len(self.weights) - 1
        if self.shared:
            x = inputs.reshape(-1, d)
            for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
                x = torch.addmm(b[0], x, w[0])
                x = self.act(x) if i < last else x
            return x.view(*lead, n, -1)
        x = inputs.reshape(-1, n, d).transpose(0, 1)  # [N, rows, in]: one slice per net
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = torch.baddbmm(b, x, w)
            x = self.act(x) if i < last else x
        return x.transpose(0, 1).reshape(*lead, n, -1)
