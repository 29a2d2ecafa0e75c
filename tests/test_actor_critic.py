"""The policy-gradient family (IA2C, IPPO, MAA2C, MAPPO, COMA): targets against hand
computations, losses and their gradients, masks, policies, critics, normalisers, the on-policy
loop, validation, checkpoints, and short runs of every config."""

import copy
import math

import pytest
import torch

import main
from components.episode_buffer import EpisodeBatch
from components.policies import CategoricalPolicy, GaussianPolicy
from controllers.ac_controller import ACMAC
from helpers import OBS, A, L, N, S, learner_args, make_batch, read, run_main, sacred_runs
from learners import REGISTRY as le_REGISTRY
from modules.critics import REGISTRY as critic_REGISTRY
from utils.logger import Logger, get_console_logger
from utils.rl_utils import RunningMeanStd, ValueNorm, gae, huber, nstep_returns, ppo_clip_objective

GAMMA = 0.9

# --- returns and advantages ---------------------------------------------------------------


def episode_layout():
    """Two episodes in a padded batch of T = 6 transitions: episode 0 terminates after 3,
    episode 1 is cut by the time limit after 6 (bootstrapped). 2 value columns."""
    g = torch.Generator().manual_seed(1)
    T = 6
    rewards = torch.randn(2, T, 2, generator=g)
    values = torch.randn(2, T + 1, 2, generator=g)
    mask = torch.zeros(2, T, 1)
    mask[0, :3] = 1
    mask[1, :] = 1
    terminated = torch.zeros(2, T, 1)
    terminated[0, 2] = 1
    return rewards * mask, terminated, mask, values


def gae_by_hand(rewards, terminated, mask, values, next_values, gamma, lam):
    adv = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        length = int(mask[b].sum())
        running = torch.zeros(rewards.shape[2])
        for t in reversed(range(length)):
            d = terminated[b, t]
            delta = rewards[b, t] + gamma * (1 - d) * next_values[b, t + 1] - values[b, t]
            running = delta + gamma * lam * (1 - d) * running
            adv[b, t] = running
    return adv


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_gae_matches_the_backward_loop(lam):
    rewards, terminated, mask, values = episode_layout()
    adv, ret = gae(rewards, terminated, mask, values[:, :-1], values, GAMMA, lam)
    expected = gae_by_hand(rewards, terminated, mask, values[:, :-1], values, GAMMA, lam)
    assert torch.allclose(adv, expected, atol=1e-6)
    assert torch.allclose(ret, (expected + values[:, :-1]) * mask, atol=1e-6)
    assert (adv[0, 3:] == 0).all() and (ret[0, 3:] == 0).all()  # padding
    if lam == 0.0:
        delta = rewards + GAMMA * (1 - terminated) * values[:, 1:] - values[:, :-1]
        assert torch.allclose(adv, delta * mask, atol=1e-6)
    if lam == 1.0:  # the terminated episode: discounted return minus V
        discounted = [sum(GAMMA ** (k - t) * rewards[0, k] for k in range(t, 3)) for t in range(3)]
        assert torch.allclose(adv[0, :3], torch.stack(discounted) - values[0, :3], atol=1e-5)


def nstep_by_hand(rewards, terminated, mask, values, gamma, n):
    out = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        length = int(mask[b].sum())
        for t in range(length):
            e = min(t + n, length)
            g = sum(gamma ** (k - t) * rewards[b, k] for k in range(t, e))
            out[b, t] = g + gamma ** (e - t) * (1 - terminated[b, e - 1]) * values[b, e]
    return out


@pytest.mark.parametrize("n", [1, 3, 5, 10])
def test_nstep_returns_match_hand_computation(n):
    rewards, terminated, mask, values = episode_layout()
    got = nstep_returns(rewards, terminated, mask, values, GAMMA, n)
    assert torch.allclose(got, nstep_by_hand(rewards, terminated, mask, values, GAMMA, n), atol=1e-5)


def test_nstep_ignores_terminal_and_padded_values_but_bootstraps_a_cut():
    rewards, terminated, mask, values = episode_layout()
    base = nstep_returns(rewards, terminated, mask, values, GAMMA, 3)
    changed = values.clone()
    changed[0, 3:] += 100.0  # the terminal state of episode 0 and its padding
    assert torch.equal(nstep_returns(rewards, terminated, mask, changed, GAMMA, 3), base)
    changed = values.clone()
    changed[1, 6] += 100.0  # the final observation of the time-limit cut
    cut = nstep_returns(rewards, terminated, mask, changed, GAMMA, 3)
    assert not torch.allclose(cut[1, 3:], base[1, 3:]) and torch.equal(cut[0], base[0])
    no_bootstrap = terminated.clone()
    no_bootstrap[1, 5] = 1  # time_limit_bootstrap=False ends the return at the limit
    assert torch.equal(
        nstep_returns(rewards, no_bootstrap, mask, changed, GAMMA, 3),
        nstep_returns(rewards, no_bootstrap, mask, values, GAMMA, 3),
    )


