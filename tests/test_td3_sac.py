"""MATD3, IDDPG, MASAC and ISAC: twin-critic targets and smoothing, delayed updates, local critics,
SAC's soft targets, actor terms, temperature and tanh log-probabilities against hand computations,
and the configs end to end."""

import glob
import math
import os

import pytest
import torch

import main
from components.action_forms import SquashedGaussianActions
from helpers import assert_trains, maddpg_setup, make_args, play
from learners import REGISTRY as le_REGISTRY
from learners.masac_learner import temperature_loss
from utils.errors import ConfigError
from utils.rl_utils import valid_mask

GAMMA = 0.95


def setup(learner="maddpg_learner", continuous=False, **overrides):
    args, runner, mac, learner_obj, _ = maddpg_setup(
        continuous=continuous, common_reward=False, learner=learner, **overrides
    )
    return args, runner, mac, learner_obj


def inputs_of(learner, batch):
    args = learner.args
    rewards, terminated, mask = learner.rewards_and_masks(batch)
    rewards = rewards.expand(-1, -1, args.n_agents)
    inputs = learner.mac.build_seq_inputs(batch)
    return rewards, terminated, mask, inputs


def joint(actions, n):
    b, t = actions.shape[:2]
    return actions.reshape(b, t, 1, -1).expand(b, t, n, -1)


# --- MATD3 --------------------------------------------------------------------------------------
def test_twin_minimum_and_target_smoothing_by_hand():
    args, runner, mac, learner = setup(
        continuous=True, twin_critics=True, target_noise=0.2, target_noise_clip=0.3
    )
    with torch.no_grad():  # different twins, so the minimum matters
        for p in learner.target_critics[1].parameters():
            p.add_(torch.randn_like(p) * 0.5)
    batch = play(runner)
    rewards, terminated, _, inputs = inputs_of(learner, batch)
    torch.manual_seed(5)
    got = learner.critic_targets(batch, inputs, None, rewards, terminated, None)
    torch.manual_seed(5)
    with torch.no_grad():
        out = learner.target_mac.forward_seq(batch, inputs)[:, 1:]
        eps = torch.randn_like(out)
        low, high = mac.form.bounds(out)
        half = (high - low) / 2
        greedy = low + (torch.tanh(out) + 1) * half
        a = torch.minimum(torch.maximum(greedy + (0.2 * eps).clamp(-0.3, 0.3) * half, low), high)
        a = a * batch["avail_actions"][:, 1:]
        x = learner.critic.build_inputs(batch["state"][:, 1:], joint(a, args.n_agents))
        q1, q2 = (c(x) for c in learner.target_critics)
        want = rewards + GAMMA * (1 - terminated) * torch.minimum(q1, q2)
    assert not torch.allclose(q1, q2)
    assert torch.allclose(got, want, atol=1e-5)


def test_discrete_smoothing_samples_the_target_policy():
    args, runner, mac, learner = setup(twin_critics=True, target_noise=0.2)
    logits = torch.tensor([2.0, 0.0, -1.0, 0.5, 0.0]).expand(20000, 5).clone()
    avail = torch.tensor([1, 1, 0, 1, 1]).expand(20000, 5)
    torch.manual_seed(0)
    s = mac.form.smoothed_target(logits, avail, 0.2, 0.5)
    assert torch.equal(s.sum(-1), torch.ones(20000)) and s[:, 2].sum() == 0
    p = torch.softmax(logits[0].masked_fill(avail[0] == 0, -1e10), 0)
    assert torch.allclose(s.mean(0), p, atol=0.015)


