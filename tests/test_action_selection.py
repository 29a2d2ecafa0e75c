import numpy as np
import pytest
import torch

from components.action_selectors import REGISTRY as sel_REGISTRY
from components.schedules import LinearSchedule
from helpers import make_args


def test_linear_schedule():
    s = LinearSchedule(1.0, 0.05, 1000)
    assert s.eval(0) == 1.0
    assert s.eval(500) == pytest.approx(0.525)
    assert s.eval(1000) == pytest.approx(0.05)
    assert s.eval(2000) == pytest.approx(0.05)


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
