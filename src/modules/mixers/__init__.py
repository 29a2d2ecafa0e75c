"""Mixers: forward(agent_qs [B, T, N], states [B, T, S]) -> q_tot [B, T, 1].

A mixer with `needs_actions = True` (QPLEX) also takes actions [B, T, N, A] (one-hot joint action)
and max_qs [B, T, N] (each agent's greedy value); one with `forward_with_jacobian` gives DIFFER the
exact dQ_tot/dQ_i where its training gradient stops part of it. One with `needs_obs = True` also
takes the agents' observations (obs [B, T, N, O]; the target mixer's through
`target_observations`), and one with `penalty(states, **mix_kwargs)` adds that term to the loss."""

from utils.registry import Registry

from .qatten import QattenMixer
from .qmix import QMixer
from .qplex import QPLEXMixer
from .qplex_qatten import QPLEXQattenMixer
from .vdn import VDNMixer

REGISTRY = Registry(
    "mixer",
    {
        "vdn": VDNMixer,
        "qmix": QMixer,
        "qplex": QPLEXMixer,
        "qplex_qatten": QPLEXQattenMixer,
        "qatten": QattenMixer,
    },
)