def test_policy_delay_updates_actors_and_targets_every_kth_critic_update():
    args, runner, mac, learner = setup(twin_critics=True, policy_delay=3, tau=0.5)
    batch = play(runner)

    def snap(params):
        return [p.detach().clone() for p in params]

    changed = []
    for k in range(1, 7):
        actor, critic = snap(mac.parameters()), snap(learner.critic.parameters())
        target_critic, target_actor = (
            snap(learner.target_critic.parameters()),
            snap(learner.target_mac.parameters()),
        )
        learner.train(batch, t_env=k, episode_num=k)

        def moved(before, params):
            return any(not torch.equal(a, b) for a, b in zip(before, params, strict=True))

        changed.append(
            (
                moved(actor, mac.parameters()),
                moved(critic, learner.critic.parameters()),
                moved(target_critic, learner.target_critic.parameters()),
                moved(target_actor, learner.target_mac.parameters()),
            )
        )
    for k, (actor, critic, target_critic, target_actor) in enumerate(changed, start=1):
        assert critic, k
        assert actor == target_critic == target_actor == (k % 3 == 0), (k, changed[k - 1])
    assert learner.critic_updates == 6 and learner.train_steps == 2


def test_local_critic_sees_own_observation_and_action_only():
    args, runner, mac, learner = setup(critic="local_critic")
    n, a = args.n_agents, args.n_actions
    obs = torch.randn(2, 3, n, args.obs_shape)
    acts = torch.nn.functional.one_hot(torch.randint(0, a, (2, 3, n)), a).float()
    x = learner.critic.build_inputs(torch.randn(2, 3, args.state_shape), joint(acts, n), obs)
    assert x.shape == (2, 3, n, args.obs_shape + a)
    for i in range(n):
        assert torch.equal(x[:, :, i], torch.cat([obs[:, :, i], acts[:, :, i]], dim=-1))
    # another agent's action does not move agent 0's value
    moved = acts.clone()
    moved[:, :, 1] = moved[:, :, 1].roll(1, dims=-1)
    y = learner.critic.build_inputs(torch.randn(2, 3, args.state_shape), joint(moved, n), obs)
    assert torch.equal(learner.critic(x)[:, :, 0], learner.critic(y)[:, :, 0])


# --- MASAC --------------------------------------------------------------------------------------
def test_squashed_gaussian_log_prob_matches_torch_distributions():
    args = make_args(action_low=[-1.0, 0.0], action_high=[1.0, 2.0], exploration_mode="gaussian")
    form = SquashedGaussianActions(args)
    torch.manual_seed(0)
    out = torch.randn(500, 4) * torch.tensor([1.0, 1.0, 0.3, 0.3])  # means, log stds
    avail = torch.ones(500, 2)
    a, logp = form.sample(out, avail)
    mean, log_std = out[:, :2], out[:, 2:]
    half = torch.tensor([1.0, 1.0])
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean.double(), log_std.exp().double()),
        [
            torch.distributions.transforms.TanhTransform(cache_size=1),
            torch.distributions.transforms.AffineTransform(torch.tensor([0.0, 1.0]).double(), half.double()),
        ],
    )
    keep = (a - torch.tensor([0.0, 1.0])).abs().max(-1).values < 0.999  # atanh stays accurate
    want = dist.log_prob(a.double()).sum(-1)
    assert keep.sum() > 400
    assert torch.allclose(logp[keep].double(), want[keep], atol=1e-4)
    assert (a[:, 0].abs() <= 1).all() and (a[:, 1] >= 0).all() and (a[:, 1] <= 2).all()
    # a padded action dimension is 0 and adds nothing to log pi
    a2, logp2 = form.sample(out, torch.tensor([1.0, 0.0]).expand(500, 2))
    assert (a2[:, 1] == 0).all() and not torch.allclose(logp2, logp)


def masac(continuous=False, **kw):
    extra = dict(continuous_actor="squashed_gaussian") if continuous else {}
    return setup(
        "masac_learner", continuous=continuous, **{"twin_critics": True, "alpha_init": 0.3, **extra, **kw}
    )


