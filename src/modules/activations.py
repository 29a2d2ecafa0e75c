"""Hidden-layer activations by config name (mlp_activation)."""

import torch
import torch.nn.functional as F

ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh}
