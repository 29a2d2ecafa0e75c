import numpy as np
import pytest
import torch

from components.action_selectors import REGISTRY as sel_REGISTRY
from components.schedules import LinearSchedule, linear
from helpers import make_args


def test_linear_schedule():
    s = LinearSchedule(1.0, 0.05, 1000)
    assert s.eval(0) == 1.0
    assert s.eval(500) == pytest.approx(0.525)
    assert s.eval(1000) == pytest.approx(0.05)
    assert s.eval(2000) == pytest.approx(0.05)


def test_linear_is_every_schedule_shape():
    assert linear(0.8, 1.0, 0.3, 0.6) == pytest.approx(0.9)  # a share of the horizon
    assert linear(0.8, 1.0, 0.7, 0.6) == 1.0 and linear(0.8, 1.0, 0.0, 0.0) == 1.0  # past it, or none
    assert linear(0.5, 0.0, 250, 1000) == pytest.approx(0.375)  # decreasing
    assert linear(0.5, 0.0, -10, 1000) == 0.5  # clamped to [end, start]
    assert LinearSchedule(1.0, 0.05, 0).eval(0) == 1.0  # no anneal time: start at t = 0, then finish
    assert LinearSchedule(1.0, 0.05, 0).eval(2) == 0.05


def selector(**kw):
    return sel_REGISTRY["epsilon_greedy"](make_args(**kw))


def test_test_mode_is_greedy_over_available():
    sel = selector()
    q = torch.tensor([[[1.0, 9.0, 3.0], [5.0, 2.0, 1.0]]])
    avail = torch.tensor([[[1, 0, 1], [1, 1, 1]]], dtype=torch.uint8)
    for _ in range(50):
        assert sel.select_action(q, avail, t_env=0, test_mode=True).tolist() == [[2, 0]]
    assert sel.epsilon == 0.0


def test_random_actions_only_available_and_uniform():
    sel = selector(epsilon_start=1.0, epsilon_finish=1.0)
    q = torch.zeros(200, 2, 5)
    avail = torch.zeros(200, 2, 5, dtype=torch.uint8)
    avail[:, 0, [1, 3]] = 1
    avail[:, 1, 4] = 1
    counts = np.zeros(5)
    for _ in range(20):
        a = sel.select_action(q, avail, t_env=0).numpy()
        assert set(a[:, 0]) <= {1, 3} and set(a[:, 1]) == {4}
        np.add.at(counts, a[:, 0], 1)
    assert abs(counts[1] / counts.sum() - 0.5) < 0.05


def test_epsilon_follows_schedule():
    sel = selector(epsilon_start=1.0, epsilon_finish=0.05, epsilon_anneal_time=100)
    q = torch.zeros(1, 1, 2)
    avail = torch.ones(1, 1, 2, dtype=torch.uint8)
    sel.select_action(q, avail, t_env=50)
    assert sel.epsilon == pytest.approx(0.525)
    sel.select_action(q, avail, t_env=500)
    assert sel.epsilon == pytest.approx(0.05)
    # With eps 0.05 nearly every action is the greedy one.
    q = torch.tensor([[[0.0, 1.0]]]).expand(2000, 1, 2)
    a = sel.select_action(q, torch.ones(2000, 1, 2, dtype=torch.uint8), t_env=500)
    assert 0.95 < a.float().mean().item() < 0.995


CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_selection_on_the_device_follows_the_same_rule(device):
    """Q-values on a GPU are selected there (_select_on_device, also callable on the CPU): greedy
    over the available actions, random ones only among them and uniform, in a fraction epsilon."""
    sel = selector(epsilon_start=1.0, epsilon_finish=0.0, epsilon_anneal_time=100)
    q = torch.tensor([[[1.0, 9.0, 3.0], [5.0, 2.0, 1.0]]], device=device)
    avail = torch.tensor([[[1, 0, 1], [1, 1, 1]]], dtype=torch.uint8, device=device)
    sel.epsilon = 0.0
    assert sel._select_on_device(q, avail).tolist() == [[2, 0]]
    sel.epsilon = 1.0
    avail = torch.zeros(4000, 2, 5, dtype=torch.uint8, device=device)
    avail[:, 0, [1, 3]] = 1
    avail[:, 1, 4] = 1
    a = sel._select_on_device(torch.zeros(4000, 2, 5, device=device), avail)
    assert a.device.type == device and set(a[:, 0].tolist()) == {1, 3} and set(a[:, 1].tolist()) == {4}
    assert abs((a[:, 0] == 1).float().mean().item() - 0.5) < 0.05
    sel.epsilon = 0.1
    q = torch.tensor([[[0.0, 1.0]]], device=device).expand(4000, 1, 2)
    a = sel._select_on_device(q, torch.ones(4000, 1, 2, dtype=torch.uint8, device=device))
    assert 0.93 < a.float().mean().item() < 0.97  # greedy 1, or a coin's 0.1 times half of them