# --- losses -------------------------------------------------------------------------------


def test_ppo_clip_gradient_is_zero_only_where_the_clip_binds():
    eps = 0.2
    logp_old = torch.zeros(6)
    log_ratio = torch.log(torch.tensor([1.5, 1.5, 0.5, 0.5, 1.1, 0.9]))
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 2.0, -3.0])
    logp = log_ratio.clone().requires_grad_(True)
    surrogate, ratio = ppo_clip_objective(logp, logp_old, adv, eps)
    expected = torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
    assert torch.allclose(surrogate, expected)
    (-surrogate.sum() / 6).backward()
    clipped = torch.tensor([True, False, False, True, False, False])  # A>0,rho>1+eps / A<0,rho<1-eps
    assert (logp.grad[clipped] == 0).all()
    assert torch.allclose(logp.grad[~clipped], (-ratio * adv / 6).detach()[~clipped])


def test_first_ppo_step_equals_the_a2c_step():
    out = torch.randn(4, 3, requires_grad=True)
    actions = torch.tensor([[0], [2], [1], [1]])
    avail = torch.ones(4, 3)
    adv = torch.randn(4)
    policy = CategoricalPolicy()
    logp = policy.log_prob(out, actions, avail)
    surrogate, _ = ppo_clip_objective(logp, logp.detach(), adv, 0.2)
    (g_ppo,) = torch.autograd.grad(-surrogate.mean(), out)
    (g_a2c,) = torch.autograd.grad(-(adv * policy.log_prob(out, actions, avail)).mean(), out)
    assert torch.allclose(g_ppo, g_a2c, atol=1e-7)


def test_huber_and_value_clip():
    e = torch.linspace(-30, 30, 61)
    assert torch.allclose(
        huber(e, 10.0), torch.nn.functional.huber_loss(e, torch.zeros_like(e), reduction="none", delta=10.0)
    )
    learner = make_learner("ppo_learner", "cv_critic", value_clip=0.2, value_loss="mse")
    v_old = torch.zeros(1, 1, 2)
    v = torch.tensor([[[0.5, 0.1]]], requires_grad=True)
    target = torch.tensor([[[1.0, 1.0]]])
    loss = learner.value_loss(v, target, torch.ones(1, 1, 2), v_old)
    # entry 0 moved past v_old + 0.2: its clipped loss (1 - 0.2)^2 = 0.64 > 0.25 takes over, no gradient
    assert math.isclose(loss.item(), (0.64 + 0.81) / 2, rel_tol=1e-6)
    loss.backward()
    assert v.grad[0, 0, 0] == 0 and v.grad[0, 0, 1] != 0


# --- normalisers --------------------------------------------------------------------------


def test_value_norm_ema_first_update_and_debiased_average():
    x = torch.tensor([[1.0], [2.0], [4.0]])
    norm = ValueNorm("ema", 1, beta=0.9)
    norm.update(x, torch.ones_like(x))
    mean, std = norm.stats()
    assert math.isclose(mean.item(), 7 / 3, rel_tol=1e-6)
    assert math.isclose(std.item() ** 2, x.var(unbiased=False).item(), rel_tol=1e-5)
    y = torch.randn(5, 3)
    assert torch.allclose(norm.denormalise(norm.normalise(y)), y, atol=1e-5)
    # alternating batches: debiased EMA by hand
    norm = ValueNorm("ema", 1, beta=0.9)
    batches = [torch.tensor([1.0, 3.0]), torch.tensor([10.0, 20.0]), torch.tensor([1.0, 3.0])]
    mu = nu = w = 0.0
    for b in batches:
        norm.update(b, torch.ones_like(b))
        mu, nu, w = 0.9 * mu + 0.1 * b.mean().item(), 0.9 * nu + 0.1 * (b**2).mean().item(), 0.9 * w + 0.1
    mean, std = norm.stats()
    assert math.isclose(mean.item(), mu / w, rel_tol=1e-6)
    assert math.isclose(std.item() ** 2, nu / w - (mu / w) ** 2, rel_tol=1e-5)
    const = ValueNorm("ema", 1, beta=0.9)
    const.update(torch.full((4,), 5.0), torch.ones(4))
    assert math.isclose(const.stats()[1].item() ** 2, 1e-2, rel_tol=1e-6)  # the variance floor


def test_running_value_norm_is_per_column_and_masked():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, 3, generator=g)
    mask = (torch.rand(4, 6, 3, generator=g) > 0.3).float()
    norm = ValueNorm("running", 3)
    norm.update(x, mask)
    garbage = x + (1 - mask) * 1000.0  # masked entries do not move it
    other = ValueNorm("running", 3)
    other.update(garbage, mask)
    (mean, std), (other_mean, other_std) = norm.stats(), other.stats()
    assert torch.allclose(mean, other_mean) and torch.allclose(std, other_std)
    for i in range(3):  # each column as a scalar RunningMeanStd of its own entries
        ref = RunningMeanStd(unbiased=True)  # EPyMARL's sample variances
        ref.update(x[..., i], mask[..., i])
        assert torch.allclose(mean[i], ref.mean) and torch.allclose(std[i] ** 2, ref.var)


