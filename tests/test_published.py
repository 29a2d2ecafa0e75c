"""The researcher's published INSPIRE and SUPER (learners/sharing_rows.py) on hand-made tensors:
each step, each quirk option (each must change what it names), the detached rows' gradient, and
the published configs."""

import math
from types import SimpleNamespace

import pytest
import torch

from learners.sharing_rows import (
    decode_ally_bitmask,
    draws_per_episode,
    encode_ally_bitmask,
    episode_moments,
    manhattan_sight,
    owner_scores,
    receive_plan,
    unflatten,
)


def args(**kw):
    base = dict(
        share_moments="valid", share_variance_squared=False, share_temperature=1.0, share_min_eps=1e-6,
        share_index_map="exact", share_ratio_start=0.0, share_ratio_end=0.0, share_warm_up_ratio=0.6,
        t_max=1000, schedule_horizon=0,
    )  # fmt: skip
    return SimpleNamespace(**{**base, **kw})


def normal(x, mean, var):
    return math.exp(-((x - mean) ** 2) / (2 * var)) / math.sqrt(2 * math.pi * var)


X = torch.tensor([[[1.0, -2.0, 0.5], [3.0, 0.0, -1.0], [0.0, 0.0, 0.0]]])  # [1, T=3, N=3]
MASK = torch.tensor([[[1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]])  # step 2 padded, agent 1 dead


def test_owner_scores_by_hand():
    # everyone sees everyone else: agent j's score at t sums the owners k != j
    sight = (1 - torch.eye(3)).expand(1, 3, 3, 3)
    a = args()
    scores = owner_scores(X * MASK, MASK, sight, a)
    mean, var = episode_moments(X * MASK, MASK, False, 1e-6)
    assert torch.allclose(mean[0], torch.tensor([2.0, -2.0, -0.25]))
    assert torch.allclose(var[0], torch.tensor([1.0, 1e-6, 0.5625]))
    # raw flipped densities per owner, shifted by each owner's minimum over the episode's valid entries
    valid = [(t, j) for t in range(3) for j in range(3) if MASK[0, t, j] > 0]
    raw = torch.zeros(3, 3, 3)  # owner, t, j
    for k in range(3):
        dens = {(t, j): -normal(X[0, t, j].item(), mean[0, k].item(), var[0, k].item()) for t, j in valid}
        low = min(dens.values())
        for (t, j), v in dens.items():
            raw[k, t, j] = v - low
    summed = torch.zeros(3, 3)
    for t in range(3):
        for j in range(3):
            summed[t, j] = sum(raw[k, t, j] for k in range(3) if k != j)
    expected = summed / (summed.sum(0, keepdim=True) + 1e-6)
    assert torch.allclose(scores[0], expected, atol=1e-6)
    assert (scores[0][MASK[0] == 0] == 0).all()  # invalid entries are never drawn


def test_an_owner_scores_only_the_agents_it_sees():
    sight = torch.zeros(1, 3, 3, 3)
    sight[0, :, 0, 2] = 1.0  # only agent 0 sees agent 2, at every step
    scores = owner_scores(X * MASK, MASK, sight, args())
    assert (scores[0, :, :2] == 0).all() and (scores[0, :2, 2] > 0).all()
    sight[0, :, 1, 2] = 1.0  # agent 1 sees agent 2 too: its density adds
    both = owner_scores(X * MASK, MASK, sight, args())
    assert not torch.allclose(both, scores) and (both[0, :, :2] == 0).all()


def test_padded_moments_include_the_padding_zeros():
    mean, var = episode_moments(X * MASK, MASK, True, 1e-6)
    assert torch.allclose(mean[0], (X * MASK)[0].mean(0))
    assert torch.allclose(var[0], (X * MASK)[0].var(0).clamp(min=1e-6))  # unbiased, over all 3 steps
    sight = (1 - torch.eye(3)).expand(1, 3, 3, 3)
    padded = owner_scores(X * MASK, MASK, sight, args(share_moments="padded"))
    assert not torch.allclose(padded, owner_scores(X * MASK, MASK, sight, args()))
    assert (padded[0, 2] > 0).any()  # the published form scores the padded step too


def test_the_squared_variance_option_changes_the_scores():
    sight = (1 - torch.eye(3)).expand(1, 3, 3, 3)
    plain = owner_scores(X * MASK, MASK, sight, args())
    squared = owner_scores(X * MASK, MASK, sight, args(share_variance_squared=True))
    assert not torch.allclose(plain, squared)
    # with every variance 1 the two are the same normal
    ones = torch.tensor([[[1.0, -1.0], [-1.0, 1.0]]])  # each agent's mean 0, variance 1 (population)
    m = torch.ones_like(ones)
    s2 = (1 - torch.eye(2)).expand(1, 2, 2, 2)
    a, b = (owner_scores(ones, m, s2, args(share_variance_squared=v)) for v in (False, True))
    assert torch.allclose(a, b)


@pytest.mark.parametrize(
    "t,n,ratio,expected", [(50, 5, 0.0, 1), (50, 5, 0.3, int(49 * 4 * 0.3)), (2, 2, 0.0, 1)]
)
def test_draw_count(t, n, ratio, expected):
    assert draws_per_episode(t, n, ratio) == expected


def test_the_draws_per_episode_through_the_rule():
    from learners.sharing import SHARE_RULES

    b, t, n = 4, 30, 5
    x = torch.randn(b, t, n, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(b, t, n)
    sight = (1 - torch.eye(n)).expand(b, t, n, n)
    for ratio, k in ((0.0, 1), (0.3, int(29 * 4 * 0.3))):
        ctx = SimpleNamespace(x=x, mask=mask, sight=sight, ratio=ratio, args=args(),
                              generator=torch.Generator().manual_seed(1))  # fmt: skip
        senders = SHARE_RULES["owner_density"](ctx)
        assert senders.sum((1, 2)).tolist() == [k] * b  # without replacement: k distinct entries


def test_the_published_index_map_is_not_the_inverse():
    t, n = 10, 4
    f = torch.arange(t * n)
    step, agent = unflatten(f, t, n, published=False)
    assert torch.equal(step * n + agent, f)
    pstep, pagent = unflatten(f, t, n, published=True)
    assert torch.equal(pstep, f % (t - 1)) and torch.equal(pagent, (f // (t - 1)) % (n - 1))
    assert pagent.max() == n - 2 and pstep.max() == t - 2  # the last agent and step never share
    assert (pstep != step).float().mean() > 0.5


def test_the_index_map_option_changes_who_shares():
    from learners.sharing import SHARE_RULES

    x = torch.randn(8, 20, 4, generator=torch.Generator().manual_seed(3))
    mask, sight = torch.ones_like(x), (1 - torch.eye(4)).expand(8, 20, 4, 4)
    out = {}
    for how in ("exact", "published"):
        ctx = SimpleNamespace(x=x, mask=mask, sight=sight, ratio=0.1, args=args(share_index_map=how),
                              generator=torch.Generator().manual_seed(1))  # fmt: skip
        out[how] = SHARE_RULES["owner_density"](ctx)
    assert not torch.equal(out["exact"], out["published"])
    assert out["published"][:, :, 3].sum() == 0 and out["published"][:, 19].sum() == 0


def test_the_ratio_clock_option():
    from learners.sharing import share_ratio

    a = args(share_ratio_start=0.3, share_ratio_end=0.0, share_warm_up_ratio=0.6)
    assert share_ratio(a, 1000) == 0.0  # t_env past the warm-up: the end value
    assert share_ratio(a, 59) == pytest.approx(0.3 * (1 - 59 / 600))  # the forward loop's index


def test_receive_max_magnitude_own_and_own_if_in_sight():
    x = torch.tensor([[[0.5, -3.0, 2.0, 1.0]]])  # [1, 1, 4]
    senders = torch.tensor([[[1.0, 1.0, 1.0, 0.0]]])
    sight = torch.zeros(1, 1, 4, 4)
    sight[0, 0, 0, [1, 2]] = 1.0  # agent 0 sees 1 and 2
    sight[0, 0, 3, 0] = 1.0  # agent 3 sees 0
    sight[0, 0, 2, 2] = 1.0  # oneself never counts
    source, has = receive_plan(x, senders, sight, "max_in_sight")
    assert source[0, 0, 0] == 1 and has[0, 0, 0]  # |-3| > |2|
    assert source[0, 0, 3] == 0 and has[0, 0, 3]
    assert not has[0, 0, 1] and not has[0, 0, 2]  # they see nobody who shared
    source, has = receive_plan(x, senders, sight, "own_if_in_sight")
    assert source[0, 0].tolist() == [0, 1, 2, 3] and has[0, 0].tolist() == [True, False, False, False]
    source, has = receive_plan(x, senders, sight, "own")
    assert has[0, 0].tolist() == [True, True, True, False]


def test_the_bitmask_encoding_round_trips():
    g = torch.Generator().manual_seed(0)
    not_in_sight = torch.rand(50, 5, 5, generator=g) > 0.5
    not_in_sight |= torch.eye(5, dtype=torch.bool)
    codes = encode_ally_bitmask(not_in_sight)
    assert codes[0].max() < 2**5
    assert torch.equal(decode_ally_bitmask(codes, 5), (~not_in_sight).float())
    # the first agent in the highest bit: agent 0 not seeing only agent 4 (and itself) -> 0b10001
    row = torch.tensor([[True, False, False, False, True]])
    assert encode_ally_bitmask(row).item() == 0b10001
    # a padded step stores 0: decoded, everyone sees everyone, oneself included
    assert decode_ally_bitmask(torch.zeros(3, dtype=torch.long), 3).sum() == 9


def test_manhattan_sight():
    pos = torch.tensor([[[[0.0, 0.0], [5.0, 4.0], [5.0, 4.5]]]])  # [1, 1, 3, 2]
    sight = manhattan_sight(pos, torch.ones(1, 1), 9.0)
    assert sight[0, 0].tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]  # 9 is in sight, 9.5 is not
    assert manhattan_sight(pos, torch.zeros(1, 1), 9.0).sum() == 9  # a padded step: all ones


def test_detached_rows_give_differs_gradient_with_the_enlarged_count_and_changed_weights():
    # delta_i from one parameter tensor; the received rows hold a copy of chosen entries. The
    # gradient of the published loss equals the gradient of DIFFER's loss over the real rows alone
    # with the pool's weights and the pool's count, and the rows add no gradient of their own.
    from learners.q_divide_learner import QDivideLearner
    from learners.selection import selection_weights

    torch.manual_seed(0)
    param = torch.randn(2, 6, 3, requires_grad=True)
    mask = torch.ones(2, 6, 3)
    mask[1, 4:] = 0.0
    delta = param * 1.5 * mask
    indi = SimpleNamespace(delta_i=delta, mask=mask)
    source = torch.arange(3).expand(2, 6, 3).clone()
    has = torch.zeros(2, 6, 3, dtype=torch.bool)
    has[0, 2, 1] = has[1, 0, 2] = True
    shared = SimpleNamespace(source=source, has=has)
    a = SimpleNamespace(share_target="detached_rows", selected="PER_weight", selected_alpha=0.8,
                        selected_epsilon=0.01, selected_beta_start=0.6, selected_beta_end=1.0, t_max=1000,
                        schedule_horizon=0)  # fmt: skip
    learner = SimpleNamespace(args=a, weigh_episodes=lambda x, batch, copies=1: x)  # no PER
    torch.manual_seed(5)
    weights, q_loss, rows = QDivideLearner.row_loss(learner, None, indi, shared, 0.8, 100)
    (grad,) = torch.autograd.grad(q_loss, param, retain_graph=True)
    assert not rows.received.requires_grad
    # by hand: the same PER draw over the pool (same seed), real rows only, pool count
    received = (delta.detach() * has).detach()
    pool_mask = torch.cat([mask, (received != 0).float()])
    pool_e = torch.cat([delta.detach().abs(), received.abs()]) * pool_mask
    torch.manual_seed(5)
    w = selection_weights(pool_e, pool_mask, "PER_weight", 0.8, 0.8, 0.01, 0.6 + 0.4 * 100 / 1000)
    assert torch.allclose(weights, w[:2])
    assert pool_mask.sum() == mask.sum() + 2  # the count grows by the received rows
    (expected,) = torch.autograd.grad((delta**2 * w[:2]).sum() / pool_mask.sum(), param)
    assert torch.allclose(grad, expected, atol=1e-6)
    # and the weights differ from those without the rows (the pool changes the normalisation)
    torch.manual_seed(5)
    alone = selection_weights(delta.detach().abs() * mask, mask, "PER_weight", 0.8, 0.8, 0.01, 0.64)
    assert not torch.allclose(alone, weights)
    # with gradient (the published SUPER's rows): each received entry's term adds its gradient
    a.selected = "all"
    grads = {}
    for target in ("detached_rows", "rows"):
        a.share_target = target
        indi.delta_i = param * 1.5 * mask
        _, loss, rows = QDivideLearner.row_loss(learner, None, indi, shared, 0.8, 100)
        assert rows.received.requires_grad == (target == "rows")
        (grads[target],) = torch.autograd.grad(loss, param)
    twice = param * 1.5 * mask
    n = mask.sum() + 2
    (extra,) = torch.autograd.grad((twice**2 * has).sum() / n, param)
    assert extra.abs().sum() > 0
    assert torch.allclose(grads["rows"], grads["detached_rows"] + extra, atol=1e-6)


def test_per_published_equals_differ_qmix():
    from config import load_config

    def settings(name):
        c = load_config([f"--config={name}", "--env-config=skirmish"])
        return {k: v for k, v in c.items() if k not in ("name", "alg_config")}

    assert settings("per_published") == settings("differ_qmix")


def test_the_published_configs_say_what_they_set():
    from config import load_config

    inspire = load_config(["--config=inspire_published", "--env-config=skirmish"])
    assert (inspire["share_rule"], inspire["share_target"], inspire["share_receive"]) == (
        "owner_density", "detached_rows", "own_if_in_sight",
    )  # fmt: skip
    assert inspire["share_ratio_start"] == inspire["share_ratio_end"] == 0
    assert inspire["share_min_eps"] == 1e-6 and inspire["learner"] == "q_divide_learner"
    superp = load_config(["--config=super_published", "--env-config=skirmish"])
    assert (superp["share_rule"], superp["share_target"], superp["share_receive"]) == (
        "mean_std_gate",
        "rows",
        "own",
    )


def _their_visibility_codes(env):
    """The published env's rule, written here from its description: per agent, a bit per ally
    (the first in the highest bit), 1 where the Manhattan distance exceeds the sight range and for
    the agent itself; no check of who is alive."""
    n = env.n_agents
    units = [env.get_unit_by_id(i) for i in range(n)]
    codes = []
    for i in range(n):
        bits = ""
        for j in range(n):
            far = abs(units[i].pos.x - units[j].pos.x) + abs(units[i].pos.y - units[j].pos.y) > 9
            bits += "1" if i == j or far else "0"
        codes.append(int(bits, 2))
    return codes


def test_their_bitmask_and_our_sight_give_the_same_receivers_on_skirmish():
    import numpy as np

    from envs import REGISTRY as env_REGISTRY

    env = env_REGISTRY["skirmish"](map_name="2s3z", seed=4)
    rng = np.random.default_rng(0)
    g = torch.Generator().manual_seed(0)
    env.reset()
    steps = differs_from_visible = 0
    while steps < 200:
        fields = env.get_step_fields(["pos", "visible"])
        pos = torch.tensor(fields["pos"]).view(1, 1, env.n_agents, 2)
        ours = manhattan_sight(pos, torch.ones(1, 1), 9.0)
        codes = torch.tensor(_their_visibility_codes(env)).view(1, 1, -1)
        theirs = decode_ally_bitmask(codes, env.n_agents)
        x = torch.randn(1, 1, env.n_agents, generator=g)
        senders = (torch.rand(1, 1, env.n_agents, generator=g) < 0.5).float()
        for how in ("own_if_in_sight", "max_in_sight"):
            a, b = receive_plan(x, senders, ours, how), receive_plan(x, senders, theirs, how)
            assert torch.equal(a[1], b[1]) and torch.equal(a[0][a[1]], b[0][b[1]]), steps
        visible = torch.tensor(fields["visible"], dtype=torch.float32)
        differs_from_visible += int(not torch.equal(visible, ours[0, 0]))
        avail = np.array(env.get_avail_actions())
        actions = [rng.choice(np.flatnonzero(row)) for row in avail]
        _, done, _ = env.step(actions)
        steps += 1
        if done:
            env.reset()
    env.close()
    assert differs_from_visible > 0  # SMAC's own sight (Euclidean, living units) is another rule
