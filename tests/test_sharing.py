"""PER over episodes, schedule_horizon, step fields (visible, pos) and selective experience
sharing in the individual-TD learner (learners/sharing.py)."""

import copy
import glob
import json
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import main
from assembly import build
from components.episode_buffer import EpisodeBatch, ReplayBuffer
from components.prioritised_buffer import PrioritisedReplayBuffer
from components.schedules import horizon, linear
from controllers import REGISTRY as mac_REGISTRY
from envs import REGISTRY as env_REGISTRY
from envs import multiagentenv
from helpers import N, learner_args, main_in_process_of_its_own, make_args, make_batch
from learners import REGISTRY as le_REGISTRY
from learners.selection import per_beta, selected_ratio
from learners.sharing import SHARE_RULES, Window, share_probabilities, share_ratio
from utils.logger import Logger, get_console_logger

# --- short runs ------------------------------------------------------------------------------

BRIEF = [
    "--env-config=skirmish",
    "with",
    "env_args.map_name=3m",
    "t_max=3000",
    "seed=7",
    "test_interval=1000",
    "test_nepisode=4",
    "log_interval=1000",
    "learner_log_interval=200",
    "runner_log_interval=500",
    "batch_size=8",
    "buffer_size=64",
]


def metrics_of(tmp_path, config, *extra):
    folder = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
    assert main.main([f"--config={config}", *BRIEF, f"local_results_path={folder}", *extra]) == 0
    (path,) = glob.glob(os.path.join(folder, "sacred", "**", "metrics.json"), recursive=True)
    with open(path) as f:
        return {k: v["values"] for k, v in json.load(f).items()}


def without_share_stats(metrics):
    return {k: v for k, v in metrics.items() if not k.startswith("share_")}


def test_no_sharing_and_nobody_in_range_equal_differ_and_unbounded_radius_equals_all(tmp_path):
    differ = metrics_of(tmp_path, "differ_qmix")
    assert metrics_of(tmp_path, "inspire_qmix", "share_rule=none") == differ
    # radius 0 (strictly closer: nobody), fallback drop: the weights are DIFFER's alone
    zero = metrics_of(tmp_path, "inspire_qmix", "share_to=radius", "share_radius=0", "share_fallback=drop")
    assert without_share_stats(zero) == differ
    assert set(zero["share_fallback_rate"]) == {1.0} and set(zero["share_extra_weight"]) == {0.0}
    shared = metrics_of(tmp_path, "inspire_qmix")
    assert shared["q_loss"] != differ["q_loss"]  # sharing does change training
    assert metrics_of(tmp_path, "inspire_qmix", "share_to=radius", "share_radius=.inf") == shared


def test_the_researchers_command_runs_on_skirmish_and_stops_in_one_line_on_sc2(tmp_path):
    argv = ["--config=inspire_qmix", "--env-config=skirmish", "with", "env_args.map_name=2s3z"]
    short = [
        "t_max=300",
        "test_nepisode=2",
        "batch_size=2",
        "buffer_size=8",
        f"local_results_path={tmp_path}",
    ]
    assert main.main(argv + short + ["share_to=sight"]) == 0
    # the command line, in a process of its own: this one may have imported protobuf already with
    # a runtime StarCraft II's protocol files refuse (tests/test_sc2.py names that case)
    done = main_in_process_of_its_own(
        ["--config=inspire_qmix", "--env-config=sc2", "with", "env_args.map_name=2s3z", "t_max=3005000"]
    )
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1 and "SMAC" in err[0], done.stderr


def test_an_env_without_the_field_refuses_before_the_run(tmp_path, capsys):
    assert main.main(["--config=inspire_qmix", "--env-config=mpe", "with", "share_to=sight"]) == 2
    err = capsys.readouterr().err
    assert "visible" in err and "env mpe does not record" in err and "Started run" not in err


# --- PER ---------------------------------------------------------------------------------------


def per_buffer(n, alpha, beta=0.5, priorities=None):
    scheme = {"x": {"vshape": (1,)}}
    buf = PrioritisedReplayBuffer(scheme, {"agents": 1}, n, 3, alpha=alpha, epsilon=0.0, beta=lambda t: beta)
    b = EpisodeBatch(scheme, {"agents": 1}, n, 3)
    b.update({"x": np.arange(n, dtype=np.float32).reshape(n, 1, 1).repeat(3, 1)}, ts=slice(0, 3))
    buf.insert_episode_batch(b)
    if priorities is not None:
        buf.learn(torch.arange(n), {"priorities": torch.as_tensor(priorities)})
    return buf


