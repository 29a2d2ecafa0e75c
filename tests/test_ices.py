"""ICES (learners/ices.py, controllers/ices_controller.py, modules/world_model.py): the divergence
and intrinsic reward, the world model's rows and ELBO, the normaliser, the exploration policy's
terms and its mixing into acting, each quirk option, and the refusals."""

import numpy as np
import pytest
import torch

from components.episode_buffer import EpisodeBatch
from components.transforms import OneHot
from config import load_config
from controllers import REGISTRY as mac_REGISTRY
from helpers import OBS, A, L, N, S, learner_args, make_batch
from learners import REGISTRY as le_REGISTRY
from learners.ices import ChangeNormaliser, policy_terms, world_rows
from modules.world_model import HIDDEN, StateChangeModel, hide_each, hide_one_at_random, normal_divergence
from utils.errors import ConfigError
from utils.logger import Logger, get_console_logger
from utils.rl_utils import valid_mask


def test_the_divergence_is_the_normal_kl_and_the_bits_version_is_not():
    torch.manual_seed(0)
    p_mu, q_mu = torch.randn(5, 4), torch.randn(5, 4)
    p_s, q_s = torch.rand(5, 4) + 0.2, torch.rand(5, 4) + 0.2
    expected = torch.distributions.kl_divergence(
        torch.distributions.Normal(p_mu, p_s), torch.distributions.Normal(q_mu, q_s)
    ).mean(-1)
    assert torch.allclose(normal_divergence(p_mu, p_s, q_mu, q_s), expected, atol=1e-6)
    assert torch.allclose(normal_divergence(p_mu, p_s, p_mu, p_s, log2=True), torch.zeros(5))
    # the authors' bits-and-nats mix: below 0 for a slightly narrower q, where the KL is positive
    mu, p, q = torch.zeros(1, 1), torch.ones(1, 1), torch.full((1, 1), 0.9)
    assert normal_divergence(mu, p, mu, q, log2=True).item() < 0 < normal_divergence(mu, p, mu, q).item()


def test_hiding_replaces_exactly_one_action_by_the_zero_embedding():
    a = torch.tensor([[2, 0, 1], [1, 1, 1]])
    each = hide_each(a)
    for i in range(3):
        assert (each[:, i, i] == HIDDEN).all()
        others = [j for j in range(3) if j != i]
        assert torch.equal(each[:, i, others], a[:, others])
    torch.manual_seed(0)
    one = hide_one_at_random(a.repeat(50, 1))
    assert ((one == HIDDEN).sum(1) == 1).all()
    assert set((one == HIDDEN).float().argmax(1).tolist()) == {0, 1, 2}  # every agent gets hidden
    model = StateChangeModel(4, 3, 5)
    code = model.branches["local"].prior.code
    assert torch.equal(code(torch.full((1, 3), HIDDEN)), torch.zeros(1, 3 * 4))


def ices_learner(**kw):
    args = learner_args(
        mac="ices_mac", learner="ices_learner", mixer="qmix", agent="rnn", t_max=1000, **kw
    )  # fmt: skip
    scheme = make_batch().scheme
    mac = mac_REGISTRY["ices_mac"](scheme, {"agents": N}, args)
    logger = Logger(get_console_logger())
    return le_REGISTRY["ices_learner"](mac, scheme, logger, args), logger


def test_an_action_the_model_does_not_see_earns_no_intrinsic_reward():
    # Agent 0's action slot cut from every network that reads the joint action (as for an agent
    # whose action the env ignores, once learned): hiding it leaves both priors where they were.
    torch.manual_seed(0)
    learner, _ = ices_learner()
    world = learner.world
    world.branches["local"].load_state_dict(world.branches["global"].state_dict())
    embed = learner.args.ices_world_embed_dim
    with torch.no_grad():
        for branch in world.branches.values():
            for net in (branch.baseline, branch.prior):
                net.mlp[0].weight[:, S : S + embed] = 0.0  # after the state: agent 0's embedding
    batch = make_batch()
    r = learner.intrinsic_rewards(batch)
    assert r.shape == (3, L - 1, N)
    assert torch.allclose(r[..., 0], torch.zeros_like(r[..., 0]), atol=1e-6)
    real = valid_mask(batch)[..., 0] > 0
    assert (r[..., 1:][real] > 1e-4).all() and (r < 1).all()
    assert (r[~real] == 0).all()  # the padding, which every loss masks out, is not computed


