import torch.nn as nn
import torch.nn.functional as F


class MLPAgent(nn.Module):
    """Feed-forward agent: fc -> ReLU -> fc -> ReLU -> fc; memoryless, so it sees all steps at once."""

    def __init__(self, input_shape, args, output_dim=None):
        super().__init__()
        self.fc1 = nn.Linear(input_shape, args.hidden_dim)
        self.fc2 = nn.Linear(args.hidden_dim, args.hidden_dim)
        self.fc3 = nn.Linear(args.hidden_dim, output_dim or args.n_actions)

    def init_hidden(self, n):
        return None

    def forward(self, inputs, hidden=None):
        # inputs: [n, T, input_shape]; 2-D matmuls are the cheapest path for small batches
        n, t, _ = inputs.shape
        x = F.relu(self.fc1(inputs.reshape(n * t, -1)))
        x = F.relu(self.fc2(x))
        return self.fc3(x).view(n, t, -1), hidden