def test_per_draws_in_proportion_to_p_alpha_and_weights_are_normalised():
    np.random.seed(0)
    prio = np.array([0.1, 0.5, 1.0, 2.0, 4.0, 0.05, 3.0, 1.5])
    alpha, beta = 0.7, 0.4
    buf = per_buffer(len(prio), alpha, beta, prio)
    p = prio**alpha / (prio**alpha).sum()
    counts = np.zeros(len(prio))
    for _ in range(12_500):  # 100,000 draws, a batch of 8 at a time
        s = buf.sample(8)
        ids = s.ep_ids.numpy()
        assert np.array_equal(s["x"][:, 0, 0].numpy(), ids)  # the batch holds those episodes
        counts += np.bincount(ids, minlength=len(prio))
        n = len(prio)
        expected_w = (n * p[ids]) ** -beta / ((n * p) ** -beta).max()
        assert np.allclose(s.is_weights.numpy(), expected_w, rtol=1e-5)
    draws = counts.sum()
    se = np.sqrt(draws * p * (1 - p))
    assert draws == 100_000 and np.all(np.abs(counts - draws * p) < 3 * se)


def test_per_with_alpha_0_draws_as_the_uniform_buffer():
    np.random.seed(1)
    n, bs, reps = 10, 4, 5000
    per = per_buffer(n, 0.0, priorities=np.linspace(0.1, 9, n))
    uniform = ReplayBuffer({"x": {"vshape": (1,)}}, {"agents": 1}, n, 3)
    uniform.insert_episode_batch(per.episodes(range(n), 3))
    p = bs / n  # each episode's share of draws, for both
    for buf in (per, uniform):
        counts = np.zeros(n)
        for _ in range(reps):
            counts += np.bincount(buf.sample(bs).ep_ids.numpy(), minlength=n)
        se = np.sqrt(reps * p * (1 - p))
        assert np.all(np.abs(counts - reps * p) < 3 * se)
    assert torch.equal(per.sample(bs).is_weights, torch.ones(bs))


def test_new_episodes_enter_at_the_largest_priority_and_checkpoints_keep_them():
    buf = per_buffer(6, 0.6, priorities=[0.5, 3.0, 1.0, 1.0, 1.0, 1.0])
    assert buf.max_priority == 3.0
    again = per_buffer(6, 0.6)
    again.load_state_dict(copy.deepcopy(buf.state_dict()))
    assert np.array_equal(again.priorities, buf.priorities) and again.max_priority == 3.0


def test_a_per_learner_returns_each_episodes_priority():
    torch.manual_seed(0)
    args = learner_args(mixer="qmix", agent="rnn", use_per=True, t_max=1000)
    batch = make_batch()
    mac = mac_REGISTRY["basic_mac"](batch.scheme, {"agents": N}, args)
    learner = le_REGISTRY["q_learner"](mac, batch.scheme, Logger(get_console_logger()), args)
    before = copy.deepcopy(learner)
    out = before.forward_and_targets(batch)
    with torch.no_grad():
        td = (before.mixer(out.q_taken, batch["state"][:, :-1]) - out.targets) * out.mask
    expected = td.abs().sum((1, 2)) / out.mask[:, :, 0].sum(1).sqrt()
    feedback = learner.train(batch, 0, 0)
    assert torch.allclose(feedback["priorities"], expected, atol=1e-6)
    learner.args.use_per = False
    assert learner.train(batch, 0, 0) is None


def test_per_qmix_trains(tmp_path):
    m = metrics_of(tmp_path, "per_qmix")
    assert "loss" in m and all(np.isfinite(m["loss"]))


# --- schedule_horizon --------------------------------------------------------------------------


def test_schedule_horizon_gives_a_longer_runs_schedules_at_every_step():
    base = dict(
        selected_warm_up=True, selected_ratio=0.6, selected_ratio_start=0.8, selected_ratio_end=1.0,
        selected_warm_up_ratio=0.6, selected_beta_start=0.6, selected_beta_end=1.0,
        share_ratio_start=0.0, share_ratio_end=0.5, share_warm_up_ratio=0.6,
    )  # fmt: skip
    short = SimpleNamespace(**base, t_max=1_000_000, schedule_horizon=2_050_000)
    full = SimpleNamespace(**base, t_max=2_050_000, schedule_horizon=None)
    for t in range(0, 1_000_001, 997):
        assert selected_ratio(short, t) == selected_ratio(full, t)
        assert per_beta(short, t) == per_beta(full, t)
        assert share_ratio(short, t) == share_ratio(full, t)
        assert linear(0.4, 1.0, t, horizon(short)) == linear(0.4, 1.0, t, horizon(full))
    assert selected_ratio(short, 1_000_000) < 1.0  # not at the end of its warm-up, as a 1M run would be