def test_the_intrinsic_reward_of_each_real_step_is_the_divergence_of_its_priors():
    torch.manual_seed(0)
    learner, _ = ices_learner()
    batch = make_batch()
    r = learner.intrinsic_rewards(batch)
    world, real = learner.world, valid_mask(batch)[..., 0] > 0
    s, a = batch["state"][:, :-1][real], batch["actions"][:, :-1, :, 0][real].long()
    with torch.no_grad():
        g = world.prior("global", s, a)
        for i in range(N):
            hidden = a.clone()
            hidden[:, i] = HIDDEN
            local = world.prior("local", s, hidden)
            kl = normal_divergence(*g, *local)
            torch.testing.assert_close(r[..., i][real], 1 - torch.exp(-kl), atol=1e-6, rtol=1e-5)


def test_the_world_model_learns_the_state_change():
    torch.manual_seed(0)
    model = StateChangeModel(2, 2, 3, hidden_dim=32, z_dim=4)
    opt = torch.optim.Adam(model.elbo_parameters("global"), lr=3e-3)
    base = torch.optim.Adam(model.branches["global"].baseline.parameters(), lr=3e-3)

    def data():
        s, a = torch.randn(128, 2), torch.randint(3, (128, 2))
        return s, a, torch.stack([0.4 * (a[:, 0] - 1).float(), 0.2 * s[:, 1]], -1)

    s, a, change = data()
    before = model.negative_elbo("global", s, a, change).mean().item()
    base_before = model.baseline_errors("global", s, a, change).mean().item()
    for _ in range(150):
        x = data()
        for o, loss in ((base, model.baseline_errors), (opt, model.negative_elbo)):
            o.zero_grad()
            loss("global", *x).mean().backward()
            o.step()
    assert model.negative_elbo("global", s, a, change).mean().item() < before - 1.5
    assert model.baseline_errors("global", s, a, change).mean().item() < base_before / 4


def test_world_rows_weigh_real_steps_or_every_padded_row():
    batch = make_batch(lengths=(5, 7, 3), terminated=(True, False, True))
    s, a, change, w = world_rows(batch, None, padded_rows=False)
    mask = valid_mask(batch).reshape(-1)
    rows = batch.batch_size * (L - 1)
    assert s.shape == (rows, S) and a.shape == (rows, N) and change.shape == (rows, S)
    assert torch.allclose(w, mask / mask.sum()) and w[mask == 0].sum() == 0
    torch.testing.assert_close(change, (batch["state"][:, 1:] - batch["state"][:, :-1]).reshape(rows, S))
    s2, a2, change2, w2 = world_rows(batch, None, padded_rows=True)
    assert torch.allclose(w2, torch.full((rows,), 1.0 / rows))  # padding counts
    pad = mask == 0
    assert (s2[pad] == 0).all() and (a2[pad] == 0).all() and (change2[pad] == 0).all()
    assert torch.equal(s2[~pad], s[~pad]) and torch.equal(a2[~pad], a[~pad])


