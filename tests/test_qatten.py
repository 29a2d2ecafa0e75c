"""The Qatten mixer: attention over the agents per head, monotonic mixing, SMAC-like envs only."""

from types import SimpleNamespace

import pytest
import torch

from modules.mixers.qatten import QattenMixer
from utils.errors import ConfigError


def mixer(weighted=True, seed=0):
    torch.manual_seed(seed)
    args = SimpleNamespace(
        n_agents=3, state_shape=20, state_agent_features=4, qatten_heads=4, qatten_embed_dim=8,
        qatten_weighted=weighted, hypernet_embed=16, env="skirmish",
    )  # fmt: skip
    return QattenMixer(args)


@pytest.mark.parametrize("weighted", [True, False])
def test_qatten_mixes_monotonically_with_attention_that_sums_to_one(weighted):
    m = mixer(weighted)
    qs = torch.randn(2, 5, 3, requires_grad=True)
    states = torch.randn(2, 5, 20)
    q_tot = m(qs, states)
    assert q_tot.shape == (2, 5, 1)
    (grad,) = torch.autograd.grad(q_tot.sum(), qs)
    assert (grad >= 0).all() and (grad > 0).any()
    lam = m.attention(states.reshape(-1, 20))
    assert lam.shape == (10, 4, 3) and torch.allclose(lam.sum(-1), torch.ones(10, 4))
    # by hand: sum over heads of w_h * sum_i lambda_hi Q_i, plus the state's constant
    flat = states.reshape(-1, 20)
    w = torch.abs(m.head_weights(flat)) if weighted else torch.ones(10, 4)
    expected = (w * (lam * qs.reshape(-1, 1, 3)).sum(-1)).sum(-1, keepdim=True) + m.constant(flat)
    assert torch.allclose(q_tot.reshape(-1, 1), expected, atol=1e-6)


def test_the_keys_come_from_each_agents_own_block_of_the_state():
    m = mixer()
    states = torch.randn(1, 20)
    changed = states.clone()
    changed[0, 12:] += 5.0  # beyond the 3 agents' 4-feature blocks: queries change, keys do not
    k1 = m.key(states[:, :12].reshape(3, 4))
    k2 = m.key(changed[:, :12].reshape(3, 4))
    assert torch.equal(k1, k2)
    changed[0, 0] += 5.0  # agent 0's block
    assert not torch.allclose(m.attention(states), m.attention(changed))


def test_qatten_is_refused_where_the_state_has_no_agent_blocks():
    args = SimpleNamespace(n_agents=3, state_shape=54, state_agent_features=None, env="mpe")
    with pytest.raises(ConfigError, match="mixer=qatten reads each agent's own block of the state"):
        QattenMixer(args)