# --- SUPER's rules -------------------------------------------------------------------------------


def rule_ctx(e, x=None, ratio=1.0, b=0.1, scale="std", temperature=1.0, window=None, seed=0):
    mask = torch.ones_like(e)
    args = SimpleNamespace(share_bandwidth=b, share_gaussian_scale=scale, share_temperature=temperature)
    g = torch.Generator().manual_seed(seed)
    return SimpleNamespace(
        e=e, x=e if x is None else x, mask=mask, args=args, ratio=ratio,
        window=window or Window(e.shape[2], 1500), generator=g,
    )  # fmt: skip


def test_quantile_and_gaussian_share_b_once_the_window_is_full():
    torch.manual_seed(0)
    window_q, window_g = Window(2, 1500), Window(2, 1500)
    for step in range(6):
        errors = torch.randn(4, 100, 2).abs() * 3  # 400 fresh |errors| per agent a batch
        shared = SHARE_RULES["quantile"](rule_ctx(errors, window=window_q))
        normal = 10 + 2 * torch.randn(4, 100, 2)  # errors drawn from a normal
        shared_g = SHARE_RULES["gaussian"](rule_ctx(normal, window=window_g))
        if step >= 4:  # 1500 values each
            assert abs(shared.mean().item() - 0.1) <= 0.02
            assert abs(shared_g.mean().item() - 0.1) <= 0.02


def test_gaussian_with_the_variance_quirk_shares_fewer_when_the_spread_exceeds_one():
    torch.manual_seed(1)
    window = Window(1, 1500)
    normal = 10 + 2 * torch.randn(4, 400, 1)
    shared = SHARE_RULES["gaussian"](rule_ctx(normal, window=window, scale="variance"))
    assert shared.mean().item() < 0.01  # threshold mean + 1.28 * 4 instead of + 1.28 * 2


def test_stochastic_shares_b_n_in_expectation():
    torch.manual_seed(2)
    errors = torch.rand(8, 50, 3) * 5
    b, reps = 0.1, 200
    total = sum(SHARE_RULES["stochastic"](rule_ctx(errors, b=b, seed=s)).sum((0, 1)) for s in range(reps))
    p = (b * 400 * errors / errors.sum((0, 1), keepdim=True)).clamp(max=1.0)
    mean, var = p.sum((0, 1)), (p * (1 - p)).sum((0, 1))
    assert torch.all((total / reps - mean).abs() < 3 * torch.sqrt(var / reps))
    assert torch.allclose(mean, torch.full((3,), b * 400), rtol=0.02)  # b n, none clipped here


# --- the researcher's density rules ----------------------------------------------------------------


def by_hand_density(x, temperature):
    """Version 1 for one agent's errors x [T] over one batch of identical episodes."""
    mu, var = x.mean(), x.var()
    t2v = temperature**2 * var
    dens = np.exp(-((x - mu) ** 2) / (2 * t2v)) / np.sqrt(2 * np.pi * t2v)
    shifted = -dens - (-dens).min()
    return shifted / (shifted.sum() + 1e-8)


@pytest.mark.parametrize("temperature", [0.6, 1.0, 1.4])
def test_density_shares_far_from_mean_errors_in_proportion_to_the_formula(temperature):
    x = np.array([-3.0, -1.0, -0.2, 0.0, 0.1, 0.5, 1.5, 4.0], dtype=np.float64)
    episodes = 4000
    xt = torch.as_tensor(x, dtype=torch.float32).view(1, -1, 1).expand(episodes, -1, 1).contiguous()
    counts = SHARE_RULES["density"](rule_ctx(xt.abs(), x=xt, ratio=1.0, temperature=temperature))
    draws = episodes * len(x)  # ratio 1: one draw per valid step
    assert counts.sum().item() == draws
    freq = counts.sum((0, 2)).numpy() / draws
    prob = by_hand_density(x, temperature)
    se = np.sqrt(prob * (1 - prob) / draws)
    assert np.all(np.abs(freq - prob) < 3 * se + 1e-9)
    assert freq[-1] > freq[3] and freq[0] > freq[4]  # far from the mean: shared more often
    shifted = torch.as_tensor(prob * 7.0).view(1, -1, 1)  # any scale: normalised over the steps
    probs = share_probabilities(shifted, torch.ones_like(shifted))
    assert torch.allclose(probs.view(-1), torch.as_tensor(prob), atol=1e-6)


