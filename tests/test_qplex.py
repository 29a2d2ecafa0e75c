"""QPLEX: the mixer against a by-hand computation, its IGM property, the learner's targets against the
reference recipe, DIFFER's rho from its Jacobian, and short runs of the configs."""

import copy
import itertools

import pytest
import torch
import torch.nn.functional as F

from controllers import REGISTRY as mac_REGISTRY
from helpers import A, N, S, assert_trains, learner_args, make_args, make_batch
from learners import REGISTRY as le_REGISTRY
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.errors import ConfigError
from utils.logger import Logger, get_console_logger
from utils.rl_utils import valid_mask


def make_mixer(seed=0, n_agents=N, n_actions=A, **kw):
    torch.manual_seed(seed)
    args = make_args(n_agents=n_agents, n_actions=n_actions, state_shape=S, **kw)
    return mixer_REGISTRY["qplex"](args)


def head_mlp(kmlp, x, k):
    """Head k of a KernelMLP as a plain MLP with that head's slice of the weights."""
    w0, b0 = kmlp.weights[0], kmlp.biases[0]
    d1 = b0.shape[1]
    h = x @ w0[:, k * d1 : (k + 1) * d1] + b0[k]
    for w, b in zip(kmlp.weights[1:], kmlp.biases[1:], strict=True):
        h = torch.relu(h) @ w[k] + b[k]
    return h


def by_hand(mixer, q, states, actions, max_q):
    """Q_tot for [M, N] inputs, written out agent by agent and head by head."""
    sa = torch.cat([states, actions.reshape(states.shape[0], -1)], dim=1)
    out = []
    for m in range(states.shape[0]):
        s = states[m : m + 1]
        w = mixer.hyper_w_final(s)[0].abs() + 1e-10
        v = mixer.V(s)[0]
        lam = torch.zeros(N)
        for k in range(mixer.key.k):
            key = head_mlp(mixer.key, s, k)[0, 0].abs() + 1e-10
            ag = torch.sigmoid(head_mlp(mixer.agents, s, k)[0])
            ac = torch.sigmoid(head_mlp(mixer.action, sa[m : m + 1], k)[0])
            lam = lam + key * ag * ac
        total = 0.0
        for i in range(N):
            qi, vi = w[i] * q[m, i] + v[i], w[i] * max_q[m, i] + v[i]
            total = total + qi + (lam[i] - 1.0) * (qi - vi)
        out.append(total)
    return torch.stack(out)


def random_inputs(seed, m=6):
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(m, S, generator=g)
    acts = torch.randint(0, A, (m, N), generator=g)
    q = torch.randn(m, N, generator=g) * 3
    max_q = q + torch.rand(m, N, generator=g) * 2
    return states, F.one_hot(acts, A).float(), q, max_q


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_mixing_matches_hand_computation(layers):
    mixer = make_mixer(adv_hypernet_layers=layers, adv_hypernet_embed=8, num_kernel=3)
    states, onehot, q, max_q = random_inputs(layers)
    with torch.no_grad():
        got = mixer(q.view(2, 3, N), states.view(2, 3, S), onehot.view(2, 3, N, A), max_q.view(2, 3, N))
        want = by_hand(mixer, q, states, onehot, max_q)
    assert got.shape == (2, 3, 1)
    assert torch.allclose(got.reshape(-1), want, atol=1e-5)


def test_kernel_heads_are_initialised_like_separate_linears():
    mixer = make_mixer(adv_hypernet_layers=2, adv_hypernet_embed=200, num_kernel=4)
    w0, w1 = mixer.action.weights[0], mixer.action.weights[1]
    fan0 = S + N * A
    assert w0.shape == (fan0, 4 * 200) and w1.shape == (4, 200, N)
    assert w0.abs().max() <= fan0**-0.5 and w0.abs().max() > 0.9 * fan0**-0.5
    assert w1.abs().max() <= 200**-0.5 and w1.abs().max() > 0.9 * 200**-0.5


def test_greedy_joint_action_is_greedy_for_q_tot():
    # IGM: over every joint action, Q_tot is largest at the agents' own greedy actions, where the
    # advantage term vanishes and Q_tot = sum_i w_i max Q_i + v_i.
    n, a = 3, 3
    mixer = make_mixer(seed=1, n_agents=n, n_actions=a, adv_hypernet_layers=2, adv_hypernet_embed=16)
    g = torch.Generator().manual_seed(2)
    for _ in range(5):
        state = torch.randn(1, S, generator=g) * 2
        qs = torch.randn(n, a, generator=g) * 3  # each agent's Q over its actions
        best = qs.max(dim=1)
        joints = list(itertools.product(range(a), repeat=n))
        idx = torch.tensor(joints)  # [J, n]
        q_taken = qs[torch.arange(n), idx]  # [J, n]
        onehot = F.one_hot(idx, a).float()
        with torch.no_grad():
            q_tot = mixer(q_taken, state.expand(len(joints), S), onehot, best.values.expand(len(joints), n))
        greedy = joints.index(tuple(best.indices.tolist()))
        assert q_tot.argmax().item() == greedy
        assert (q_tot[greedy] > q_tot[[j for j in range(len(joints)) if j != greedy]]).all()
        w = mixer.hyper_w_final(state).abs() + 1e-10
        v = mixer.V(state)
        assert torch.allclose(q_tot[greedy], (w * best.values + v).sum(), atol=1e-5)


