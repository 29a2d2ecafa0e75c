import copy

import numpy as np
import pytest
import torch

from controllers import REGISTRY as mac_REGISTRY
from helpers import OBS, A, L, N, S, learner_args, make_args, make_batch
from learners import REGISTRY as le_REGISTRY
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.errors import ConfigError
from utils.logger import Logger, get_console_logger
from utils.rl_utils import bootstrap_values, soft_update, valid_mask


def make_learner(mixer="vdn", agent="rnn", **kw):
    args = learner_args(mixer=mixer, agent=agent, **kw)
    scheme = make_batch().scheme
    mac = mac_REGISTRY["basic_mac"](scheme, {"agents": N}, args)
    logger = Logger(get_console_logger())
    return le_REGISTRY["q_learner"](mac, scheme, logger, args), logger


def test_mask_zero_after_end():
    b = make_batch(lengths=(5, 7, 3), terminated=(True, False, True))
    m = valid_mask(b)[:, :, 0]
    for i, T in enumerate((5, 7, 3)):
        assert m[i, :T].tolist() == [1.0] * T
        assert m[i, T:].sum() == 0


def grads_and_loss(learner, logger, batch):
    learner.optimiser.step = lambda: None  # keep parameters fixed to compare gradients
    learner.train(batch, t_env=0, episode_num=0)
    grads = [p.grad.clone() for p in learner.params]
    return logger.stats["loss"][-1][1], grads


@pytest.mark.parametrize("mixer", ["qmix", "vdn", "qplex", None])
def test_padding_and_post_terminal_slots_do_not_matter(mixer):
    b1 = make_batch(lengths=(5, 3), terminated=(True, True))
    b2 = make_batch(lengths=(5, 3), terminated=(True, True))
    g = torch.Generator().manual_seed(5)
    for i, T in enumerate((5, 3)):
        b2["obs"][i, T + 1 :] = torch.randn(L - T - 1, N, OBS, generator=g)
        b2["state"][i, T + 1 :] = torch.randn(L - T - 1, S, generator=g)
        b2["reward"][i, T:] = torch.randn(L - T, 1, generator=g)
        b2["avail_actions"][i, T + 1 :] = (torch.rand(L - T - 1, N, A, generator=g) > 0.5).to(torch.uint8)
    torch.manual_seed(0)
    l1, g1 = grads_and_loss(*make_learner(mixer=mixer), b1)
    torch.manual_seed(0)
    l2, g2 = grads_and_loss(*make_learner(mixer=mixer), b2)
    assert l1 == pytest.approx(l2, rel=1e-6)
    for a, c in zip(g1, g2, strict=True):
        assert torch.allclose(a, c, rtol=1e-5, atol=1e-7)


def test_vdn_sums_exactly():
    qs = torch.randn(4, 5, N, requires_grad=True)
    q_tot = mixer_REGISTRY["vdn"]()(qs, None)
    assert q_tot.shape == (4, 5, 1)
    assert torch.allclose(q_tot[..., 0], qs.sum(-1))
    q_tot.sum().backward()
    assert torch.all(qs.grad == 1)


@pytest.mark.parametrize("layers", [1, 2])
def test_qmix_monotonic(layers):
    torch.manual_seed(layers)
    args = make_args(n_agents=N, state_shape=S, hypernet_layers=layers)
    mixer = mixer_REGISTRY["qmix"](args)
    qs = (torch.randn(16, 7, N) * 5).requires_grad_(True)
    states = torch.randn(16, 7, S) * 3
    q_tot = mixer(qs, states)
    assert q_tot.shape == (16, 7, 1)
    (grad,) = torch.autograd.grad(q_tot.sum(), qs)
    assert (grad >= 0).all()
    with torch.no_grad():  # finite increases of any Q_i never decrease Q_tot
        for i in range(N):
            bumped = qs.detach().clone()
            bumped[..., i] += torch.rand(16, 7) * 3
            assert (mixer(bumped, states) >= q_tot - 1e-5).all()


def test_qmix_bad_hypernet_layers():
    with pytest.raises(ConfigError, match="hypernet_layers"):
        mixer_REGISTRY["qmix"](make_args(n_agents=N, state_shape=S, hypernet_layers=3))


