import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNAgent(nn.Module):
    """fc -> ReLU -> GRU -> fc. The GRU runs a whole sequence in one call (no Python time loop)."""

    def __init__(self, input_shape, args, output_dim=None):
        super().__init__()
        self.hidden_dim = args.hidden_dim
        self.fc1 = nn.Linear(input_shape, args.hidden_dim)
        self.rnn = nn.GRU(args.hidden_dim, args.hidden_dim, batch_first=True)
        self.layer_norm = nn.LayerNorm(args.hidden_dim) if args.use_layer_norm else None
        self.fc2 = nn.Linear(args.hidden_dim, output_dim or args.n_actions)

    def init_hidden(self, n):
        return self.fc1.weight.new_zeros(n, self.hidden_dim)

    def forward(self, inputs, hidden):
        # inputs: [n, T, input_shape]; hidden: [n, H]
        if inputs.shape[1] == 1:  # one step (acting): the cell op avoids nn.GRU's per-call overhead
            rnn = self.rnn
            x = F.relu(self.fc1(inputs[:, 0]))
            h_last = torch.gru_cell(
                x, hidden, rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0
            )
            h = h_last if self.layer_norm is None else self.layer_norm(h_last)
            return self.fc2(h).unsqueeze(1), h_last
        x = F.relu(self.fc1(inputs))
        h_seq, h_last = self.rnn(x, hidden.unsqueeze(0).contiguous())
        if self.layer_norm is not None:
            h_seq = self.layer_norm(h_seq)
        return self.fc2(h_seq), h_last.squeeze(0)
