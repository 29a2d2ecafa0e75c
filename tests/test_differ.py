"""DIFFER's q_divide_learner: gradient ratio, individual rewards, masks, selection modes and
schedules, and short runs with both runners."""

import copy
import glob
import json
import os
from types import SimpleNamespace

import pytest
import torch

import main
from controllers import REGISTRY as mac_REGISTRY
from helpers import N, learner_args, make_batch
from learners import REGISTRY as le_REGISTRY
from learners.selection import LEGACY_PER_BETA, per_beta, selected_ratio, selection_weights
from utils.logger import Logger, get_console_logger
from utils.rl_utils import bootstrap_values, valid_mask

GAMMA = 0.9


def make_divide_learner(mixer="qmix", selected="all", **kw):
    args = learner_args(
        mixer=mixer, agent="rnn", selected=selected, gamma=GAMMA, time_limit_bootstrap=True, t_max=1000, **kw
    )
    scheme = make_batch().scheme
    mac = mac_REGISTRY["basic_mac"](scheme, {"agents": N}, args)
    return le_REGISTRY["q_divide_learner"](mac, scheme, Logger(get_console_logger()), args)


def batch_with_death():
    b = make_batch(lengths=(5, 7, 3), terminated=(True, False, True), seed=3)
    b.data.transition_data["indi_terminated"][0, 2:, 1] = 1  # agent 1 of episode 0 dies at step 2
    return b


def by_hand(learner, batch):
    """rho (autograd Jacobian of the mixer), delta_tot and r_i from copies of the networks."""
    mac, target_mac = copy.deepcopy(learner.mac), copy.deepcopy(learner.target_mac)
    mixer, target_mixer = copy.deepcopy(learner.mixer), copy.deepcopy(learner.target_mixer)
    with torch.no_grad():
        out = mac.forward_seq(batch)
        q = torch.gather(out[:, :-1], 3, batch["actions"][:, :-1]).squeeze(3)
        q_next_all = bootstrap_values(out, target_mac.forward_seq(batch), batch["avail_actions"], True)
        y = (
            batch["reward"][:, :-1]
            + GAMMA
            * (1 - batch["terminated"][:, :-1].float())
            * target_mixer(q_next_all, batch["state"])[:, 1:]
        )
    leaf = q.clone().requires_grad_(True)
    q_tot = mixer(leaf, batch["state"][:, :-1])
    (jac,) = torch.autograd.grad(q_tot.sum(), leaf)
    delta = (q_tot - y).detach()
    D = batch["indi_terminated"][:, :-1].float()
    q_next = q_next_all[:, 1:]
    reward_i = -jac * delta + q - GAMMA * (1 - D) * q_next
    return jac, delta, reward_i


@pytest.mark.parametrize("mixer", ["qmix", "vdn"])
def test_ratio_and_individual_rewards_match_hand_computation(mixer):
    torch.manual_seed(0)
    learner = make_divide_learner(mixer)
    batch = batch_with_death()
    jac, delta, reward_i = by_hand(learner, batch)
    learner.train(batch, t_env=0, episode_num=0)
    last = learner.last
    mask = valid_mask(batch).expand(-1, -1, N) > 0
    keep = mask & (delta.abs() > 1e-4).expand(-1, -1, N)
    assert keep.sum() > 20
    assert torch.allclose(last["rho"][keep], jac[keep], atol=1e-5)
    if mixer == "vdn":
        assert torch.equal(
            last["rho"][mask & (delta != 0).expand(-1, -1, N)],
            torch.ones(int((mask & (delta != 0).expand(-1, -1, N)).sum())),
        )
    else:
        assert (last["rho"][mask] >= 0).all()  # QMIX is monotonic
    assert torch.allclose(last["delta_tot"][mask[..., :1]], delta[mask[..., :1]], atol=1e-5)
    assert torch.allclose(last["reward_i"][mask], reward_i[mask], atol=1e-5)
    # delta_i = rho * delta_tot whatever the individual terminations are
    indi = last["indi_mask"] > 0
    assert torch.allclose(last["delta_i"][indi], (last["rho"] * last["delta_tot"])[indi], atol=1e-5)


def test_dead_agent_later_steps_get_zero_weight():
    learner = make_divide_learner("qmix", selected="PER_weight")
    batch = batch_with_death()
    learner.train(batch, t_env=0, episode_num=0)
    m, w, d = learner.last["indi_mask"], learner.last["weights"], learner.last["delta_i"]
    assert m[0, :3, 1].tolist() == [1.0, 1.0, 1.0]  # the step where it dies is kept
    assert m[0, 3:, 1].sum() == 0 and w[0, 3:, 1].sum() == 0 and d[0, 3:, 1].abs().sum() == 0
    assert m[0, :5, 0].tolist() == [1.0] * 5  # its teammates go on
    assert m[2, 3:].sum() == 0  # padding after a 3-step episode