def test_advantage_normalisation_uses_only_active_entries():
    learner = make_learner("ppo_learner", "cv_critic", advantage_norm="batch")
    g = torch.Generator().manual_seed(0)
    adv = torch.randn(2, 5, N, generator=g)
    p = (torch.rand(2, 5, N, generator=g) > 0.4).float()
    out = learner.normalise_advantages(adv, p)
    other = learner.normalise_advantages(adv + (1 - p) * 50.0, p)
    assert torch.allclose(out, other)
    active = out[p == 1]
    assert abs(active.mean().item()) < 1e-5 and abs(active.std(unbiased=False).item() - 1) < 1e-3


# --- policies -----------------------------------------------------------------------------


def test_masked_softmax_entropy_and_log_probs_stay_finite():
    policy = CategoricalPolicy()
    out = torch.zeros(3, 5, requires_grad=True)
    avail = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 0]])
    h = policy.entropy(out, avail)
    assert math.isclose(h[0].item(), math.log(3), rel_tol=1e-6)
    assert h[1].item() == 0.0
    logp = policy.log_prob(out, torch.tensor([[0], [2], [0]]), avail)
    assert logp[1].item() == 0.0
    assert torch.isfinite(h).all() and torch.isfinite(logp).all()
    (h.sum() + logp.sum()).backward()
    assert torch.isfinite(out.grad).all()


def test_sampling_respects_availability_and_softmax_frequencies():
    torch.manual_seed(0)
    policy = CategoricalPolicy()
    logits = torch.tensor([0.5, 2.0, -1.0, 1.0])
    avail = torch.tensor([1, 0, 1, 1])
    draws = policy.sample(logits.expand(20000, 4), avail.expand(20000, 4))
    counts = torch.bincount(draws, minlength=4).float()
    assert counts[1] == 0
    probs = torch.softmax(logits.masked_fill(avail == 0, -1e10), -1)
    expected = probs * 20000
    keep = avail == 1
    chi2 = (((counts - expected) ** 2)[keep] / expected[keep]).sum().item()
    assert chi2 < 13.8  # chi-square, 2 degrees of freedom, p = 0.001
    assert policy.mode(logits, avail).item() == 3


def gaussian(squash="clip"):
    return GaussianPolicy([0.0, -2.0, 0.0], [1.0, 2.0, 1.0], squash, -5.0, 2.0)


def test_gaussian_log_prob_entropy_and_inactive_dimensions():
    g = torch.Generator().manual_seed(0)
    mu, u = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    log_std = torch.tensor([0.3, -0.5, 0.1])
    avail = torch.tensor([1.0, 1.0, 0.0])
    policy = gaussian()
    ref = torch.distributions.Normal(mu, log_std.exp()).log_prob(u)[:, :2].sum(-1)
    assert torch.allclose(policy.log_prob(mu, u, avail, log_std), ref, atol=1e-5)
    mu2, u2 = mu.clone(), u.clone()
    mu2[:, 2] += 3.0
    u2[:, 2] -= 2.0
    assert torch.equal(policy.log_prob(mu2, u2, avail, log_std), policy.log_prob(mu, u, avail, log_std))
    h = policy.entropy(mu, avail, log_std)
    assert torch.allclose(
        h, torch.full((4,), sum(0.5 + 0.5 * math.log(2 * math.pi) + s for s in (0.3, -0.5)))
    )
    # clamped in use
    assert torch.allclose(
        policy.entropy(mu, avail, torch.tensor([9.0, 9.0, 9.0])),
        policy.entropy(mu, avail, torch.full((3,), 2.0)),
    )


def test_tanh_log_prob_is_the_change_of_variables():
    policy = GaussianPolicy([-1.0], [1.0], "tanh", -5.0, 2.0)
    mu, log_std = torch.tensor([[0.3]]), torch.tensor([-0.2])
    base = torch.distributions.Normal(0.3, math.exp(-0.2))
    for u in (-1.5, 0.0, 0.7):
        a, h = math.tanh(u), 1e-4
        # density of a = tanh(u): d/da P(tanh(U) <= a), by finite differences of the CDF
        cdf = lambda x: base.cdf(torch.tensor(math.atanh(x))).item()  # noqa: E731
        numeric = math.log((cdf(a + h) - cdf(a - h)) / (2 * h))
        got = policy.log_prob(mu, torch.tensor([[u]]), torch.ones(1, 1), log_std).item()
        assert math.isclose(got, numeric, rel_tol=1e-3)


@pytest.mark.parametrize("squash", ["clip", "tanh"])
def test_env_actions_lie_within_bounds(squash):
    policy = gaussian(squash)
    u = torch.tensor([[-1e3, -1.0, 0.0], [1.0, 1e3, 0.0], [0.0, 0.0, 5.0]])
    avail = torch.tensor([1.0, 1.0, 0.0])
    a = policy.env_actions(u, avail)
    assert (a[:, :2] >= torch.tensor([0.0, -2.0])).all() and (a[:, :2] <= torch.tensor([1.0, 2.0])).all()
    assert (a[:, 2] == 0).all()  # padded dimension
    assert torch.allclose(a[2, :2], torch.tensor([0.5, 0.0]))  # u = 0 -> the midpoint


