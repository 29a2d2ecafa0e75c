"""Kaleidoscope (modules/agents/kalei_agent.py, learners/kalei.py): the masked layer, its
straight-through gradient, the diversity loss, the adaptive coefficient, the resets, and the
masks' ids per agent or unit type."""

from types import SimpleNamespace

import pytest
import torch

from learners.kalei import Kaleidoscope
from modules.agents.kalei_agent import KaleiRNNAgent, MaskedLinear
from utils.errors import ConfigError


def layer(n_masks=3, i=6, o=4, seed=0):
    torch.manual_seed(seed)
    return MaskedLinear(i, o, n_masks)


def test_a_threshold_above_every_weight_zeroes_the_layer():
    lin = layer()
    with torch.no_grad():
        lin.weight.uniform_(-0.5, 0.5)
        lin.thresholds.fill_(10.0)  # sigmoid ~ 1 > every |w|
    x = torch.randn(2, 5, 6)
    ids = torch.randint(0, 3, (2, 5))
    assert torch.allclose(lin(x, ids), lin.bias.expand(2, 5, 4))
    with torch.no_grad():
        lin.thresholds.fill_(-10.0)  # sigmoid ~ 0: nothing pruned, the plain layer up to 5e-5
    assert torch.allclose(lin(x, ids), torch.nn.functional.linear(x, lin.weight, lin.bias), atol=1e-3)


def test_each_row_step_uses_its_own_mask():
    lin = layer()
    with torch.no_grad():
        lin.thresholds[1].fill_(10.0)  # mask 1 prunes everything
    x = torch.randn(1, 3, 6)
    out = lin(x, torch.tensor([[0, 1, 2]]))
    assert torch.allclose(out[0, 1], lin.bias) and not torch.allclose(out[0, 0], lin.bias)
    w = lin.masked_weights()
    assert torch.allclose(out[0, 2], x[0, 2] @ w[2].T + lin.bias, atol=1e-6)