def test_mixer_and_agent_optimisers_are_separate():
    learner = make_divide_learner("qmix")
    batch = batch_with_death()
    mixer_before = copy.deepcopy(learner.mixer.state_dict())
    agent_before = copy.deepcopy(learner.mac.state_dict())
    learner.q_optimiser.step = lambda: None
    learner.train(batch, t_env=0, episode_num=0)
    assert all(torch.equal(agent_before[k], v) for k, v in learner.mac.state_dict().items())
    assert any(not torch.equal(mixer_before[k], v) for k, v in learner.mixer.state_dict().items())
    # the mixer's loss reached every mixer parameter (hypernetworks included)
    grads = [p.grad for p in learner.mixer.parameters()]
    assert grads and all(g is not None for g in grads) and all(g.abs().sum() > 0 for g in grads[:2])
    # and the other way round: a step of the agent's optimiser alone leaves the mixer as it was
    other = make_divide_learner("qmix")
    mixer_before = copy.deepcopy(other.mixer.state_dict())
    agent_before = copy.deepcopy(other.mac.state_dict())
    other.mixer_optimiser.step = lambda: None
    other.train(batch, t_env=0, episode_num=0)
    assert all(torch.equal(mixer_before[k], v) for k, v in other.mixer.state_dict().items())
    assert any(not torch.equal(agent_before[k], v) for k, v in other.mac.state_dict().items())


# --- selection ---------------------------------------------------------------------------------
def synthetic(seed=0, shape=(4, 6, 3)):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(shape)
    mask[0, 4:] = 0
    mask[-1, :, 1] = 0
    e = torch.rand(shape, generator=g) * mask
    return e, mask


def test_all_gives_unit_weights():
    e, mask = synthetic()
    assert torch.equal(selection_weights(e, mask, "all", 0.5), torch.ones_like(e))


@pytest.mark.parametrize("ratio", [0.3, 0.75, 1.0])
def test_greedy_selects_the_largest(ratio):
    e, mask = synthetic()
    w = selection_weights(e, mask, "greedy", ratio)
    n_sel = int(mask.sum().item() * ratio)
    assert int(w.sum()) == n_sel
    chosen, rest = e[w > 0], e[(w == 0) & (mask > 0)]
    assert rest.numel() == 0 or chosen.min() > rest.max()
    gw = selection_weights(e, mask, "greedy_weight", ratio)
    assert gw.max() == 1.0 and (gw[w == 0] == 0).all()
    assert selection_weights(e, mask, "greedy", 0.0).sum() == 0  # n_sel = 0: nothing, no error


@pytest.mark.parametrize("mode", ["PER_hard", "PER_weight", "PER"])
def test_per_draws_exactly_n_sel_from_valid_positions(mode):
    e, mask = synthetic()
    g = torch.Generator().manual_seed(1)
    w = selection_weights(e, mask, mode, 0.8, alpha=0.8, epsilon=0.01, beta=0.6, generator=g)
    n_sel = int(mask.sum().item() * 0.8)
    assert (w[mask == 0] == 0).all() and (w >= 0).all()
    if mode == "PER_hard":
        assert w.sum() == n_sel and torch.equal(w, w.round())
    if mode == "PER_weight":
        # counts times importance weights normalised to a maximum of 1 over the valid entries
        g = torch.Generator().manual_seed(1)
        counts = selection_weights(e, mask, "PER_hard", 0.8, alpha=0.8, epsilon=0.01, generator=g)
        assert counts.sum() == n_sel
        iw = w[counts > 0] / counts[counts > 0]
        assert iw.max() <= 1.0 + 1e-6 and iw.min() > 0
        p = ((e + 0.01 * mask) ** 0.8) * mask
        full = torch.where(mask > 0, (p.sum() / p.clamp_min(1e-30)) ** 0.6, torch.zeros_like(p))
        assert torch.allclose(iw, (full / full.max())[counts > 0], rtol=1e-5)
    if mode == "PER":
        # counts times (P / P_min)^-beta: dividing the weights back gives n_sel whole draws
        p = e * (mask > 0)
        probs = p / p.sum()
        iw = torch.where(probs > 0, (probs / probs[probs > 0].min()) ** -LEGACY_PER_BETA, torch.zeros_like(p))
        counts = torch.where(iw > 0, w / iw, torch.zeros_like(w))
        assert torch.allclose(counts, counts.round(), atol=1e-4) and counts.round().sum() == n_sel