# --- critics ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "critic,flags,size",
    [
        ("ac_critic", {}, OBS + N),
        ("ac_critic", {"agent_param_sharing": False}, OBS),
        ("cv_critic", {}, S + N),
        ("cv_critic", {"critic_individual_obs": True, "critic_joint_obs": True}, S + OBS + N * OBS + N),
        ("cv_critic", {"critic_last_action": True, "critic_agent_id": False}, S + N * A),
        ("coma_critic", {}, S + N * A + N),
        ("coma_critic", {"critic_individual_obs": True, "critic_last_action": True}, S + OBS + 2 * N * A + N),
    ],
)
def test_critic_input_sizes(critic, flags, size):
    args = learner_args(**flags)
    batch = make_batch()
    net = critic_REGISTRY[critic](batch.scheme, args)
    assert net.input_shape == size
    inputs = net.build_inputs(batch)
    assert inputs.shape == (3, L, N, size)
    if net.with_id:
        assert torch.equal(inputs[0, 0, :, -N:], torch.eye(N))


def test_death_mask_zeroes_a_dead_agents_features_but_its_id():
    args = learner_args(critic_death_mask=True)
    batch = make_batch()
    batch.data.transition_data["indi_terminated"][0, 2:, 1] = 1  # agent 1 dies at step 2
    net = critic_REGISTRY["cv_critic"](batch.scheme, args)
    x = net.build_inputs(batch)
    assert (x[0, 3:, 1, :-N] == 0).all() and torch.equal(x[0, 3:, 1, -N:], torch.eye(N)[1].expand(L - 3, N))
    assert (x[0, :3, 1, :-N] != 0).any() and (x[0, 3:, 0, :-N] != 0).any()


def test_coma_critic_excludes_the_agents_own_action():
    args = learner_args()
    batch = make_batch()
    net = critic_REGISTRY["coma_critic"](batch.scheme, args)
    q = net.values(batch)
    changed = make_batch()
    onehot = changed.data.transition_data["actions_onehot"]
    onehot[:, :, 0] = onehot[:, :, 0].roll(1, dims=-1)  # agent 0 takes other actions
    q2 = net.values(changed)
    assert torch.equal(q[:, :, 0], q2[:, :, 0])
    assert not torch.allclose(q[:, :, 1], q2[:, :, 1])


# --- learners -----------------------------------------------------------------------------


def make_learner(learner="actor_critic_learner", critic="cv_critic", individual=False, **kw):
    args = learner_args(learner=learner, critic=critic, mac="ac_mac", common_reward=not individual, **kw)
    scheme = make_batch().scheme
    mac = ACMAC(scheme, {"agents": N}, args)
    return le_REGISTRY[learner](mac, scheme, Logger(get_console_logger()), args)


def grads_after_train(learner, batch):
    """Parameters after one train call from a fixed start (actor and critic)."""
    learner.train(batch, 0, 0)
    return [p.detach().clone() for p in list(learner.mac.parameters()) + list(learner.critic.parameters())]


LEARNERS = [
    ("actor_critic_learner", "ac_critic", {}),
    ("actor_critic_learner", "cv_critic", {"return_estimator": "gae"}),
    ("ppo_learner", "cv_critic", {}),
    (
        "ppo_learner",
        "cv_critic",
        {
            "ppo_style": "mappo",
            "return_estimator": "gae",
            "value_norm": "ema",
            "advantage_norm": "batch",
            "value_clip": 0.2,
            "target_critic": False,
            "num_mini_batch": 1,
        },
    ),
    ("coma_learner", "coma_critic", {}),
]


@pytest.mark.parametrize("learner,critic,kw", LEARNERS)
def test_garbage_in_padding_and_after_death_changes_nothing(learner, critic, kw):
    """Padded slots, and a dead agent's inputs after the step it died, change no update."""
    batch = make_batch()
    batch.data.transition_data["indi_terminated"][1, 2:, 2] = 1  # agent 2 of episode 1 dies at step 2
    torch.manual_seed(0)
    a = make_learner(
        learner, critic, policy_active_mask=True, value_active_mask=True, critic_death_mask=True, **kw
    )
    state = copy.deepcopy(a.state_dict())
    ref = grads_after_train(a, batch)
    noisy = make_batch()
    noisy.data.transition_data["indi_terminated"][1, 2:, 2] = 1
    g = torch.Generator().manual_seed(5)
    td = noisy.data.transition_data
    for b, length in enumerate((5, 7, 3)):
        td["obs"][b, length + 1 :] = torch.randn_like(td["obs"][b, length + 1 :])
        td["state"][b, length + 1 :] = torch.randn(td["state"][b, length + 1 :].shape, generator=g)
        td["reward"][b, length:] = torch.randn(td["reward"][b, length:].shape, generator=g)
    td["obs"][1, 3:, 2] = torch.randn(td["obs"][1, 3:, 2].shape, generator=g)  # dead from step 3
    torch.manual_seed(0)
    b = make_learner(
        learner, critic, policy_active_mask=True, value_active_mask=True, critic_death_mask=True, **kw
    )
    b.load_state_dict(state)
    for x, y in zip(ref, grads_after_train(b, noisy), strict=True):
        assert torch.allclose(x, y, atol=1e-6)