def test_double_q_uses_available_online_argmax():
    online = torch.tensor([[[[1.0, 5.0, 2.0, 0.0]]]])  # [1, 1, 1, A]
    target = torch.tensor([[[[10.0, 20.0, 1e6, 30.0]]]])
    avail = torch.tensor([[[[1, 0, 1, 1]]]], dtype=torch.uint8)
    # Online argmax among available actions is action 2, valued by the target at 1e6.
    assert bootstrap_values(online, target, avail, True).item() == 1e6
    avail2 = torch.tensor([[[[1, 1, 0, 1]]]], dtype=torch.uint8)  # huge target value unavailable
    assert bootstrap_values(online, target, avail2, True).item() == 20.0
    assert bootstrap_values(online, target, avail2, False).item() == 30.0  # masked target max


@pytest.mark.parametrize("mixer,double_q", [("vdn", True), (None, True), ("qmix", False)])
def test_loss_matches_hand_computation(mixer, double_q):
    learner, logger = make_learner(mixer=mixer, double_q=double_q, gamma=0.9, agent="mlp")
    batch = make_batch()
    learner.target_mac.agent.fc1.weight.data += 0.1  # targets differ from the online network
    with torch.no_grad():
        q = learner.mac.forward_seq(batch)
        qt = learner.target_mac.forward_seq(batch)
        expected_sq, count = 0.0, 0
        for b in range(batch.batch_size):
            for t in range(L - 1):
                if batch["filled"][b, t] == 0 or (t > 0 and batch["terminated"][b, t - 1] == 1):
                    continue
                avail_next = batch["avail_actions"][b, t + 1].bool()
                u = batch["actions"][b, t, :, 0]
                chosen = q[b, t, torch.arange(N), u]
                next_vals = []
                for i in range(N):
                    ok = avail_next[i].nonzero()[:, 0]
                    if double_q:
                        a_star = ok[q[b, t + 1, i, ok].argmax()]
                        next_vals.append(qt[b, t + 1, i, a_star])
                    else:
                        next_vals.append(qt[b, t + 1, i, ok].max())
                next_vals = torch.stack(next_vals)
                r = batch["reward"][b, t, 0]
                d = batch["terminated"][b, t, 0].float()
                if mixer is None:
                    y = r + 0.9 * (1 - d) * next_vals
                    expected_sq += ((chosen - y) ** 2).sum().item()
                    count += N
                else:
                    mix = learner.mixer if mixer == "qmix" else (lambda x, s: x.sum(-1, keepdim=True))
                    tmix = learner.target_mixer if mixer == "qmix" else mix
                    y = r + 0.9 * (1 - d) * tmix(
                        next_vals.view(1, 1, N), batch["state"][b, t + 1].view(1, 1, S)
                    )
                    q_tot = mix(chosen.view(1, 1, N), batch["state"][b, t].view(1, 1, S))
                    expected_sq += ((q_tot - y) ** 2).sum().item()
                    count += 1
    learner.train(batch, t_env=0, episode_num=0)
    assert logger.stats["loss"][-1][1] == pytest.approx(expected_sq / count, rel=1e-5)


def test_hard_target_update_interval():
    learner, _ = make_learner(target_update_interval=10)
    batch = make_batch()

    def same():
        return all(
            torch.equal(a, b)
            for a, b in zip(learner.mac.parameters(), learner.target_mac.parameters(), strict=True)
        )

    learner.train(batch, 0, episode_num=5)
    assert not same()
    learner.train(batch, 0, episode_num=9)
    assert not same()
    learner.train(batch, 0, episode_num=10)
    assert same()
    assert all(
        torch.equal(a, b)
        for a, b in zip(learner.mixer.parameters(), learner.target_mixer.parameters(), strict=True)
    )


@pytest.mark.parametrize("tau", [0.0, 0.3, 1.0])
def test_soft_update(tau):
    src, tgt = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    before = copy.deepcopy(tgt)
    soft_update(tgt, src, tau)
    for new, old, s in zip(tgt.parameters(), before.parameters(), src.parameters(), strict=True):
        assert torch.allclose(new, (1 - tau) * old + tau * s, atol=1e-7)


def test_soft_mode_in_learner():
    learner, _ = make_learner(target_update_mode="soft", tau=0.5)
    old_target = [p.clone() for p in learner.target_mac.parameters()]
    learner.train(make_batch(), 0, episode_num=1)
    for new, old, online in zip(
        learner.target_mac.parameters(), old_target, learner.mac.parameters(), strict=True
    ):
        assert torch.allclose(new, 0.5 * old + 0.5 * online, atol=1e-6)