def test_joint_density_sums_every_agents_shifted_density():
    x = torch.tensor([[[-2.0, 0.0], [0.0, 1.0], [1.0, 3.0], [3.0, -1.0]]]).expand(3000, -1, -1).contiguous()
    counts = SHARE_RULES["joint_density"](rule_ctx(x.abs(), x=x, ratio=1.0))
    xs = x[0].numpy().astype(np.float64)
    mu, var = xs.mean(0), xs.var(0)
    for i in range(2):
        total = np.zeros(4)
        for j in range(2):
            dens = np.exp(-((xs[:, i] - mu[j]) ** 2) / (2 * var[j])) / np.sqrt(2 * np.pi * var[j])
            total += -dens - (-dens).min()
        prob = total / (total.sum() + 1e-8)
        freq = counts[..., i].sum(0).numpy() / (3000 * 4)
        assert np.all(np.abs(freq - prob) < 3 * np.sqrt(prob * (1 - prob) / 12000) + 1e-9)


# --- positions and visibility ----------------------------------------------------------------------


def test_visible_and_pos_are_the_envs_at_every_step_deaths_included():
    env = env_REGISTRY["skirmish"](map_name="3m", seed=3)
    spec = env.get_env_info()["step_fields"]
    assert spec == {
        "visible": {"vshape": (3,), "dtype": "uint8"},
        "pos": {"vshape": (2,), "dtype": "float32"},
    }
    rng = np.random.default_rng(0)
    steps, deaths = 0, 0
    while steps < 200:
        env.reset()
        done = False
        while not done and steps < 200:
            got = env.get_step_fields(("visible", "pos"))
            vis = env.get_visibility_matrix()[:, : env.n_agents]
            assert np.array_equal(got["visible"], vis.astype(np.uint8))
            for i in range(env.n_agents):
                u = env.get_unit_by_id(i)
                assert tuple(got["pos"][i]) == (np.float32(u.pos.x), np.float32(u.pos.y))
                if u.health == 0:
                    deaths += 1
                    assert not got["visible"][i].any() and not got["visible"][:, i].any()
            avail = np.asarray(env.get_avail_actions())
            actions = [rng.choice(np.flatnonzero(a)) for a in avail]
            _, done, _ = env.step(actions)
            steps += 1
    assert deaths > 0


CLOCK = ((1,), "float32", "a test field: the env's step count")


class ClockEnv(multiagentenv.MultiAgentEnv):
    """A tiny env with one more step field, declared once (step_fields and get_step_fields)."""

    step_fields = ("clock",)

    def __init__(self, seed=0, **_):
        self.n_agents, self.n_actions, self.episode_limit, self.t = 2, 3, 9, 0
        self.length = 4 + (seed or 0) % 3

    def reset(self):
        self.t = 0

    def step(self, actions):
        self.t += 1
        return 1.0, self.t >= self.length, {}

    def get_obs(self):
        return np.full((2, 3), self.t, dtype=np.float32)

    def get_obs_size(self):
        return 3

    def get_state(self):
        return np.array([self.t], dtype=np.float32)

    def get_state_size(self):
        return 1

    def get_avail_actions(self):
        return np.ones((2, 3), dtype=np.uint8)

    def get_total_actions(self):
        return 3

    def get_indi_terminated(self):
        return np.zeros(2, dtype=np.uint8)

    def get_step_fields(self, names):
        return {"clock": np.full((2, 1), self.t, dtype=np.float32)}


@pytest.mark.parametrize("runner, n", [("episode", 1), ("parallel", 3), ("vector", 3)])
def test_a_new_step_field_declared_once_is_recorded_at_every_step_by_every_runner(monkeypatch, runner, n):
    monkeypatch.setitem(multiagentenv.STEP_FIELDS, "clock", CLOCK)
    monkeypatch.setitem(env_REGISTRY, "clock_env", ClockEnv)
    args = make_args(
        env="clock_env", env_args={"seed": 1}, runner=runner, batch_size_run=n, record_fields=["clock"],
        agent="mlp", mixer=None, buffer_size=8,
    )  # fmt: skip
    parts = build(args, Logger(get_console_logger()))
    try:
        batch = parts.runner.run(test_mode=False)
    finally:
        parts.runner.close_env()
    filled = batch["filled"][:, :, 0].bool()
    clock = batch["clock"][:, :, 0, 0]
    steps = torch.arange(batch.max_seq_length).expand_as(clock).float()
    assert filled.sum() > n * 4
    assert torch.equal(clock[filled], steps[filled])  # every step, the final observation's too
    assert parts.buffer.scheme["clock"]["from_env"]


