"""Critics: forward(inputs [B, T, N, input_shape]) -> values [B, T, N]."""

from utils.registry import Registry

from .maddpg_critic import MADDPGCritic

REGISTRY = Registry("critic", {"maddpg_critic": MADDPGCritic})