@pytest.mark.parametrize("minus_one", [True, False])
def test_jacobian_matches_autograd(minus_one):
    mixer = make_mixer(adv_hypernet_layers=2, is_minus_one=minus_one, is_stop_gradient=False)
    states, onehot, q, max_q = random_inputs(3)
    leaf = q.clone().requires_grad_(True)
    q_tot, jac = mixer.forward_with_jacobian(leaf, states, onehot, max_q)
    (auto,) = torch.autograd.grad(q_tot.sum(), leaf)
    assert torch.allclose(jac, auto, atol=1e-6)
    # With the reference's stop-gradient the training gradient keeps only w_i; the Jacobian is whole.
    mixer.stop_gradient = True
    leaf = q.clone().requires_grad_(True)
    q_tot2, jac2 = mixer.forward_with_jacobian(leaf, states, onehot, max_q)
    (auto2,) = torch.autograd.grad(q_tot2.sum(), leaf)
    w = mixer.hyper_w_final(states).abs() + 1e-10
    assert torch.allclose(auto2, w.detach(), atol=1e-6)
    assert torch.allclose(q_tot2, q_tot) and torch.allclose(jac2, jac)
    assert not torch.allclose(jac, w.detach(), atol=1e-3)


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="adv_hypernet_layers=4"):
        make_mixer(adv_hypernet_layers=4)
    with pytest.raises(ConfigError, match="num_kernel=0"):
        make_mixer(num_kernel=0)


def make_learner(name="q_learner", **kw):
    torch.manual_seed(0)
    args = learner_args(mixer="qplex", agent="rnn", gamma=0.9, t_max=1000, **kw)
    scheme = make_batch().scheme
    mac = mac_REGISTRY["basic_mac"](scheme, {"agents": N}, args)
    return le_REGISTRY[name](mac, scheme, Logger(get_console_logger()), args)


def reference_targets(learner, batch, double_q):
    """One-step targets the way the QPLEX authors' learner builds them."""
    mask_unavail = batch["avail_actions"] == 0
    with torch.no_grad():
        out = learner.mac.forward_seq(batch).masked_fill(mask_unavail, -9999999.0)
        tout = learner.target_mac.forward_seq(batch).masked_fill(mask_unavail, -9999999.0)
        tmax = tout.max(dim=3)[0]
        if double_q:
            act = out.argmax(dim=3, keepdim=True)
            chosen = torch.gather(tout, 3, act).squeeze(3)
        else:
            act, chosen = tout.argmax(dim=3, keepdim=True), tmax
        onehot = torch.zeros_like(tout).scatter_(3, act, 1.0)
        values = learner.target_mixer(chosen, batch["state"], onehot, tmax)
        return batch["reward"][:, :-1] + 0.9 * (1 - batch["terminated"][:, :-1].float()) * values[:, 1:]


@pytest.mark.parametrize("double_q", [True, False])
def test_learner_targets_follow_the_reference(double_q):
    learner = make_learner(double_q=double_q, td_lambda=0.0)
    batch = make_batch(seed=4)
    # a target network different from the online one, so double Q matters
    with torch.no_grad():
        for p in learner.target_mac.parameters():
            p.add_(torch.randn_like(p) * 0.3)
        for p in learner.target_mixer.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    out = learner.forward_and_targets(batch)
    want = reference_targets(learner, batch, double_q)
    m = valid_mask(batch) > 0
    assert torch.allclose(out.targets[m], want[m], atol=1e-4)
    # the online mixer sees the actions taken and the online greedy values over available actions
    assert torch.equal(out.mix_kwargs["actions"], batch["actions_onehot"][:, :-1])
    with torch.no_grad():
        q = learner.mac.forward_seq(batch).masked_fill(batch["avail_actions"] == 0, -9999999.0)
    mm = m.expand(-1, -1, N)
    assert torch.allclose(out.mix_kwargs["max_qs"][mm], q[:, :-1].max(dim=3)[0][mm])


def test_differ_rho_is_qplex_jacobian():
    learner = make_learner("q_divide_learner", selected="all", time_limit_bootstrap=True)
    batch = make_batch(seed=5)
    mixer = copy.deepcopy(learner.mixer)
    out = learner.forward_and_targets(batch)
    with torch.no_grad():
        _, jac = mixer.forward_with_jacobian(out.q_taken, batch["state"][:, :-1], **out.mix_kwargs)
    learner.train(batch, t_env=0, episode_num=0)
    m = valid_mask(batch).expand(-1, -1, N) > 0
    rho = learner.last["rho"]
    assert torch.allclose(rho[m], jac.clamp(-10, 10)[m], atol=1e-5)
    assert (rho[m] > 0).all() and rho[~m].abs().sum() == 0
    # delta_i = rho_i * delta_tot: the advantage weights reach the agents' errors
    indi = learner.last["indi_mask"] > 0
    assert torch.allclose(learner.last["delta_i"][indi], (rho * learner.last["delta_tot"])[indi], atol=1e-5)


@pytest.mark.parametrize("config", ["qplex", "qplex_pymarl", "differ_qplex"])
def test_configs_train_on_mpe(tmp_path, config):
    assert_trains(
        tmp_path,
        [
            f"--config={config}",
            "--env-config=mpe",
            "with",
            "t_max=300",
            "batch_size=4",
            "buffer_size=8",
            "test_interval=300",
            "test_nepisode=2",
            "log_interval=300",
            "epsilon_anneal_time=100",
        ],
    )