# --- the receiver target ---------------------------------------------------------------------------


def receiver_learner(seed, **extra):
    """A q_divide_learner with one network per agent and the receiver target on a random batch."""
    torch.manual_seed(seed)
    args = learner_args(
        mixer="qmix", agent="rnn", selected="all", agent_param_sharing=False, share_rule="all",
        share_target="receiver", t_max=1000, **extra,
    )  # fmt: skip
    batch = make_batch()
    mac = mac_REGISTRY["basic_mac"](batch.scheme, {"agents": N}, args)
    learner = le_REGISTRY["q_divide_learner"](mac, batch.scheme, Logger(get_console_logger()), args)
    return args, batch, mac, learner


def individual_errors(learner, batch):
    out = learner.forward_and_targets(batch)
    return learner.individual_errors(batch, out, learner.team_step(batch, out))


def test_receiver_term_moves_only_the_receivers_network():
    _, batch, mac, learner = receiver_learner(0)
    indi = individual_errors(learner, batch)
    senders = torch.zeros_like(indi.mask)
    senders[..., 0] = indi.mask[..., 0]  # agent 0 shares every valid step
    receivers = torch.zeros(*indi.mask.shape, N)
    receivers[..., 0, 1] = 1.0  # ... with agent 1 only
    shared = SimpleNamespace(senders=senders, receivers=receivers)
    for p in mac.parameters():
        p.grad = None
    learner.receiver_loss(batch, indi.reward_i, indi.terminated, shared).backward()
    norms = [
        sum(p.grad.abs().sum().item() for p in a.parameters() if p.grad is not None) for a in mac.agent.agents
    ]
    assert norms[1] > 0 and all(norms[i] == 0 for i in range(N) if i != 1)


def test_receiver_term_equals_each_pair_through_the_receivers_own_network():
    """The receiver term, every shift through the networks in one stacked call, equals the sum
    over (sender i, receiver j) of net j on i's inputs with a one-step target through j's target
    network (double Q), weighted by how often i shared each step with j; the gradients too."""
    args, batch, mac, learner = receiver_learner(1, double_q=True)
    for p in learner.target_mac.parameters():  # a target network that differs from the online one
        p.data.add_(0.1 * torch.randn_like(p))
    indi = individual_errors(learner, batch)
    g = torch.Generator().manual_seed(2)
    senders = torch.randint(0, 3, indi.mask.shape, generator=g).float() * indi.mask
    receivers = torch.bernoulli(torch.full((*indi.mask.shape, N), 0.5), generator=g)
    receivers = receivers * (1 - torch.eye(N))
    receivers[..., 2, :] = 0.0  # agent 2 never sends: one shift carries less
    shared = SimpleNamespace(senders=senders, receivers=receivers)

    def grads(loss):
        for p in mac.parameters():
            p.grad = None
        loss.backward()
        return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in mac.parameters()]

    got = learner.receiver_loss(batch, indi.reward_i, indi.terminated, shared)
    got_grads = grads(got)

    b, n = batch.batch_size, N
    rows = mac.build_seq_inputs(batch).view(b, n, batch.max_seq_length, -1)
    actions, avail = batch["actions"][:, :-1].long(), batch["avail_actions"]
    expected = torch.zeros(())
    for j in range(n):
        net, target_net = mac.agent.agents[j], learner.target_mac.agent.agents[j]
        for i in range(n):
            if i == j:
                continue
            q, _ = net(rows[:, i], net.init_hidden(b))  # [B, T + 1, A]
            with torch.no_grad():
                q_target, _ = target_net(rows[:, i], target_net.init_hidden(b))
                chosen = q.detach().masked_fill(avail[:, :, i] == 0, -1e9).argmax(-1, keepdim=True)
                next_value = torch.gather(q_target, 2, chosen).squeeze(2)[:, 1:]
                y = indi.reward_i[..., i] + args.gamma * (1 - indi.terminated[..., i]) * next_value
            q_taken = torch.gather(q[:, :-1], 2, actions[:, :, i]).squeeze(2)
            weight = senders[..., i] * receivers[:, :, i, j]
            expected = expected + (weight * (q_taken - y) ** 2).sum()
    expected_grads = grads(expected)
    assert got.item() > 0
    assert torch.allclose(got, expected, rtol=1e-5)
    for a, e in zip(got_grads, expected_grads, strict=True):
        assert torch.allclose(a, e, rtol=1e-4, atol=1e-6)


