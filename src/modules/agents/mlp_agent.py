import torch.nn as nn
import torch.nn.functional as F

from modules.activations import ACTIVATIONS


class MLPAgent(nn.Module):
    """Feed-forward agent: fc -> act -> fc -> act -> fc (act: mlp_activation, ReLU by default);
    memoryless, so it sees all steps at once."""

    def __init__(self, input_shape, args, output_dim=None):
        super().__init__()
        self.fc1 = nn.Linear(input_shape, args.hidden_dim)
        self.fc2 = nn.Linear(args.hidden_dim, args.hidden_dim)
        self.fc3 = nn.Linear(args.hidden_dim, output_dim or args.n_actions)
        self.act = ACTIVATIONS[args.mlp_activation]

    def init_hidden(self, n):
        return None

    def forward(self, inputs, hidden=None):
        # inputs: [n, T, input_shape]; F.linear on 2-D rows skips the module-call overhead
        n, t, _ = inputs.shape
        x = self.act(F.linear(inputs.reshape(n * t, -1), self.fc1.weight, self.fc1.bias))
        x = self.act(F.linear(x, self.fc2.weight, self.fc2.bias))
        return F.linear(x, self.fc3.weight, self.fc3.bias).view(n, t, -1), hidden