def own_action_values(learner, state, others, t, critics, obs=None):
    """min_k Q_k,i(x, a_-i, a) [B, T, N, A] by loops over agents and actions."""
    n, a = learner.n_agents, learner.n_actions
    out = torch.zeros(*others.shape[:2], n, a)
    for i in range(n):
        for act in range(a):
            j = others.clone()
            j[:, :, i] = torch.nn.functional.one_hot(torch.tensor(act), a).float()
            x = learner.critics[0].build_inputs(state[:, t], joint(j, n), None if obs is None else obs[:, t])
            out[:, :, i, act] = torch.stack([c(x)[:, :, i] for c in critics]).min(0).values
    return out


def test_masac_discrete_soft_target_by_hand(monkeypatch):
    args, runner, mac, learner = masac()
    batch = play(runner)
    rewards, terminated, _, inputs = inputs_of(learner, batch)
    with torch.no_grad():
        out = mac.forward_seq(batch, inputs)
    fixed = torch.nn.functional.one_hot(out[:, 1:].argmax(-1), args.n_actions).float()
    monkeypatch.setattr(mac.form, "smoothed_target", lambda *a: fixed)
    got = learner.critic_targets(batch, inputs, out, rewards, terminated, None)
    with torch.no_grad():
        avail = batch["avail_actions"][:, 1:]
        logits = out[:, 1:].masked_fill(avail == 0, -1e10)
        pi = torch.softmax(logits, -1)
        log_pi = torch.log(pi.clamp(min=1e-30))
        q = own_action_values(learner, batch["state"], fixed, slice(1, None), learner.target_critics)
        v = (pi * (q - 0.3 * log_pi) * (avail > 0)).sum(-1)
        want = rewards + GAMMA * (1 - terminated) * v
    assert torch.allclose(got, want, atol=1e-4)


def test_masac_continuous_soft_target_by_hand():
    args, runner, mac, learner = masac(continuous=True)
    batch = play(runner)
    rewards, terminated, _, inputs = inputs_of(learner, batch)
    with torch.no_grad():
        out = mac.forward_seq(batch, inputs)
    torch.manual_seed(3)
    got = learner.critic_targets(batch, inputs, out, rewards, terminated, None)
    torch.manual_seed(3)
    with torch.no_grad():
        a, logp = mac.form.sample(out[:, 1:], batch["avail_actions"][:, 1:])
        x = learner.critic.build_inputs(batch["state"][:, 1:], joint(a, args.n_agents))
        q = torch.minimum(*(c(x) for c in learner.target_critics))
        want = rewards + GAMMA * (1 - terminated) * (q - 0.3 * logp)
    assert torch.allclose(got, want, atol=1e-5)


def test_masac_discrete_actor_terms_by_hand():
    args, runner, mac, learner = masac()
    batch = play(runner)
    with torch.no_grad():
        out = mac.forward_seq(batch)[:, :-1]
        alpha = learner.log_alpha.exp()
        per_agent, log_pi = learner.actor_terms(batch, out, batch["actions_onehot"][:, :-1], None, alpha)
        avail = batch["avail_actions"][:, :-1]
        pi = torch.softmax(out.masked_fill(avail == 0, -1e10), -1)
        lp = torch.log(pi.clamp(min=1e-30)) * (avail > 0)
        q = own_action_values(
            learner, batch["state"], batch["actions_onehot"][:, :-1], slice(None, -1), learner.critics
        )
        want = (pi * (0.3 * lp - q)).sum(-1)
    m = valid_mask(batch).expand(-1, -1, args.n_agents) > 0
    assert torch.allclose(per_agent[m], want[m], atol=1e-4)
    assert torch.allclose(log_pi[m], (pi * lp).sum(-1)[m], atol=1e-5)


def test_temperature_loss_by_hand_and_direction():
    log_alpha = torch.tensor([0.1, -0.2], requires_grad=True)
    log_pi = torch.tensor([[[-1.0, -0.5]], [[-2.0, -0.1]]])  # [B=2, T=1, N=2]
    target = torch.full((2, 1, 2), 1.5)
    mask = torch.tensor([[[1.0, 1.0]], [[0.0, 0.0]]])  # the second row is padding
    loss = temperature_loss(log_alpha, log_pi, target, mask)
    loss.backward()
    # d/d log_alpha_i = -sum over valid of (log pi + H) / n_valid
    assert torch.allclose(log_alpha.grad, torch.tensor([-(-1.0 + 1.5), -(-0.5 + 1.5)]) / 2)
    assert loss.item() == pytest.approx(-(0.1 * 0.5 + -0.2 * 1.0) / 2)