def test_receiver_needs_one_network_per_agent(capsys):
    assert main.main(["--config=super_qmix", "with", "share_target=receiver"]) == 2
    assert "agent_param_sharing=False" in capsys.readouterr().err


# --- sparse rewards ---------------------------------------------------------------------------------


@pytest.mark.parametrize("env_name, map_name", [("skirmish", "3m"), ("skirmish_v2", None)])
def test_reward_sparse_gives_smacs_values(env_name, map_name):
    kwargs = {"map_name": map_name, "seed": 5, "reward_sparse": True}
    if env_name == "skirmish_v2":
        kwargs = {"scenario": "protoss_5_vs_5", "seed": 5, "reward_sparse": True}
    env = env_REGISTRY[env_name](**kwargs)
    rng = np.random.default_rng(1)
    ends = set()
    for _ in range(100):
        env.reset()
        done, rewards, info = False, [], {}
        while not done:
            actions = [rng.choice(np.flatnonzero(a)) for a in np.asarray(env.get_avail_actions())]
            r, done, info = env.step(actions)
            rewards.append(r)
        # SMAC: 0 until the end; +1 a win, -1 a defeat, 0 a time-out; then reward_scale's division
        scale = env.max_reward / env.reward_scale_rate
        assert all(r == 0 for r in rewards[:-1])
        won = info.get("battle_won", False)
        lost = not won and env._episode_steps < env.episode_limit
        assert rewards[-1] == pytest.approx((1 if won else -1 if lost else 0) / scale)
        ends.add(1 if won else -1 if lost else 0)
    assert -1 in ends  # random play loses


def sharer_args(**changes):
    """The keys Sharer reads: share with every living teammate, every step, weight 1."""
    base = dict(
        seed=1, share_window=10, share_rule="all", share_to="all", share_fallback="drop",
        receive_rule="all", share_control="none", share_weight=1.0, share_ratio_start=0.0,
        share_ratio_end=0.5, share_warm_up_ratio=0.6, t_max=100, schedule_horizon=None,
    )  # fmt: skip
    return SimpleNamespace(**{**base, **changes})


def test_all_in_range_counts_the_shared_steps_whose_sender_has_living_teammates():
    """share_all_in_range: of the shared steps at which the sender has a living teammate, those
    at which every living teammate is in sight; a sender alone counts in neither part."""
    from learners.sharing import Sharer

    args = sharer_args(share_to="sight")
    n = 3
    mask = torch.zeros(1, 3, n)
    mask[0, 0] = 1.0  # step 0: all three alive
    mask[0, 1] = 1.0  # step 1: all three alive
    mask[0, 2, 0] = 1.0  # step 2: agent 0 alone
    visible = torch.zeros(1, 4, n, n)
    visible[0, 0] = 1.0 - torch.eye(n)  # step 0: everyone sees everyone
    visible[0, 1, 0, 1] = visible[0, 1, 1, 0] = 1.0  # step 1: 0 and 1 see each other, 2 sees nobody
    out = Sharer(args, n, torch.device("cpu")).share(torch.randn(1, 3, n), mask, {"visible": visible}, 0)
    # shared steps with a living teammate: agents 0-2 at steps 0 and 1 (6); all in sight: all of
    # step 0 (3) and none of step 1 (each misses 2, or 2 misses both)
    assert out.stats["share_all_in_range"].item() == pytest.approx(3 / 6)
    assert out.stats["share_fallback_rate"].item() == pytest.approx(2 / 7)  # agent 2 at step 1, agent 0 alone
    # nothing shared: the rates over shared steps are not logged (a 0 would read as "nobody in range")
    none = Sharer(args, n, torch.device("cpu")).share(torch.randn(1, 3, n), mask * 0, {"visible": visible}, 0)
    assert set(none.stats) == {"share_fraction", "share_extra_weight"}
    assert none.stats["share_fraction"].item() == 0 and none.stats["share_extra_weight"].item() == 0
    # a sender alone at every shared step: shared, but no rate of teammates in range
    alone = Sharer(args, n, torch.device("cpu")).share(
        torch.randn(1, 3, n), mask * (torch.arange(3) == 2).view(1, 3, 1), {"visible": visible}, 0
    )
    assert "share_all_in_range" not in alone.stats and alone.stats["share_fallback_rate"].item() == 1.0


