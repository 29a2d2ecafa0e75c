"""Agent networks. Contract: init_hidden(n) -> [n, H] (or None);
forward(inputs [n, T, input_shape], hidden [n, H] or None) -> (out [n, T, n_actions], hidden)."""

from utils.registry import Registry

from .hpn_agent import DeepSetAgent, DeepSetHyperAgent, HPNAgent
from .kalei_agent import DeepRNNAgent, KaleiRNNAgent
from .mlp_agent import MLPAgent
from .rnn_agent import RNNAgent
from .transformer_agent import TransformerAgent

REGISTRY = Registry(
    "agent",
    {
        "rnn": RNNAgent,
        "mlp": MLPAgent,
        "transformer": TransformerAgent,
        "hpn_rnn": HPNAgent,
        "deepset_rnn": DeepSetAgent,
        "deepset_hyper_rnn": DeepSetHyperAgent,
        "kalei_rnn": KaleiRNNAgent,
        "deep_rnn": DeepRNNAgent,
    },
)
