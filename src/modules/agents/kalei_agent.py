"""Kaleidoscope (Li et al., NeurIPS 2024): one set of weights shared by all agents, and per mask
(each agent, or each unit type) learnable pruning thresholds. Mask k's effective weight is
sign(w) * relu(|w| - sigmoid(s_k)); its binary mask, 1 where |w| > sigmoid(s_k), passes gradients
to the thresholds through a straight-through estimator (tanh of the incoming gradient). The agent
is the one their SMACv2 code compares against: fc -> GRU -> fc -> fc -> fc, every fc masked.
`DeepRNNAgent` is the same network without masks (the like-for-like baseline)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.errors import ConfigError
from utils.keys import declare_keys

declare_keys(
    "Kaleidoscope (agent kalei_rnn with learner q_learner)",
    (
        "kalei_n_unit_types",
        0,
        "int >= 0",
        "0: one mask per agent; k: one mask per unit type, read from the last k observation features "
        "(one-hot; SMACv2's 3 races' types)",
    ),
    (
        "kalei_threshold_init_scale",
        5.0,
        "float >= 0",
        "thresholds start at -(U[0,1) * scale + bias): sigmoid of them prunes almost nothing",
    ),
    ("kalei_threshold_init_bias", 5.0, "float", "see kalei_threshold_init_scale"),
)


class StraightThrough(torch.autograd.Function):
    """Forward: 1 where the input is positive, else 0. Backward: tanh of the incoming gradient."""

    @staticmethod
    def forward(ctx, x):
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return torch.tanh(grad)


def random_thresholds(shape, scale, bias, like):
    """-(U[0, 1) * scale + bias): sigmoid of it is tiny, so a fresh mask prunes almost nothing."""
    return -(torch.rand(shape, dtype=like.dtype, device=like.device) * scale + bias)


class MaskGroups:
    """Row-steps [n, T] ordered by their mask id (a stable sort), so that each masked layer applies
    each mask to its own rows in one product; computed once per forward for every layer."""

    def __init__(self, ids, n_masks):
        flat = ids.reshape(-1)
        self.shape = ids.shape
        self.order = torch.argsort(flat, stable=True)
        self.inverse = torch.empty_like(self.order)
        self.inverse[self.order] = torch.arange(flat.numel(), device=flat.device)
        self.sizes = torch.bincount(flat, minlength=n_masks).tolist()

    def take(self, x):
        """[n, T, d] -> [R, d] grouped by mask."""
        return x.reshape(-1, x.shape[-1]).index_select(0, self.order)

    def restore(self, rows):
        """[R, d] grouped by mask -> [n, T, d] in the original order."""
        return rows.index_select(0, self.inverse).view(*self.shape, -1)


class MaskedLinear(nn.Linear):
    """A linear layer with n_masks threshold sets; forward(x [n, T, in], ids [n, T]) applies each
    row-step's own mask."""

    def __init__(self, in_features, out_features, n_masks, init_scale=5.0, init_bias=5.0):
        super().__init__(in_features, out_features)
        self.n_masks = n_masks
        shape = (n_masks, out_features, in_features)
        self.thresholds = nn.Parameter(random_thresholds(shape, init_scale, init_bias, self.weight))

    def masked_weights(self):
        """[K, out, in]: each mask's effective weight."""
        w = self.weight.unsqueeze(0)
        return torch.sign(w) * F.relu(w.abs() - torch.sigmoid(self.thresholds))

    def masks(self):
        """[K, out, in]: each mask's binary mask (straight-through to the thresholds)."""
        return StraightThrough.apply(self.weight.detach().abs().unsqueeze(0) - torch.sigmoid(self.thresholds))

    def forward(self, x, ids):
        groups = MaskGroups(ids, self.n_masks)
        return groups.restore(self.grouped(groups.take(x), groups.sizes))

    def grouped(self, rows, sizes):
        """rows [R, in], grouped by mask (`sizes` rows of mask 0, then of mask 1, ...) -> [R, out]:
        one product per row, where every mask's output for every row costs n_masks times that."""
        w = self.masked_weights()
        if self.n_masks == 1:
            return F.linear(rows, w[0], self.bias)
        parts = torch.split(rows, sizes)
        return torch.cat([F.linear(g, w[k], self.bias) for k, g in enumerate(parts) if sizes[k]])

    @torch.no_grad()
    def reset_pruned(self, ratio, scale, bias):
        """Each weight that every mask prunes is, with probability `ratio`, drawn afresh (Kaiming
        uniform, as nn.Linear draws it) with fresh thresholds for every mask. -> how many."""
        pruned_by_all = self.masks().sum(0) == 0
        chosen = (torch.rand_like(self.weight) < ratio) & pruned_by_all
        fresh = torch.empty_like(self.weight)
        nn.init.kaiming_uniform_(fresh, a=math.sqrt(5))
        self.weight.copy_(torch.where(chosen, fresh, self.weight))
        new = random_thresholds(self.thresholds.shape, scale, bias, self.thresholds)
        self.thresholds.copy_(torch.where(chosen.unsqueeze(0), new, self.thresholds))
        return int(chosen.sum())