def test_dead_agent_steps_enter_the_denominator_only_without_the_active_mask():
    batch = make_batch()
    batch.data.transition_data["indi_terminated"][1, 2:, 2] = 1
    on, off = (make_learner(policy_active_mask=flag) for flag in (True, False))
    _, _, m, p_on, _, alive = on.masks(batch)
    _, _, _, p_off, _, _ = off.masks(batch)
    assert p_on.sum() == alive.sum() < p_off.sum() == m.sum()
    assert p_on[1, 2, 2] == 1 and p_on[1, 3, 2] == 0  # the step of death is kept


def test_coma_baseline_is_the_policy_weighted_q():
    learner = make_learner("coma_learner", "coma_critic")
    batch = make_batch()
    q = learner.critic.values(batch)[:, :-1].detach()
    out = learner.mac.forward_seq(batch)[:, :-1].detach()
    pi = learner.mac.policy.log_probs(out, batch["avail_actions"][:, :-1]).exp()
    baseline = (pi * q).sum(-1)
    by_hand = torch.zeros_like(baseline)
    for a in range(A):
        by_hand += pi[..., a] * q[..., a]
    assert torch.allclose(baseline, by_hand, atol=1e-6)
    assert torch.allclose((pi * (q - baseline.unsqueeze(-1))).sum(-1), torch.zeros_like(baseline), atol=1e-5)


def test_coma_critic_loss_mean_or_summed_over_agents_by_hand():
    g = torch.Generator().manual_seed(4)
    err = torch.rand(2, 3, N, generator=g)
    m = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]).unsqueeze(-1).expand(2, 3, N)  # 5 valid steps
    q = m.clone()
    q[1, 2, 0] = 0  # agent 0 dead at the last step of episode 1
    by_step = sum(err[b, t, i] * q[b, t, i] for b in range(2) for t in range(3) for i in range(N))
    mean = make_learner("coma_learner", "coma_critic")
    summed = make_learner("coma_learner", "coma_critic", coma_critic_loss="agent_sum")
    assert math.isclose(mean.critic_loss(err, q, m).item(), by_step.item() / q.sum().item(), rel_tol=1e-6)
    assert math.isclose(summed.critic_loss(err, q, m).item(), by_step.item() / 5, rel_tol=1e-6)


def test_shipped_coma_follows_epymarl():
    from config import load_config

    cfg = load_config(["--config=coma", "--env-config=mpe"])
    assert cfg["coma_critic_loss"] == "agent_sum" and cfg["time_limit_bootstrap"] and cfg["q_nstep"] == 10


def test_coma_needs_a_team_reward():
    from config import ConfigError, load_config

    with pytest.raises(ConfigError, match="common_reward"):
        load_config(["--config=coma", "--env-config=mpe", "with", "common_reward=False"])