def test_share_weight_scales_each_shared_copy_and_the_mass_control_moves_the_same_weight():
    from learners.sharing import Sharer

    def shared(weight, control="none"):
        args = sharer_args(seed=3, share_control=control, share_weight=weight)
        mask = torch.ones(2, 5, 3)
        mask[1, 3:] = 0.0  # a short episode
        mask[0, 2, 1] = 0.0  # a dead agent
        delta = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0))
        return Sharer(args, 3, torch.device("cpu")).share(delta, mask, {}, 0)

    one, half = shared(1.0), shared(0.5)
    assert one.extra.sum() > 0
    assert torch.equal(half.extra, 0.5 * one.extra) and torch.equal(half.receivers, one.receivers)
    assert half.stats["share_extra_weight"].item() == pytest.approx(
        0.5 * one.stats["share_extra_weight"].item()
    )
    assert shared(0.0).extra.sum() == 0
    moved_one, moved_half = shared(1.0, "mass"), shared(0.5, "mass")  # same generator: same places
    assert torch.equal(moved_half.extra, 0.5 * moved_one.extra)
    assert moved_half.extra.sum().item() == pytest.approx(half.extra.sum().item())


def test_share_weight_scales_the_receivers_term_and_zero_trains_as_differ(tmp_path):
    args, batch, _, learner = receiver_learner(0)
    indi = individual_errors(learner, batch)
    senders = indi.mask.clone()
    receivers = (1 - torch.eye(N)).expand(*indi.mask.shape, N).clone()
    shared = SimpleNamespace(senders=senders, receivers=receivers)
    full = learner.receiver_loss(batch, indi.reward_i, indi.terminated, shared)
    args.share_weight = 0.25
    assert full.item() > 0
    assert learner.receiver_loss(batch, indi.reward_i, indi.terminated, shared).item() == pytest.approx(
        0.25 * full.item(), rel=1e-6
    )
    # on the researcher's learner, weight 0 trains exactly as DIFFER (only the share_ logs differ)
    zero = metrics_of(tmp_path, "inspire_qmix", "share_weight=0")
    assert without_share_stats(zero) == metrics_of(tmp_path, "differ_qmix")
    assert set(zero["share_extra_weight"]) == {0.0} and max(zero["share_fraction"]) > 0


def test_share_statistics_are_logged(tmp_path):
    m = metrics_of(tmp_path, "inspire_qmix", "share_to=sight", "share_control=mass")
    for key in ("share_fraction", "share_receivers_mean", "share_fallback_rate", "share_all_in_range",
                "share_extra_weight"):  # fmt: skip
        assert key in m, key
    assert all(0 <= v <= 1 for v in m["share_all_in_range"])
    assert math.isfinite(sum(m["share_extra_weight"]))


def test_the_decomposition_diagnostics_are_what_the_update_used():
    """rho_abs_mean (how much the mixer reads the agents' utilities), delta_i_mean and the extra-
    weighted share_delta_i_mean: the signed mean of delta_i where sharing put its extra weight."""
    torch.manual_seed(0)
    args = learner_args(
        mixer="qmix", agent="rnn", selected="all", share_rule="density", share_ratio_start=0.5,
        share_target="reweight", t_max=1000,
    )  # fmt: skip
    batch = make_batch()
    mac = mac_REGISTRY["basic_mac"](batch.scheme, {"agents": N}, args)
    learner = le_REGISTRY["q_divide_learner"](mac, batch.scheme, Logger(get_console_logger()), args)
    learner.train(batch, t_env=0, episode_num=0)
    last, stats = learner.last, {k: v[-1][1] for k, v in learner.logger.stats.items()}
    mask, delta, extra = last["indi_mask"], last["delta_i"], last["shared"].extra
    assert extra.sum() > 0 and (extra * (1 - mask)).sum() == 0
    assert stats["rho_abs_mean"] == pytest.approx(((last["rho"].abs() * mask).sum() / mask.sum()).item())
    assert stats["rho_abs_mean"] > 0
    assert stats["delta_i_mean"] == pytest.approx((delta.sum() / mask.sum()).item())
    weighted = ((extra * delta).sum() / extra.sum()).item()
    assert stats["share_delta_i_mean"] == pytest.approx(weighted)
    assert weighted != pytest.approx(stats["delta_i_mean"])  # the density rule is not uniform