class KaleiRNNAgent(nn.Module):
    """fc1 -> ReLU -> GRU -> fc2 -> ReLU -> fc3 -> ReLU -> fc4, the fc layers masked per agent
    (kalei_n_unit_types = 0) or per unit type (the last kalei_n_unit_types features of each
    observation, one-hot, name it)."""

    def __init__(self, input_shape, args, output_dim=None):
        super().__init__()
        self.hidden_dim, self.n_agents = args.hidden_dim, args.n_agents
        self.n_types = args.kalei_n_unit_types
        self.obs_dim = args.obs_shape if isinstance(args.obs_shape, int) else int(args.obs_shape[0])
        n_masks = self.n_types or self.n_agents
        scale, bias = args.kalei_threshold_init_scale, args.kalei_threshold_init_bias
        h = args.hidden_dim
        self.fc1 = MaskedLinear(input_shape, h, n_masks, scale, bias)
        self.rnn = nn.GRU(h, h, batch_first=True)
        self.fc2 = MaskedLinear(h, h, n_masks, scale, bias)
        self.fc3 = MaskedLinear(h, h, n_masks, scale, bias)
        self.fc4 = MaskedLinear(h, output_dim or args.n_actions, n_masks, scale, bias)
        self.mask_layers = [self.fc1, self.fc2, self.fc3, self.fc4]
        self.reset_layers = [self.fc2, self.fc3, self.fc4]  # as theirs: not the input layer

    def init_hidden(self, n):
        return self.fc1.weight.new_zeros(n, self.hidden_dim)

    def mask_ids(self, inputs):
        """[n, T]: each row-step's mask: its agent (rows are (episode, agent), agent fastest) or
        its unit type."""
        n, t, _ = inputs.shape
        if not self.n_types:
            agent = torch.arange(n, device=inputs.device) % self.n_agents
            return agent[:, None].expand(n, t)
        types = inputs[..., self.obs_dim - self.n_types : self.obs_dim]
        one_hot = ((types == 0) | (types == 1)).all(-1) & (types.sum(-1) == 1)
        # the rest must be dead agents, who observe zeros (read only where needed: it is costly)
        if not bool(one_hot.all()) and not bool((inputs[~one_hot][:, : self.obs_dim] == 0).all()):
            raise ConfigError(
                f"kalei_n_unit_types={self.n_types} reads each agent's unit type from the last "
                f"{self.n_types} features of its observation, which are not one-hot here (an env "
                "without unit types there); use kalei_n_unit_types=0 for one mask per agent"
            )
        return types.argmax(-1)  # a dead agent's zeros read as type 0, as theirs

    def forward(self, inputs, hidden):
        g = MaskGroups(self.mask_ids(inputs), self.fc1.n_masks)
        x = g.restore(F.relu(self.fc1.grouped(g.take(inputs), g.sizes)))
        h_seq, h_last = self.rnn(x, hidden.unsqueeze(0).contiguous())
        q = F.relu(self.fc2.grouped(g.take(h_seq), g.sizes))  # fc2-fc4 stay in mask order
        q = F.relu(self.fc3.grouped(q, g.sizes))
        return g.restore(self.fc4.grouped(q, g.sizes)), h_last.squeeze(0)

    def diversity_loss(self, layer_weights):
        """-(sum over layers of weight_l * sum over mask pairs of |m_i - m_j|, with m the binary
        mask times |w|) / (K (K - 1)) / the masked layers' weight count: lower when masks differ."""
        k = self.fc1.n_masks
        if k < 2:
            return self.fc1.weight.new_zeros(())
        total = 0.0
        for layer, lw in zip(self.mask_layers, layer_weights, strict=True):
            m = layer.masks() * layer.weight.detach().abs()
            total = total + lw * (m.unsqueeze(0) - m.unsqueeze(1)).abs().sum()
        count = sum(layer.weight.numel() for layer in self.mask_layers)
        return -total / (k * (k - 1)) / count

    def sparsity(self):
        """The share of masked weights that are zero, over every mask and layer."""
        zero = sum(float((layer.masks() == 0).sum()) for layer in self.mask_layers)
        return zero / sum(layer.thresholds.numel() for layer in self.mask_layers)


class DeepRNNAgent(nn.Module):
    """fc1 -> ReLU -> GRU -> fc2 -> ReLU -> fc3 -> ReLU -> fc4: Kaleidoscope's agent without
    masks, the like-for-like QMIX baseline of their SMACv2 comparison."""

    def __init__(self, input_shape, args, output_dim=None):
        super().__init__()
        h = self.hidden_dim = args.hidden_dim
        self.fc1 = nn.Linear(input_shape, h)
        self.rnn = nn.GRU(h, h, batch_first=True)
        self.fc2, self.fc3 = nn.Linear(h, h), nn.Linear(h, h)
        self.fc4 = nn.Linear(h, output_dim or args.n_actions)

    def init_hidden(self, n):
        return self.fc1.weight.new_zeros(n, self.hidden_dim)

    def forward(self, inputs, hidden):
        x = F.relu(self.fc1(inputs))
        h_seq, h_last = self.rnn(x, hidden.unsqueeze(0).contiguous())
        q = F.relu(self.fc3(F.relu(self.fc2(h_seq))))
        return self.fc4(q), h_last.squeeze(0)