def test_grouped_rows_equal_every_mask_applied_to_every_row():
    """The layer groups row-steps by mask; the same outputs and gradients as computing every mask's
    output for every row and picking each row's own, with a mask that no row uses."""
    lin = layer(n_masks=4, i=7, o=5)
    with torch.no_grad():
        lin.thresholds.normal_(-1.0, 1.0)
    x = torch.randn(6, 9, 7, requires_grad=True)
    ids = torch.randint(0, 3, (6, 9))  # mask 3 unused
    out = lin(x, ids)
    w = lin.masked_weights()
    ref = torch.einsum("ntd,ntod->nto", x, w[ids]) + lin.bias
    assert torch.allclose(out, ref, atol=1e-6)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (x, lin.weight, lin.thresholds), g)
    want = torch.autograd.grad(ref, (x, lin.weight, lin.thresholds), g)
    for a, b in zip(got, want, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert got[2][3].abs().sum() == 0 and got[2][:3].abs().sum() > 0


def agent(n_agents=3, n_types=0, obs=6, seed=0):
    torch.manual_seed(seed)
    args = SimpleNamespace(
        hidden_dim=8, n_agents=n_agents, n_actions=5, obs_shape=obs, kalei_n_unit_types=n_types,
        kalei_threshold_init_scale=5.0, kalei_threshold_init_bias=5.0,
    )  # fmt: skip
    return KaleiRNNAgent(obs + 2, args)


def test_the_straight_through_gradient_reaches_the_thresholds():
    a = agent()
    with torch.no_grad():  # thresholds near the weights, so masks differ
        for lyr in a.mask_layers:
            lyr.thresholds.normal_(-1.0, 1.0)
    a.diversity_loss([1.0, 2.0, 4.0, 8.0]).backward()
    for lyr in a.mask_layers:
        assert lyr.thresholds.grad is not None and lyr.thresholds.grad.abs().sum() > 0
        assert lyr.weight.grad is None  # the loss reads |w| detached


def test_the_diversity_loss_is_zero_for_equal_masks_and_falls_when_one_flips():
    a = agent()
    weights = [1.0, 2.0, 4.0, 8.0]
    with torch.no_grad():
        for lyr in a.mask_layers:
            lyr.thresholds.copy_(lyr.thresholds[0:1].expand_as(lyr.thresholds))  # all masks equal
    assert a.diversity_loss(weights).item() == 0.0
    with torch.no_grad():  # mask 1 now prunes one weight of fc4 the others keep
        a.fc4.thresholds[1, 0, 0] = 10.0
    flipped = a.diversity_loss(weights).item()
    w = a.fc4.weight[0, 0].abs().item()
    count = sum(lyr.weight.numel() for lyr in a.mask_layers)
    # pairs (0,1), (1,0), (1,2), (2,1) each differ by |w| at that weight, weighed 8, over 3 * 2 * count
    assert flipped == pytest.approx(-8.0 * 4 * w / 6 / count, rel=1e-5)


def test_the_adaptive_coefficient_equals_its_formula():
    args = SimpleNamespace(kalei_deque_len=3, kalei_div_coef=5.0)
    k = Kaleidoscope(args, agent=None)
    td, div = [1.0, 2.0, 3.0, 4.0], [-0.5, -1.0, -2.0, -4.0]
    for i, (t, d) in enumerate(zip(td, div, strict=True)):
        coef = k.coefficient(t, d)
        last_t, last_d = td[max(0, i - 2) : i + 1], div[max(0, i - 2) : i + 1]
        assert coef == pytest.approx(abs(5.0 * (sum(last_t) / len(last_t)) / (sum(last_d) / len(last_d))))
    fresh = Kaleidoscope(args, agent=None)
    assert fresh.coefficient(1.0, 0.0) == 5.0  # no diversity yet: div_coef itself


def test_a_reset_touches_only_what_every_mask_prunes_in_the_expected_share():
    lin = layer(n_masks=3, i=64, o=64, seed=1)
    with torch.no_grad():
        lin.weight.uniform_(-0.5, 0.5)
        lin.thresholds.fill_(-10.0)  # nothing pruned
        pruned = torch.zeros(64, 64, dtype=torch.bool)
        pruned[:, :32] = True  # the left half pruned by every mask
        lin.thresholds[:, pruned] = 10.0
        lin.thresholds[0, 5:10, 40:50] = 10.0  # pruned by one mask only: never reset
    before_w, before_t = lin.weight.clone(), lin.thresholds.clone()
    torch.manual_seed(3)
    n = lin.reset_pruned(0.5, 5.0, 5.0)
    changed = lin.weight != before_w
    assert not changed[~pruned].any()  # nothing outside what all prune
    assert torch.equal((lin.thresholds != before_t).any(0), changed)  # thresholds redrawn there
    assert n == int(changed.sum()) and abs(n / pruned.sum().item() - 0.5) < 0.05
    assert (torch.sigmoid(lin.thresholds[:, changed]) < 0.01).all()  # fresh ones prune little


def test_resets_come_every_interval_and_not_near_the_end():
    a = agent()
    args = SimpleNamespace(
        kalei_deque_len=3, kalei_div_coef=5.0, kalei_reset_interval=100, t_max=1000, kalei_reset_ratio=0.2,
        kalei_threshold_reset_scale=5.0, kalei_threshold_reset_bias=5.0, kalei_n_unit_types=0, n_agents=3,
    )  # fmt: skip
    k = Kaleidoscope(args, a)
    assert k.maybe_reset(100) is None and k.maybe_reset(101) is not None and k.last_reset_t == 101
    assert k.maybe_reset(150) is None and k.maybe_reset(202) is not None
    k.last_reset_t = 850
    assert k.maybe_reset(951) is None  # within one interval of t_max


def test_mask_ids_per_agent_and_per_unit_type():
    a = agent(n_agents=2)
    x = torch.zeros(4, 3, 8)
    assert a.mask_ids(x)[:, 0].tolist() == [0, 1, 0, 1]
    typed = agent(n_agents=2, n_types=3)
    x = torch.randn(2, 2, 8)
    x[..., 3:6] = torch.tensor([0.0, 0.0, 1.0])  # obs features 3..5: the type one-hot
    x[1, :, 3:6] = torch.tensor([0.0, 1.0, 0.0])
    assert typed.mask_ids(x).tolist() == [[2, 2], [1, 1]]
    x[1, 1, :6] = 0.0  # dead: zeros, read as type 0
    assert typed.mask_ids(x)[1, 1] == 0
    x[0, 0, 3:6] = torch.tensor([0.5, 0.0, 0.0])
    with pytest.raises(ConfigError, match="kalei_n_unit_types=3 reads each agent's unit type"):
        typed.mask_ids(x)


def test_the_agent_applies_each_row_steps_own_mask_in_every_layer():
    """The agent groups row-steps once for all four layers; the same Q-values as each layer with
    each row-step's own masked weight, the GRU between them in time order."""
    a = agent(n_agents=3)
    with torch.no_grad():
        for lyr in a.mask_layers:
            lyr.thresholds.normal_(-1.0, 1.0)
    x = torch.randn(6, 4, 8)
    q, h = a(x, a.init_hidden(6))
    ids = a.mask_ids(x)

    def own(lyr, v):
        return torch.einsum("ntd,ntod->nto", v, lyr.masked_weights()[ids]) + lyr.bias

    h_seq, h_ref = a.rnn(torch.relu(own(a.fc1, x)), a.init_hidden(6).unsqueeze(0))
    ref = own(a.fc4, torch.relu(own(a.fc3, torch.relu(own(a.fc2, h_seq)))))
    assert torch.allclose(q, ref, atol=1e-6) and torch.allclose(h, h_ref[0], atol=1e-6)