def test_the_normaliser_per_feature_or_as_published():
    batch = make_batch(lengths=(5, 7, 3), terminated=(True, False, True))
    with torch.no_grad():
        batch["state"][:] = (
            torch.arange(S, dtype=torch.float32) * torch.arange(L, dtype=torch.float32)[:, None]
        )
    ours, theirs = ChangeNormaliser(S, "per_feature"), ChangeNormaliser(S, "published")
    ours.update(batch)
    theirs.update(batch)
    change = torch.arange(S, dtype=torch.float32).expand(2, S)  # each feature's real change, every step
    # per feature: each feature's mean is its own change, its variance 0 (floored at 0.01)
    assert torch.allclose(ours.normalise(change), torch.zeros(2, S), atol=1e-4)
    # published: one mean (the padding's steps included) and one variance for all features
    flat = batch["state"][:, 1:] - batch["state"][:, :-1]
    expected = (change - flat.mean()) / (flat**2).mean().sub(flat.mean() ** 2).clamp(min=0.01).sqrt()
    assert torch.allclose(theirs.normalise(change), expected, atol=1e-4)
    restored = ChangeNormaliser(S, "published")
    restored.load_state_dict(theirs.state_dict())
    assert torch.equal(restored.normalise(change), theirs.normalise(change))


def test_the_policy_terms_over_available_or_all_actions():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, N, A)
    avail = torch.ones(2, 3, N, A)
    avail[..., 0] = 0
    actions = torch.randint(1, A, (2, 3, N, 1))
    lp_all, ent_all = policy_terms(logits, actions, None)
    lp, ent = policy_terms(logits, actions, avail)
    expected = torch.log_softmax(logits[..., 1:], -1).gather(3, actions - 1).squeeze(3)
    assert torch.allclose(lp, expected, atol=1e-6)
    assert (lp > lp_all).all() and not torch.allclose(ent, ent_all)
    dist = torch.distributions.Categorical(logits=logits[..., 1:])
    assert torch.allclose(ent, dist.entropy(), atol=1e-5)