@pytest.mark.parametrize("learner,critic,kw", LEARNERS)
def test_actor_steps_touch_only_the_actor_and_critic_steps_only_the_critic(learner, critic, kw):
    lrn = make_learner(learner, critic, **kw)
    actor = [p.detach().clone() for p in lrn.mac.parameters()]
    crit = [p.detach().clone() for p in lrn.critic.parameters()]
    batch = make_batch()
    loss = -lrn.policy(batch)[1].mean()
    lrn.actor_step(loss)
    assert all(torch.equal(a, b) for a, b in zip(crit, lrn.critic.parameters(), strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(actor, lrn.mac.parameters(), strict=True))
    actor = [p.detach().clone() for p in lrn.mac.parameters()]
    values = lrn.critic.values(batch)
    lrn.critic_step(values.pow(2).mean())
    assert all(torch.equal(a, b) for a, b in zip(actor, lrn.mac.parameters(), strict=True))


def test_ppo_first_minibatch_ratio_is_one():
    lrn = make_learner("ppo_learner", "cv_critic", epochs=1)
    seen = {}
    lrn.flush_stats = lambda t: seen.update({k: torch.stack(v).mean().item() for k, v in lrn.stats.items()})
    lrn.train(make_batch(), 0, 0)
    assert abs(seen["ratio_mean"] - 1) < 1e-6 and abs(seen["approx_kl"]) < 1e-6 and seen["clip_fraction"] == 0


def test_mappo_style_keeps_targets_fixed_across_epochs():
    lrn = make_learner(
        "ppo_learner",
        "cv_critic",
        ppo_style="mappo",
        return_estimator="gae",
        epochs=3,
        target_critic=False,
        value_norm="ema",
    )
    seen = []
    original = lrn.policy_loss

    def spy(logp, logp_old, advantages, entropy, p):
        seen.append((logp_old.clone(), advantages.clone()))
        return original(logp, logp_old, advantages, entropy, p)

    lrn.policy_loss = spy
    lrn.train(make_batch(), 0, 0)
    assert len(seen) == 3
    assert all(torch.equal(seen[0][0], s[0]) and torch.equal(seen[0][1], s[1]) for s in seen)


def test_mappo_minibatches_are_disjoint_episode_groups():
    lrn = make_learner(
        "ppo_learner",
        "cv_critic",
        ppo_style="mappo",
        return_estimator="gae",
        epochs=2,
        num_mini_batch=2,
        target_critic=False,
    )
    batch = make_batch(lengths=(5, 7, 3, 6), terminated=(True, False, True, True))
    batch.data.transition_data["obs"][:, :, :, 0] = torch.arange(4.0).view(4, 1, 1)  # episode tags
    seen = []
    original = lrn.critic.values

    def spy(mb):  # the critic runs once on the whole batch (values at collection), then per minibatch
        seen.append(sorted({int(x) for x in mb["obs"][:, 0, 0, 0]}))
        return original(mb)

    lrn.critic.values = spy
    lrn.train(batch, 0, 0)
    assert seen[0] == [0, 1, 2, 3]
    seen = seen[1:]
    assert len(seen) == 4 and all(len(s) == 2 for s in seen)
    for epoch in (seen[:2], seen[2:]):  # each epoch covers every episode once, all agents together
        assert sorted(epoch[0] + epoch[1]) == [0, 1, 2, 3]


def test_soft_target_critic_update():
    lrn = make_learner(target_update_mode="soft", tau=0.1)
    before = [p.detach().clone() for p in lrn.target_critic.parameters()]
    lrn.train(make_batch(), 0, 0)
    for t, b, o in zip(lrn.target_critic.parameters(), before, lrn.critic.parameters(), strict=True):
        assert torch.allclose(t, 0.9 * b + 0.1 * o.detach(), atol=1e-6)


def test_checkpoint_round_trip_continues_identically(tmp_path):
    kw = dict(
        learner="ppo_learner", critic="cv_critic", value_norm="ema", ppo_style="mappo", return_estimator="gae"
    )
    torch.manual_seed(3)
    a = make_learner(**kw)
    a.train(make_batch(seed=1), 0, 0)
    state = a.state_dict()
    torch.save(state, tmp_path / "l.th")
    b = make_learner(**kw)
    b.load_state_dict(torch.load(tmp_path / "l.th", weights_only=True))
    assert torch.equal(b.value_norm.mean, a.value_norm.mean) and torch.equal(
        b.value_norm.weight, a.value_norm.weight
    )
    torch.manual_seed(9)
    a.train(make_batch(seed=2), 10, 10)
    torch.manual_seed(9)
    b.train(make_batch(seed=2), 10, 10)
    for x, y in zip(a.mac.parameters(), b.mac.parameters(), strict=True):
        assert torch.equal(x, y)


def continuous_batch_and_mac(**overrides):
    args = learner_args(
        learner="ppo_learner",
        critic="cv_critic",
        mac="ac_mac",
        action_space="continuous",
        action_low=[0.0] * A,
        action_high=[1.0] * A,
        **overrides,
    )
    g = torch.Generator().manual_seed(0)
    scheme = {
        "state": {"vshape": S},
        "obs": {"vshape": OBS, "group": "agents"},
        "avail_actions": {"vshape": (A,), "group": "agents", "dtype": torch.uint8},
        "actions": {"vshape": (A,), "group": "agents"},
        "reward": {"vshape": (1,)},
        "terminated": {"vshape": (1,), "dtype": torch.uint8},
        "indi_terminated": {"vshape": (N,), "dtype": torch.uint8},
    }
    batch = EpisodeBatch(scheme, {"agents": N}, 2, L)
    batch.update(
        {
            "obs": torch.randn(2, L, N, OBS, generator=g),
            "state": torch.randn(2, L, S, generator=g),
            "avail_actions": torch.ones(2, L, N, A),
            "actions": torch.randn(2, L, N, A, generator=g),
        }
    )
    batch.update({"reward": torch.randn(2, L - 1, 1, generator=g)}, ts=slice(0, L - 1), mark_filled=False)
    mac = ACMAC(batch.scheme, {"agents": N}, args)
    lrn = le_REGISTRY["ppo_learner"](mac, batch.scheme, Logger(get_console_logger()), args)
    return batch, mac, lrn


def test_continuous_learner_trains_log_std():
    batch, mac, lrn = continuous_batch_and_mac()
    before = mac.agent.log_std.detach().clone()
    lrn.train(batch, 0, 0)
    assert not torch.equal(before, mac.agent.log_std)
    assert "log_std" in lrn.state_dict()["agent"]


def test_std_from_the_network_scales_each_state_and_trains():
    batch, mac, lrn = continuous_batch_and_mac(policy_std="network")
    assert not hasattr(mac.agent, "log_std")
    out = mac.forward_seq(batch)
    assert out.shape[-1] == 2 * A
    mean, log_std = mac.split(out)
    # scale = softplus(x + b) + 1e-4, b chosen so that x = 0 gives 1
    x = out[..., A:]
    want = torch.log(torch.nn.functional.softplus(x + math.log(math.expm1(1.0))) + 1e-4)
    assert torch.allclose(log_std, want) and torch.allclose(
        mac.split(torch.zeros(1, 2 * A))[1], torch.zeros(1, A), atol=1e-3
    )
    assert log_std.std() > 0  # differs across states
    actions = batch["actions"][:, :-1]
    logp, _ = mac.evaluate(out[:, :-1], actions, batch["avail_actions"][:, :-1])
    lsig = log_std[:, :-1].clamp(-5.0, 2.0)
    ref = torch.distributions.Normal(mean[:, :-1], lsig.exp()).log_prob(actions).sum(-1)
    assert torch.allclose(logp, ref, atol=1e-4)
    head = [p for name, p in mac.agent.named_parameters() if name.endswith("weight")][-1]
    before = head.detach().clone()
    lrn.train(batch, 0, 0)
    assert not torch.equal(before[A:], head.detach()[A:])  # the scale rows learn too


# --- the loop, validation and whole runs ------------------------------------------------


def test_on_policy_loop_plays_batch_size_episodes_per_update(tmp_path, monkeypatch):
    import assembly

    calls = []
    original = le_REGISTRY["ppo_learner"].train

    def counting(self, batch, t_env, episode):
        calls.append((batch.batch_size, episode))
        return original(self, batch, t_env, episode)

    monkeypatch.setattr(le_REGISTRY["ppo_learner"], "train", counting)
    monkeypatch.setattr(assembly, "ReplayBuffer", None)  # none may be built
    argv = ["runner=parallel", "batch_size_run=2", "batch_size=4", "t_max=200", "env_args.max_cycles=10"]
    assert run_main(tmp_path, alg="ippo", extra=argv) == 0
    assert calls and all(size == 4 for size, _ in calls)
    assert [e for _, e in calls] == [4 * i for i in range(len(calls))]


@pytest.mark.parametrize(
    "override,message",
    [
        ("agent=mlp transition_batch_size=32", "on-policy"),
        ("train_interval_steps=10", "on-policy"),
        ("batch_size=5", "multiple"),
        ("critic=maddpg_critic", "critic="),
        ("mac=basic_mac", "mac="),
        ("return_estimator=td_lambda", "return_estimator"),
        ("log_std_min=3", "log_std_min"),
        ("gae_lambda=1.5", "gae_lambda"),
        ("epochs=0", "epochs"),
    ],
)
def test_bad_settings_are_refused(tmp_path, override, message, capsys):
    argv = ["--config=mappo", "--env-config=mpe", "with", f"local_results_path={tmp_path}", "t_max=100"]
    code = main.main([*argv, *override.split()])
    assert code == 2
    assert message in capsys.readouterr().err


def test_value_learners_refuse_the_ac_controller(tmp_path, capsys):
    argv = [
        "--config=qmix",
        "--env-config=mpe",
        "with",
        "mac=ac_mac",
        "t_max=100",
        f"local_results_path={tmp_path}",
    ]
    assert main.main(argv) == 2


@pytest.mark.parametrize("alg", ["ia2c", "ippo", "maa2c", "mappo", "coma"])
@pytest.mark.parametrize("runner", ["episode", "parallel", "vector"])
def test_each_config_runs_and_records(tmp_path, alg, runner):
    extra = ["t_max=100", "env_args.max_cycles=10", f"runner={runner}"]
    extra += (
        ["batch_size_run=1", "batch_size=2"] if runner == "episode" else ["batch_size_run=2", "batch_size=2"]
    )
    assert run_main(tmp_path, alg=alg, extra=extra) == 0
    record = sacred_runs(tmp_path)[-1]
    assert read(record, "run.json")["status"] == "COMPLETED"
    metrics = read(record, "metrics.json")
    assert "critic_loss" in metrics and "pg_loss" in metrics
    assert all(math.isfinite(v) for v in metrics["pg_loss"]["values"])


@pytest.mark.parametrize(
    "alg,squash,runner",
    [
        (alg, "clip", runner)
        for alg in ("ia2c", "ippo", "maa2c", "mappo")
        for runner in ("episode", "parallel")
    ]
    + [("ia2c", "tanh", "episode"), ("mappo", "tanh", "parallel"), ("mappo", "tanh-network", "episode")],
)
def test_continuous_configs_run(tmp_path, alg, squash, runner):
    squash, _, std = squash.partition("-")
    extra = [
        "t_max=100",
        "env_args.max_cycles=10",
        "env_args.continuous_actions=True",
        f"squash={squash}",
        f"runner={runner}",
        f"batch_size_run={1 if runner == 'episode' else 2}",
        "batch_size=2",
        f"policy_std={std or 'parameter'}",
    ]
    assert run_main(tmp_path, alg=alg, extra=extra) == 0
    metrics = read(sacred_runs(tmp_path)[-1], "metrics.json")
    assert "log_std_mean" in metrics and "pg_loss" in metrics


@pytest.mark.parametrize("alg", ["ia2c", "ippo", "maa2c", "mappo", "coma"])
@pytest.mark.parametrize("runner", ["episode", "parallel"])
def test_skirmish_runs(tmp_path, alg, runner):
    extra = ["t_max=200", f"runner={runner}", "batch_size=2", "env_args.map_name=3m"]
    extra.append(f"batch_size_run={1 if runner == 'episode' else 2}")
    assert run_main(tmp_path, alg=alg, env="skirmish", extra=extra) == 0
    record = sacred_runs(tmp_path)[-1]
    assert read(record, "run.json")["status"] == "COMPLETED"
    metrics = read(record, "metrics.json")
    assert "dead_ratio" in metrics and "test_battle_won_mean" in metrics
    assert all(math.isfinite(v) for v in metrics["pg_loss"]["values"])


def test_policy_gradient_learners_learn_a_cooperative_task(tmp_path):
    """pz_coop: both agents must pick the action matching a shared cue; a random team scores
    about 1.1 per 10-step episode, the best 10. Stochastic test policies, so the policy itself
    must have concentrated (a greedy test would pass after one update)."""
    import json

    for alg in ("mappo", "ia2c"):
        argv = [
            f"--config={alg}",
            "--env-config=mpe",
            "with",
            "env_args.key=pz_coop",
            "env_args.max_cycles=10",
            "reward_scalarisation=mean",
            "agent=mlp",
            "hidden_dim=64",
            "runner=episode",
            "batch_size_run=1",
            "batch_size=8",
            "t_max=4000",
            "test_interval=2000",
            "test_nepisode=32",
            "lr=0.003",
            "test_greedy=False",
            "seed=3",
            f"local_results_path={tmp_path / alg}",
        ]
        assert main.main(argv) == 0
        with open(f"{sacred_runs(tmp_path / alg)[-1]}/metrics.json") as f:
            curve = json.load(f)["test_return_mean"]["values"]
        assert curve[0] < 3.0 and curve[-1] >= 9.0, (alg, curve)


def test_epsilon_floor_mixes_a_uniform_choice_over_available_actions():
    policy = CategoricalPolicy()
    policy.floor = 0.2
    out = torch.tensor([[2.0, 0.0, -1.0, 1.0]], requires_grad=True)
    avail = torch.tensor([[1, 1, 0, 1]])
    pi = torch.softmax(out.detach().masked_fill(avail == 0, -1e10), -1)
    expected = 0.8 * pi + 0.2 * avail / 3
    log_pi = policy.log_probs(out, avail)
    assert torch.allclose(log_pi.exp()[avail == 1], expected[avail == 1], atol=1e-6)
    assert log_pi.exp()[0, 2] < 1e-12
    (policy.entropy(out, avail) + policy.log_prob(out, torch.tensor([[1]]), avail)).sum().backward()
    assert torch.isfinite(out.grad).all()
    torch.manual_seed(0)
    draws = policy.sample(out.detach().expand(20000, 4), avail.expand(20000, 4))
    counts = torch.bincount(draws, minlength=4).float() / 20000
    assert counts[2] == 0 and torch.allclose(counts, expected[0], atol=0.015)


def test_epsilon_floor_follows_the_schedule_in_training_only(tmp_path):
    args = learner_args(
        mac="ac_mac",
        policy_epsilon_floor=True,
        epsilon_start=0.5,
        epsilon_finish=0.1,
        epsilon_anneal_time=100,
    )
    batch = make_batch()
    mac = ACMAC(batch.scheme, {"agents": N}, args)
    mac.init_hidden(batch.batch_size)
    mac.select_actions(batch, 0, t_env=50, test_mode=False)
    assert math.isclose(mac.policy.floor, 0.3)
    mac.select_actions(batch, 1, t_env=500, test_mode=True)
    assert math.isclose(mac.policy.floor, 0.3)  # tests leave the training floor as it is


@pytest.mark.parametrize(
    "alg,env,extra",
    [
        ("mappo", "skirmish", ["agent=transformer", "transformer_n_layers=1", "env_args.map_name=3m"]),
        ("ippo", "mpe", ["agent_param_sharing=False", "obs_agent_id=False", "env_args.max_cycles=10"]),
        ("maa2c", "mpe", ["agent=mlp", "env_args.max_cycles=10"]),
    ],
)
def test_any_actor_network_and_unshared_networks_train(tmp_path, alg, env, extra):
    argv = ["t_max=100", "runner=episode", "batch_size_run=1", "batch_size=2", *extra]
    assert run_main(tmp_path, alg=alg, env=env, extra=argv) == 0
    metrics = read(sacred_runs(tmp_path)[-1], "metrics.json")
    assert all(math.isfinite(v) for v in metrics["pg_loss"]["values"])
