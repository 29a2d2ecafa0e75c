"""Critics: per-agent values from per-agent inputs [B, T, N, input_shape] (see each module)."""

from utils.registry import Registry

from .ac_critics import ACCritic, COMACritic, CVCritic
from .maddpg_critic import LocalCritic, MADDPGCritic

REGISTRY = Registry(
    "critic",
    {
        "maddpg_critic": MADDPGCritic,
        "local_critic": LocalCritic,
        "ac_critic": ACCritic,
        "cv_critic": CVCritic,
        "coma_critic": COMACritic,
    },
)
