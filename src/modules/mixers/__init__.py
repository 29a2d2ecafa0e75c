"""Mixers: forward(agent_qs [B, T, N], states [B, T, S]) -> q_tot [B, T, 1]."""

from utils.registry import Registry

from .qmix import QMixer
from .vdn import VDNMixer

REGISTRY = Registry("mixer", {"vdn": VDNMixer, "qmix": QMixer})