@pytest.mark.parametrize("continuous", [False, True])
def test_temperature_follows_the_entropy_target(continuous):
    for target, sign in ((50.0, 1), (-50.0, -1)):
        args, runner, mac, learner = masac(continuous=continuous, target_entropy=target, alpha_lr=0.05)
        batch = play(runner)
        before = learner.log_alpha.detach().clone()
        for k in range(3):
            learner.train(batch, t_env=k, episode_num=k)
        assert (torch.sign(learner.log_alpha.detach() - before) == sign).all(), (target, learner.log_alpha)


def test_masac_needs_twin_critics_and_a_stochastic_actor():
    with pytest.raises(ConfigError, match="twin_critics=True"):
        le_REGISTRY["masac_learner"].validate(
            {"learner": "masac_learner", "critic": "maddpg_critic", "twin_critics": False}
        )
    with pytest.raises(ConfigError, match="continuous_actor=squashed_gaussian"):
        setup("masac_learner", continuous=True, twin_critics=True)


def test_default_target_entropy():
    args, runner, mac, learner = masac()
    avail = torch.tensor([[[[1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]]]])
    h = learner._target_entropy(avail)
    assert torch.allclose(h, 0.98 * torch.log(torch.tensor([[[5.0, 1.0, 2.0]]])))
    args, runner, mac, learner = masac(continuous=True)
    assert torch.equal(learner._target_entropy(torch.ones(1, 1, 3, 5)), torch.full((1, 1, 3), -5.0))
    assert math.isclose(learner.log_alpha.exp()[0].item(), 0.3, rel_tol=1e-6)


# --- end to end ---------------------------------------------------------------------------------
QUICK = [
    "t_max=300",
    "test_interval=300",
    "test_nepisode=2",
    "log_interval=300",
    "transition_batch_size=32",
    "buffer_size=50",
    "env_args.max_cycles=10",
]


@pytest.mark.parametrize(
    "config,continuous",
    [("iddpg", False), ("matd3", False), ("matd3", True), ("masac", False), ("masac", True), ("isac", True)],
)
def test_configs_train(tmp_path, config, continuous):
    argv = [
        f"--config={config}",
        "--env-config=mpe",
        "with",
        *QUICK,
        f"env_args.continuous_actions={continuous}",
    ]
    assert_trains(tmp_path, argv)


def test_masac_checkpoint_holds_temperature_twin_critics_and_counters(tmp_path):
    args, runner, mac, learner = masac(continuous=True)
    batch = play(runner)
    for k in range(2):
        learner.train(batch, t_env=k, episode_num=k)
    state = learner.state_dict()
    _, _, _, fresh = masac(continuous=True, alpha_init=0.9)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.log_alpha, learner.log_alpha) and fresh.critic_updates == 2
    for a, b in zip(fresh.critics[1].parameters(), learner.critics[1].parameters(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(
        fresh.target_critics[1].parameters(), learner.target_critics[1].parameters(), strict=True
    ):
        assert torch.equal(a, b)
    # and a run resumes from its checkpoint
    argv = ["--config=masac", "--env-config=mpe", "with", *QUICK, "env_args.continuous_actions=True"]
    results = str(tmp_path / "r")
    assert (
        main.main([*argv, f"local_results_path={results}", "save_model=True", "save_model_interval=100"]) == 0
    )
    (models,) = glob.glob(os.path.join(results, "models", "*"))
    assert main.main([*argv, f"local_results_path={results}", f"checkpoint_path={models}", "t_max=500"]) == 0