def test_gradient_clipping():
    learner, logger = make_learner(grad_norm_clip=1e-3)
    seen = []
    step = learner.optimiser.step

    def recording_step():
        seen.append(torch.norm(torch.stack([p.grad.norm() for p in learner.params])).item())
        step()

    learner.optimiser.step = recording_step
    learner.train(make_batch(), 0, 0)
    assert seen[0] <= 1e-3 * (1 + 1e-5)
    assert logger.stats["grad_norm"][-1][1] > 1e-3  # the reported norm is the one before clipping


def test_individual_rewards_iql():
    # Each agent's TD target holds its own reward: raising agent 1's reward by 5 raises agent 1's
    # one-step targets by 5 * (its standardisation: none here) and leaves the others' alone.
    learner, logger = make_learner(mixer=None, common_reward=False, td_lambda=0.0)
    batch = make_batch(individual=True)
    targets = learner.forward_and_targets(batch).targets
    changed = copy.deepcopy(batch)
    changed.data.transition_data["reward"][:, :, 1] += 5.0
    targets_changed = learner.forward_and_targets(changed).targets
    mask = valid_mask(batch)[..., 0].bool()
    assert targets.shape == (3, L - 1, N)
    diff = (targets_changed - targets)[mask]
    assert torch.allclose(diff[:, 1], torch.full_like(diff[:, 1], 5.0), atol=1e-5)
    assert torch.equal(diff[:, 0], torch.zeros_like(diff[:, 0])) and torch.equal(diff[:, 2], diff[:, 0])
    learner.train(batch, 0, 0)
    assert np.isfinite(logger.stats["loss"][-1][1])


def test_checkpoint_state_roundtrip(tmp_path):
    learner, _ = make_learner(mixer="qmix", standardise_rewards=True)
    learner.train(make_batch(), 0, 0)
    torch.save(learner.state_dict(), tmp_path / "l.th")
    other, _ = make_learner(mixer="qmix", standardise_rewards=True)
    other.load_state_dict(torch.load(tmp_path / "l.th", weights_only=True))
    for a, b in zip(learner.params, other.params, strict=True):
        assert torch.equal(a, b)
    assert other.train_steps == 1
    assert torch.equal(other.reward_rms.mean, learner.reward_rms.mean)


def test_time_limit_ends_bootstrap_only_when_asked():
    from utils.rl_utils import bootstrap_terminated

    b = make_batch(lengths=(7, 3), terminated=(False, True))  # episode_limit = L - 1 = 7
    cut = bootstrap_terminated(b, 7, time_limit_bootstrap=False)
    assert cut[0, :, 0].tolist() == [0, 0, 0, 0, 0, 0, 1]
    assert cut[1, :, 0].tolist() == [0, 0, 1, 0, 0, 0, 1]  # index 6 is padding there: masked
    assert bootstrap_terminated(b, 7, time_limit_bootstrap=True)[0].sum() == 0


def test_lambda_returns():
    from utils.rl_utils import lambda_returns

    g = torch.Generator().manual_seed(1)
    B, T, gamma = 3, 6, 0.9
    r = torch.randn(B, T, 1, generator=g)
    z = torch.randn(B, T + 1, 1, generator=g)
    d = torch.zeros(B, T, 1)
    d[0, 3] = 1  # episode 0 terminates at step 3; episode 1 and 2 run to the end
    m = torch.ones(B, T, 1)
    m[0, 4:] = 0
    one_step = r + gamma * (1 - d) * z[:, 1:]
    out0 = lambda_returns(r, d, m, z, gamma, 0.0)
    assert torch.allclose(out0 * m, one_step * m, atol=1e-6)
    out1 = lambda_returns(r, d, m, z, gamma, 1.0)
    mc0 = sum(gamma**k * r[0, k, 0] for k in range(4))  # discounted Monte-Carlo return
    assert out1[0, 0, 0].item() == pytest.approx(mc0.item(), rel=1e-5)
    # A non-terminated episode bootstraps from Z at the last step.
    mc1 = sum(gamma**k * r[1, k, 0] for k in range(T)) + gamma**T * z[1, T, 0]
    assert out1[1, 0, 0].item() == pytest.approx(mc1.item(), rel=1e-5)
    # The recursion, written out, for lambda = 0.6.
    lam = 0.6
    out = lambda_returns(r, d, m, z, gamma, lam)
    G = z[:, T] * (1 - d.sum(1))
    for t in reversed(range(T)):
        G = lam * gamma * G + m[:, t] * (r[:, t] + (1 - lam) * gamma * (1 - d[:, t]) * z[:, t + 1])
        assert torch.allclose(out[:, t], G, atol=1e-5)