@pytest.mark.parametrize(
    "env_config, extra",
    [
        ("mpe", ["runner=vector", "batch_size_run=2"]),  # mpe2 itself: its NumPy port has no positions
        ("gymma", ["env_args.key=lbforaging:Foraging-8x8-2p-3f-v3"]),
        ("gymma", ["env_args.key=rware:rware-tiny-2ag-v2", "env_args.time_limit=50"]),
        ("vmas", ["runner=vector", "batch_size_run=2"]),  # VMAS's tensor path
    ],
)
def test_positions_are_recorded_where_the_env_has_them(tmp_path, env_config, extra):
    argv = ["--config=qmix", f"--env-config={env_config}", "with", "record_fields=[pos]", *extra]
    from config import load_config

    args = SimpleNamespace(**load_config(argv))
    args.device = "cpu"
    parts = build(args, Logger(get_console_logger()))
    try:
        batch = parts.runner.run(test_mode=False)
    finally:
        parts.runner.close_env()
    filled = batch["filled"][:, :, 0].bool()
    pos = batch["pos"]  # [B, T, N, 2]
    assert pos.shape[2:] == (args.n_agents, 2)
    moved = (pos[:, 1:] != pos[:, :-1]).any(-1).any(-1) & filled[:, 1:]
    assert moved.any()  # positions change over the episode, and are not left at zero
    assert (pos[filled] != 0).any()


def test_a_checkpoint_saved_before_these_keys_existed_resumes_unchanged():
    from config import load_config, load_defaults
    from utils.values import config_changes

    current = load_config(["--config=differ_qmix", "--env-config=skirmish"])
    new_keys = [
        k
        for k in current
        if k.startswith(("share_", "receive_", "per_")) or k in ("use_per", "schedule_horizon")
    ]
    saved = {k: v for k, v in current.items() if k not in new_keys and k != "record_fields"}
    assert len(new_keys) > 15
    assert config_changes(saved, current, load_defaults()) == {}
    assert "record_fields" in config_changes(saved, current)  # without the defaults: a change
    shared = load_config(["--config=differ_qmix", "--env-config=skirmish", "with", "share_rule=density"])
    assert set(config_changes(saved, shared, load_defaults())) == {"share_rule"}


@pytest.mark.parametrize(
    "extra",
    [
        ["share_rule=quantile"],
        ["share_rule=all", "agent_param_sharing=False", "share_target=receiver"],
        ["share_rule=quantile", "share_bandwidth=1.0", "agent_param_sharing=False", "share_target=receiver"],
    ],
)
def test_iql_shares_its_agents_errors_as_super_does(tmp_path, extra):
    argv = ["--config=iql", "--env-config=gymma", "with", "env_args.key=lbforaging:Foraging-8x8-2p-3f-v3"]
    short = ["t_max=300", "test_nepisode=2", "batch_size=2", "buffer_size=8", "common_reward=False"]
    assert main.main([*argv, *short, f"local_results_path={tmp_path}", *extra]) == 0
    (path,) = glob.glob(os.path.join(tmp_path, "sacred", "**", "metrics.json"), recursive=True)
    with open(path) as f:
        metrics = json.load(f)
    assert "share_fraction" in metrics and "loss" in metrics


def test_sharing_with_a_mixer_needs_the_individual_td_learner(capsys):
    assert main.main(["--config=qmix", "with", "share_rule=quantile"]) == 2
    assert "learner=q_divide_learner" in capsys.readouterr().err


def test_the_sight_coverage_bench_counts_what_the_visibility_matrix_says():
    """bench/sight_coverage.py's 'all within 9' is share_to=sight's all-in-range case: counted
    from positions, it equals the env's visibility matrix (the field share_to=sight reads) at
    every step of random 2s3z play, and a radius just under the sight range would not."""
    from envs.skirmish.env import SkirmishEnv
    from helpers import load_bench

    bench = load_bench("sight_coverage")
    env = SkirmishEnv(map_name="2s3z", seed=3)
    rng = np.random.default_rng(3)
    totals = np.zeros(3)
    for _ in range(3):
        env.reset()
        done = False
        while not done:
            n = env.n_agents
            pos = np.array([[env.get_unit_by_id(i).pos.x, env.get_unit_by_id(i).pos.y] for i in range(n)])
            alive = np.array([env.get_unit_by_id(i).health > 0 for i in range(n)])
            counted, all_in, none_in = bench.coverage_counts(pos, alive, [bench.SIGHT, 8.5])
            vis = env.get_visibility_matrix()[:, :n]
            living = [i for i in range(n) if alive[i]] if alive.sum() > 1 else []
            expect_all = sum(all(vis[i, j] for j in living if j != i) for i in living)
            expect_none = sum(not any(vis[i, j] for j in living) for i in living)
            assert (counted, all_in[0], none_in[0]) == (len(living), expect_all, expect_none)
            totals += (all_in[0], all_in[1], counted)
            avail = np.asarray(env.get_avail_actions())
            _, done, _ = env.step((rng.random(avail.shape) * avail).argmax(axis=1).tolist())
    env.close()
    assert totals[2] > 100 and totals[1] < totals[0]