@pytest.mark.parametrize(
    "option,sound,quirk",
    [
        ("ices_policy_all_actions", False, True),
        ("ices_world_padded_rows", False, True),
        ("ices_kl_log2", False, True),
        ("ices_state_norm", "per_feature", "published"),
    ],
)
def test_each_quirk_option_changes_the_update(option, sound, quirk):
    batch = make_batch(lengths=(5, 7, 3), terminated=(True, False, True))

    def after_one_update(value):
        torch.manual_seed(0)
        np.random.seed(0)
        learner, _ = ices_learner(**{option: value})
        learner.observe(batch)
        learner.train(batch, t_env=0, episode_num=0)
        learner.train_aux(batch, 0, 0)
        learner.train_aux(batch, 0, 1)
        return [p.detach().clone() for p in [*learner.explorer.parameters(), *learner.world.parameters()]]

    ours, theirs = after_one_update(sound), after_one_update(quirk)
    assert any(not torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_the_explorer_and_critic_step_and_the_checkpoint_holds_every_part():
    torch.manual_seed(0)
    learner, logger = ices_learner(ices_state_norm="published")
    batch = make_batch()
    learner.observe(batch)
    before = [p.detach().clone() for p in [*learner.explorer.parameters(), *learner.critic.parameters()]]
    learner.train(batch, t_env=0, episode_num=0)
    after = [*learner.explorer.parameters(), *learner.critic.parameters()]
    assert all(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert {"int_reward_mean", "int_policy_loss", "int_critic_loss", "int_ratio"} <= set(logger.stats)
    world = [p.detach().clone() for p in learner.world.parameters()]
    lr = learner.world_optimisers["global"].param_groups[0]["lr"]
    learner.train_aux(batch, 0, 0)
    assert learner.world_optimisers["global"].param_groups[0]["lr"] == pytest.approx(
        lr * learner.world_lr_factor
    )
    moved = [not torch.equal(a, b) for a, b in zip(world, learner.world.parameters(), strict=True)]
    assert any(moved) and not all(moved)  # the global branch and decoder, not the local branch
    state = learner.state_dict()
    for key in ("explorer", "explorer_critic", "world_model", "explorer_optimiser", "change_normaliser"):
        assert key in state
    assert {"world_global_optimiser", "world_local_baseline_optimiser"} <= set(state)
    torch.manual_seed(1)
    other, _ = ices_learner(ices_state_norm="published")
    other.load_state_dict(state)
    for a, b in zip(learner.world.parameters(), other.world.parameters(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(other.normaliser.mean, learner.normaliser.mean)


def acting_batch(avail):
    scheme = {k: v for k, v in make_batch().scheme.items() if k not in ("filled", "actions_onehot")}
    onehot = {"actions": ("actions_onehot", [OneHot(out_dim=A)])}
    batch = EpisodeBatch(scheme, {"agents": N}, 64, L, preprocess=onehot)
    data = {
        "obs": torch.randn(64, N, OBS),
        "state": torch.randn(64, S),
        "avail_actions": avail.expand(64, N, A),
    }
    batch.update(data, ts=0)
    return batch


@pytest.mark.parametrize("ratio,eps", [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0)])
def test_acting_mixes_greedy_q_the_exploration_policy_and_random_actions(ratio, eps):
    torch.manual_seed(0)
    np.random.seed(0)
    learner, _ = ices_learner(
        ices_int_ratio=ratio, ices_int_finish=ratio, epsilon_start=eps, epsilon_finish=eps
    )
    mac = learner.mac
    avail = torch.tensor([1, 1, 0, 1], dtype=torch.uint8).view(1, 1, A)
    batch = acting_batch(avail)
    with torch.no_grad():  # Q prefers action 1; the exploration policy action 3, 90% of the time
        mac.agent.fc2.weight.zero_()
        mac.agent.fc2.bias.copy_(torch.tensor([0.0, 5.0, 9.0, 0.0]))
        mac.explorer.fc2.weight.zero_()
        mac.explorer.fc2.bias.copy_(torch.tensor([0.0, 0.0, 20.0, np.log(18.0)]))  # e^x / (e^x + 2)
    picks = []
    for _ in range(20):
        mac.init_hidden(64)
        picks.append(mac.select_actions(batch, 0, t_env=0).flatten())
    picks = torch.cat(picks)
    assert (picks != 2).all()  # never an unavailable action
    share = [(picks == k).float().mean().item() for k in range(A)]
    if ratio == 0.0:
        assert share[1] == 1.0
    elif eps == 0.0:
        # softmax over the available actions: 18 / 20 for action 3, 1 / 20 for each other one
        assert 0.87 < share[3] < 0.93 and 0.03 < share[0] < 0.07 and 0.03 < share[1] < 0.07
    else:
        assert all(abs(share[k] - 1 / 3) < 0.05 for k in (0, 1, 3))
    mac.init_hidden(64)

    def never(*args):
        raise AssertionError("a test episode called the exploration policy")

    mac.explorer.forward = never
    assert (mac.select_actions(batch, 0, t_env=0, test_mode=True) == 1).all()  # tests: Q only


def test_the_mixing_ratio_anneals_to_its_floor_over_the_horizon():
    learner, _ = ices_learner(ices_int_ratio=0.5, ices_int_finish=0.1, schedule_horizon=1000)
    mac = learner.mac
    assert mac.explorer_ratio(0) == 0.5 and mac.explorer_ratio(500) == pytest.approx(0.25)
    assert mac.explorer_ratio(800) == pytest.approx(0.1) and mac.explorer_ratio(5000) == 0.1


@pytest.mark.parametrize(
    "extra,message",
    [
        (["agent=transformer"], "agent=rnn or agent=mlp, not agent=transformer"),
        (["action_selector=gumbel"], "action_selector=epsilon_greedy, not gumbel"),
        (["mac=basic_mac"], "learner=ices_learner trains mac=ices_mac, not mac=basic_mac"),
        (
            ["agent=mlp", "td_lambda=0", "obs_last_action=False", "transition_batch_size=16"],
            "trains on whole episodes",
        ),
    ],
)
def test_settings_ices_cannot_honour_are_refused_in_one_line(extra, message):
    with pytest.raises(ConfigError, match=message):
        load_config(["--config=ices_qmix", "--env-config=skirmish_ices", "with", *extra])