def test_running_mean_std_counts_only_masked_entries():
    from utils.rl_utils import RunningMeanStd

    rms, seen = RunningMeanStd(), []
    g = torch.Generator().manual_seed(2)
    for _ in range(4):
        x = torch.randn(4, 6, 1, generator=g) * 3 + 1
        m = (torch.rand(4, 6, 1, generator=g) > 0.3).float()
        x_pad = torch.where(m > 0, x, torch.full_like(x, 1e3))  # padding must not count
        rms.update(x_pad, m)
        seen.append(x[m > 0])
    allx = torch.cat(seen).double()
    assert float(rms.mean) == pytest.approx(float(allx.mean()), rel=1e-4)
    assert float(rms.var) == pytest.approx(float(allx.var(unbiased=False)), rel=1e-4)


def test_unbiased_running_mean_std_follows_epymarls_recurrence():
    """standardise_rewards as EPyMARL computes it: each batch's sample variance (torch.var), merged
    by Chan's update from mean 0, variance 1, count 1e-4; one column per reward column."""
    from utils.rl_utils import RunningMeanStd

    rms = RunningMeanStd(shape=(3,), unbiased=True)
    mean, var, count = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), 1e-4
    g = torch.Generator().manual_seed(3)
    for scale in (1.0, 5.0, 0.5):
        x = (torch.randn(10, 25, 3, generator=g) * scale + torch.tensor([0.0, 2.0, -1.0])).double()
        rms.update(x)
        flat = x.reshape(-1, 3)
        b_mean, b_var, n = flat.mean(0), flat.var(0), flat.shape[0]
        delta, total = b_mean - mean, count + n
        mean = mean + delta * n / total
        var = (var * count + b_var * n + delta**2 * count * n / total) / total
        count = total
    assert torch.allclose(rms.mean, mean) and torch.allclose(rms.var, var)
    biased = RunningMeanStd(shape=(3,))
    biased.update(x)
    assert not torch.allclose(biased.var, var)  # the flag matters


def test_learner_standardises_each_reward_column():
    from learners.base import Learner

    batch = make_batch(individual=True)
    args = learner_args(standardise_rewards=True, common_reward=False)
    learner = Learner(None, batch.scheme, None, args)
    rewards, _, mask = learner.rewards_and_masks(batch)
    assert learner.reward_rms.mean.shape == (N,)
    for i in range(N):  # each agent's rewards standardised by its own statistics
        seen = batch["reward"][:, :-1, i][mask[..., 0] > 0].double()
        assert torch.allclose(
            rewards[..., i][mask[..., 0] > 0].double(), (seen - seen.mean()) / seen.std(), atol=1e-3
        )


@pytest.mark.parametrize("mixer", ["qmix", "vdn", None])
@pytest.mark.parametrize("time_limit_bootstrap", [True, False])
def test_transition_windows_train_like_whole_episodes(mixer, time_limit_bootstrap):
    """Every transition once, as [t, t + 1] windows, gives the loss and gradients of the
    whole-episode batch for a feed-forward agent (both average over the same transitions)."""
    from components.episode_buffer import ReplayBuffer

    episodes = make_batch(lengths=(5, 7, 3), terminated=(True, False, True))
    scheme = {k: v for k, v in episodes.scheme.items() if k != "filled"}
    buf = ReplayBuffer(scheme, {"agents": N}, 3, L)
    buf.insert_episode_batch(episodes)
    pairs = [(e, t) for e, n in enumerate((5, 7, 3)) for t in range(n)]
    ep, t = torch.tensor(pairs).T
    windows = buf.transition_windows(ep, t, None if time_limit_bootstrap else L - 1)
    kw = dict(mixer=mixer, agent="mlp", obs_last_action=False, time_limit_bootstrap=time_limit_bootstrap)
    torch.manual_seed(0)
    l1, g1 = grads_and_loss(*make_learner(**kw), episodes)
    torch.manual_seed(0)
    l2, g2 = grads_and_loss(*make_learner(**kw), windows)
    assert l1 == pytest.approx(l2, rel=1e-5)
    for a, c in zip(g1, g2, strict=True):
        assert torch.allclose(a, c, rtol=1e-4, atol=1e-6)