def test_per_frequency_follows_priorities():
    e, mask = synthetic(shape=(2, 5, 2))
    g = torch.Generator().manual_seed(7)
    total = torch.zeros_like(e)
    rounds = 3000
    for _ in range(rounds):
        total += selection_weights(e, mask, "PER_hard", 1.0, alpha=0.8, epsilon=0.01, generator=g)
    freq = total / total.sum()
    p = ((e + 0.01 * mask) ** 0.8) * mask
    expected = p / p.sum()
    assert torch.allclose(freq, expected, atol=0.006), (freq - expected).abs().max()
    assert freq[mask == 0].sum() == 0


@pytest.mark.parametrize(
    "device",
    [
        "cpu",  # meta tensors cannot run the selection's data-dependent top-k
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
        ),
    ],
)
def test_selection_stays_on_the_input_device(device):
    # float64 inputs too: a rule that made its tensors anew (another device, the default dtype)
    # fails here on a CPU-only machine as well
    e, mask = synthetic()
    e, mask = e.to(device, torch.float64), mask.to(device, torch.float64)
    for mode in ("all", "greedy", "greedy_weight", "PER", "PER_hard", "PER_weight"):
        w = selection_weights(e, mask, mode, 0.5)
        assert w.device.type == device and w.shape == e.shape and w.dtype == torch.float64, mode


def test_warm_up_and_beta_schedules_hit_their_end_points():
    a = SimpleNamespace(
        selected_warm_up=True,
        selected_ratio=0.6,
        selected_ratio_start=0.8,
        selected_ratio_end=1.0,
        selected_warm_up_ratio=0.6,
        t_max=1000,
        selected_beta_start=0.6,
        selected_beta_end=1.0,
    )
    assert selected_ratio(a, 0) == pytest.approx(0.8)
    assert selected_ratio(a, 300) == pytest.approx(0.9)
    assert selected_ratio(a, 600) == pytest.approx(1.0)
    assert selected_ratio(a, 1000) == 1.0
    assert per_beta(a, 0) == pytest.approx(0.6) and per_beta(a, 1000) == pytest.approx(1.0)
    assert per_beta(a, 500) == pytest.approx(0.8)
    a.selected_warm_up = False
    assert selected_ratio(a, 0) == 0.6 and selected_ratio(a, 1000) == 0.6


# --- end to end ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "config,extra",
    [
        ("differ_qmix", []),
        ("differ_qmix_parallel", ["batch_size_run=2"]),
        ("differ_vdn", ["selected=greedy_weight"]),
        (
            "qmix",
            [
                "learner=q_divide_learner",
                "selected=PER_weight",
                "selected_warm_up=True",
                "selected_alpha=0.8",
                "save_model=True",
                "save_model_interval=100",
            ],
        ),
    ],
)
def test_short_runs_write_sacred_record(tmp_path, config, extra):
    argv = [
        f"--config={config}",
        "--env-config=mpe",
        "with",
        f"local_results_path={tmp_path}",
        "seed=1",
        "t_max=300",
        "test_interval=150",
        "test_nepisode=2",
        "log_interval=100",
        "runner_log_interval=100",
        "learner_log_interval=100",
        "batch_size=4",
        "buffer_size=50",
        "env_args.max_cycles=10",
        *extra,
    ]
    assert main.main(argv) == 0
    runs = glob.glob(os.path.join(str(tmp_path), "sacred", "*", "*", "*", "[0-9]*"))
    assert len(runs) == 1
    with open(os.path.join(runs[0], "run.json")) as f:
        assert json.load(f)["status"] == "COMPLETED"
    with open(os.path.join(runs[0], "metrics.json")) as f:
        metrics = json.load(f)
    for key in (
        "selected_ratio",
        "mixer_loss",
        "mixer_grad_norm",
        "mixer_td_error_abs",
        "q_loss",
        "q_grad_norm",
        "q_td_error_abs",
        "reward_i_mean",
        "q_selected_weight_mean",
        "test_return_mean",
    ):
        assert key in metrics, key
    if "save_model=True" in extra:  # resume from the checkpoint with both optimisers
        models = glob.glob(os.path.join(str(tmp_path), "models", "*"))
        assert main.main(argv + [f"checkpoint_path={models[0]}", "t_max=400"]) == 0


def test_iql_is_refused(capsys):
    assert main.main(["--config=iql", "with", "learner=q_divide_learner"]) == 2
    choices = "mixer=qatten or mixer=qmix or mixer=qplex or mixer=qplex_qatten or mixer=vdn"
    assert choices in capsys.readouterr().err
