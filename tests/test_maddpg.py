"""MADDPG: Gumbel-softmax, soft targets, critic inputs, continuous bounds, per-agent critics,
end-to-end runs and a short learning check."""

import copy
import glob
import json
import os

import pytest
import torch

import helpers
import main
from controllers import REGISTRY as mac_REGISTRY
from helpers import MADDPG, maddpg_setup, make_args, play
from utils.errors import ConfigError
from utils.rl_utils import gumbel_softmax_st


def test_gumbel_softmax_straight_through():
    torch.manual_seed(0)
    logits = torch.randn(64, 5, requires_grad=True)
    y = gumbel_softmax_st(logits, temperature=0.7)
    assert torch.equal(y.sum(-1), torch.ones(64))
    assert set(y.detach().unique().tolist()) == {0.0, 1.0}  # forward is exactly one-hot
    (y * torch.arange(5.0)).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0  # gradient reaches the logits
    # samples follow softmax(logits)
    fixed = torch.tensor([2.0, 0.0, -1.0, 0.5, 0.0])
    freq = gumbel_softmax_st(fixed.expand(20000, 5).clone()).mean(0)
    assert torch.allclose(freq, torch.softmax(fixed, 0), atol=0.015)


def test_greedy_and_sampled_actions_respect_availability():
    args, runner, mac, _, info = maddpg_setup()
    batch = runner.new_batch()
    runner.env.reset()
    batch.update(
        {
            "obs": runner.env.get_obs(),
            "state": runner.env.get_state(),
            "avail_actions": [[1, 0, 1, 0, 0]] * info["n_agents"],
        },
        ts=0,
    )
    mac.init_hidden(1)
    greedy = mac.select_actions(batch, 0, 0, test_mode=True)
    assert greedy.shape == (1, info["n_agents"]) and greedy.dtype == torch.long
    picks = set()
    for _ in range(200):
        mac.init_hidden(1)
        picks |= set(mac.select_actions(batch, 0, 0).flatten().tolist())
    assert picks == {0, 2}


def test_soft_target_update_after_train():
    args, runner, mac, learner, _ = maddpg_setup(tau=0.3)
    batch = play(runner)
    old_target = [p.clone() for p in learner.target_critic.parameters()]
    old_actor_target = [p.clone() for p in learner.target_mac.parameters()]
    learner.train(batch, 100, 4)
    for t, o, s in zip(
        learner.target_critic.parameters(), old_target, learner.critic.parameters(), strict=True
    ):
        assert torch.allclose(t, 0.3 * s + 0.7 * o, atol=1e-6)
    for t, o, s in zip(learner.target_mac.parameters(), old_actor_target, mac.parameters(), strict=True):
        assert torch.allclose(t, 0.3 * s + 0.7 * o, atol=1e-6)


@pytest.mark.parametrize("shared", [False, True])
def test_critic_input_size_heterogeneous_observations(shared):
    # simple_adversary: the adversary sees 8 features, the two good agents 10; all have 5 actions.
    args, runner, mac, learner, info = maddpg_setup(
        "simple_adversary_v3", common_reward=False, agent_param_sharing=shared
    )
    assert info["obs_sizes"] == [8, 10, 10]
    assert info["state_shape"] == 28  # all agents' observations, unpadded
    expected = 28 + 3 * 5 + (3 if shared else 0)
    assert learner.critic.input_shape == expected
    assert learner.critic.weights[0].shape[1] == expected
    batch = play(runner, 2)
    learner.train(batch, 0, 2)
    assert learner.critic(torch.zeros(2, 4, 3, expected)).shape == (2, 4, 3)


def test_continuous_actions_stay_in_bounds_with_noise():
    args, runner, mac, learner, info = maddpg_setup(
        continuous=True, act_noise_start=5.0, act_noise_finish=5.0
    )
    assert info["action_space"] == "continuous"
    low = torch.tensor(info["action_low"])
    high = torch.tensor(info["action_high"])
    batch = play(runner, 3)
    actions = batch["actions"]
    assert actions.dtype == torch.float32 and actions.shape[-1] == info["n_actions"]
    filled = batch["filled"][..., 0].bool()
    acts = actions[filled]
    assert (acts >= low).all() and (acts <= high).all()
    assert (acts == low).any() and (acts == high).any()  # noise this large hits the bounds
    assert acts.std() > 0.2
    # test mode: deterministic, still in bounds
    mac.init_hidden(1)
    a1 = mac.select_actions(batch[0:1], 0, 0, test_mode=True)
    a2 = mac.select_actions(batch[0:1], 0, 0, test_mode=True)
    assert torch.equal(a1, a2) and (a1 >= low).all() and (a1 <= high).all()
    learner.train(batch, 100, 3)  # float actions train end to end


def _noise_steps(mac, batch, steps, t_env=0):
    """The exploration noise of `steps` consecutive actions of one episode (the actor's output
    is the same at every call here, so the noise is the action minus the test action)."""
    mac.init_hidden(batch.batch_size)
    clean = mac.select_actions(batch, 0, t_env, test_mode=True)
    return torch.stack([mac.select_actions(batch, 0, t_env) - clean for _ in range(steps)])


@pytest.mark.parametrize("mode", ["gaussian", "ornstein_uhlenbeck"])
def test_exploration_noise_std_and_correlation(mode):
    args, runner, mac, learner, info = maddpg_setup(
        continuous=True, exploration_mode=mode, act_noise_start=0.02, act_noise_finish=0.02
    )
    batch = play(runner, 64)
    torch.manual_seed(0)
    noise = _noise_steps(mac, batch, 60)  # [steps, B, N, A]; 0.02 half ranges never clips here
    half = (torch.tensor(info["action_high"]) - torch.tensor(info["action_low"])) / 2
    x = noise / (0.02 * half)
    lag1 = (x[1:] * x[:-1]).mean() / (x**2).mean()
    if mode == "gaussian":
        assert abs(x.std().item() - 1.0) < 0.05 and abs(lag1.item()) < 0.05
    else:  # OU from 0: first step std sigma, stationary std sigma / sqrt(2 theta - theta^2)
        theta, sigma = args.ou_theta, args.ou_sigma
        assert abs(x[0].std().item() - sigma) < 0.02
        stationary = sigma / (2 * theta - theta**2) ** 0.5
        assert abs(x[40:].std().item() / stationary - 1.0) < 0.1
        assert abs(lag1.item() - (1 - theta)) < 0.05
        again = _noise_steps(mac, batch, 1)  # a new episode restarts the process at 0
        assert abs((again / (0.02 * half)).std().item() - sigma) < 0.02


def test_ou_noise_stops_after_ou_stop_episode():
    args, runner, mac, learner, info = maddpg_setup(
        continuous=True, exploration_mode="ornstein_uhlenbeck", ou_stop_episode=10
    )
    batch = play(runner, 2)
    stop = 10 * info["episode_limit"]
    assert _noise_steps(mac, batch, 3, t_env=stop - 1).abs().sum() > 0
    assert torch.equal(
        _noise_steps(mac, batch, 3, t_env=stop), torch.zeros(3, 2, *batch["actions"].shape[2:])
    )


def test_softmax_actor_emits_soft_samples_on_the_simplex():
    # The paper's MPE actor: training actions are soft Gumbel-softmax samples sent to the env as
    # [0, 1] vectors summing to 1; test actions softmax(logits); the actor loss reaches the logits.
    _, runner, mac, learner, _ = maddpg_setup(continuous=True, continuous_actor="softmax")
    batch = play(runner, 3)
    acts = batch["actions"][batch["filled"][..., 0].bool()]  # [steps, N, A]
    assert (acts >= 0).all() and (acts <= 1).all()
    assert torch.allclose(acts.sum(-1), torch.ones(acts.shape[:-1]), atol=1e-5)
    assert ((acts > 0.01) & (acts < 0.99)).any()  # soft, not one-hot
    mac.init_hidden(1)
    greedy = mac.select_actions(batch[0:1], 0, 0, test_mode=True)
    logits = mac.forward(batch[0:1], 0)
    assert torch.allclose(greedy, torch.softmax(logits, -1), atol=1e-6)
    sampled = mac.select_actions(batch[0:1], 0, 0)
    assert not torch.allclose(sampled, greedy)
    out = logits.detach().requires_grad_(True)
    soft = mac.policy_actions(out, torch.ones_like(out), sample=True)
    (soft * torch.arange(out.shape[-1], dtype=torch.float32)).sum().backward()
    assert out.grad is not None and out.grad.abs().sum() > 0
    before = [p.clone() for p in mac.parameters()]
    learner.train(batch, 100, 3)
    assert any(not torch.equal(a, b) for a, b in zip(before, mac.parameters(), strict=True))


def test_softmax_actor_needs_unit_bounds():
    args = make_args(
        **MADDPG,
        continuous_actor="softmax",
        n_agents=2,
        n_actions=2,
        action_space="continuous",
        action_low=[-1.0, -1.0],
        action_high=[1.0, 1.0],
    )
    scheme = {"obs": {"vshape": 4, "group": "agents"}, "actions": {"vshape": (2,), "group": "agents"}}
    with pytest.raises(ConfigError, match=r"continuous_actor=softmax.*low=\[-1.0, -1.0\].*tanh"):
        mac_REGISTRY["maddpg_mac"](scheme, {"agents": 2}, args)


def test_each_critic_learns_its_own_reward():
    # Two identical learners see batches that differ only in agent 1's reward: afterwards only
    # agent 1's critic differs.
    torch.manual_seed(0)
    args, runner, mac, learner, _ = maddpg_setup("simple_adversary_v3", common_reward=False)
    batch = play(runner, 3)
    other = copy.deepcopy(learner)
    changed = copy.deepcopy(batch)
    changed.data.transition_data["reward"][:, :, 1] += 5.0
    torch.manual_seed(1)
    learner.train(batch, 0, 3)
    torch.manual_seed(1)
    other.train(changed, 0, 3)
    for w_a, w_b in zip(learner.critic.weights, other.critic.weights, strict=True):
        assert torch.equal(w_a[0], w_b[0]) and torch.equal(w_a[2], w_b[2])
        assert not torch.equal(w_a[1], w_b[1])


def test_team_reward_reaches_every_critic():
    torch.manual_seed(0)
    args, runner, mac, learner, _ = maddpg_setup(common_reward=True)
    batch = play(runner, 3)
    other = copy.deepcopy(learner)
    changed = copy.deepcopy(batch)
    changed.data.transition_data["reward"] += 5.0
    torch.manual_seed(1)
    learner.train(batch, 0, 3)
    torch.manual_seed(1)
    other.train(changed, 0, 3)
    for w_a, w_b in zip(learner.critic.weights, other.critic.weights, strict=True):
        for i in range(3):
            assert not torch.equal(w_a[i], w_b[i])


def test_actor_loss_steps_actors_only():
    args, runner, mac, learner, _ = maddpg_setup()
    batch = play(runner, 3)
    critic_before = copy.deepcopy(learner.critic)
    learner.critic_optimiser.step = lambda: None  # freeze the critic step: only actors may move
    actor_before = [p.clone() for p in mac.parameters()]
    learner.train(batch, 0, 3)
    for a, b in zip(critic_before.parameters(), learner.critic.parameters(), strict=True):
        assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(actor_before, mac.parameters(), strict=True))
    for k in ("critic_loss", "actor_loss", "q_taken_mean", "target_mean"):
        assert k in learner.logger.stats


def policy_value(learner, mac, batch):
    """Mean critic value of the joint action every actor's policy takes on the batch."""
    from utils.rl_utils import valid_mask

    with torch.no_grad():
        out = mac.forward_seq(batch)[:, :-1]
        acts = mac.policy_actions(out, batch["avail_actions"][:, :-1], sample=False)
        q = learner.critic(learner.critic.build_inputs(batch["state"][:, :-1], learner._joint(acts), None))
        mask = valid_mask(batch).expand_as(q)
        return ((q * mask).sum() / mask.sum()).item()


@pytest.mark.parametrize("agent", ["rnn", "mlp"])
def test_recurrent_and_shared_actors_climb_their_critic(agent):
    # One update: the gradient reaches every actor parameter (the GRU's included), and the actors'
    # step raises the value that the just-updated critic gives their joint action.
    torch.manual_seed(0)
    args, runner, mac, learner, _ = maddpg_setup(
        continuous=True,
        agent=agent,
        agent_param_sharing=True,
        obs_agent_id=True,
        obs_last_action=True,
        actor_other_actions="policy",
        actor_reg=0.0,
        lr=1e-4,
    )
    batch = play(runner, 4)
    old_mac = copy.deepcopy(mac)
    learner.train(batch, 0, 4)
    grads = {n: p.grad for n, p in mac.agent.named_parameters()}
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads.values()), [
        n for n, g in grads.items() if g is None or g.abs().sum() == 0
    ]
    before, after = policy_value(learner, old_mac, batch), policy_value(learner, mac, batch)
    assert after > before, (before, after)


# --- policy ensembles ------------------------------------------------------------------------
def sub_policy(mac, agent, k):
    """The network of agent `agent`'s sub-policy k."""
    return mac.agent.agents[k if mac.args.agent_param_sharing else agent * mac.n_policies + k]


@pytest.mark.parametrize("shared", [False, True])
def test_ensemble_acts_and_trains_with_the_drawn_sub_policy(shared):
    torch.manual_seed(0)
    args, runner, mac, learner, info = maddpg_setup(
        "simple_adversary_v3",
        common_reward=False,
        policy_ensemble=3,
        agent_param_sharing=shared,
        obs_agent_id=shared,
    )
    n = info["n_agents"]
    assert len(mac.agent.agents) == (3 if shared else 3 * n)
    batch = play(runner, 12)
    index = batch["policy_index"][..., 0]  # [B, N], what each agent played
    assert index.shape == (12, n) and set(index.flatten().tolist()) == {0, 1, 2}
    # the stored draw is the one the episode was played with: greedy actions of those networks
    last = runner.run(test_mode=True)
    played = last["policy_index"][0, :, 0]
    rows = mac._build_inputs(last, 0, last.max_seq_length)[0]  # [T, N, in]
    for i in range(n):
        greedy = sub_policy(mac, i, int(played[i]))(rows[:-1, i].unsqueeze(0))[0][0].argmax(-1)
        assert torch.equal(last["actions"][0, :-1, i, 0], greedy), (i, played)
    # forward_seq picks each episode's stored sub-policy
    out = mac.forward_seq(batch)  # [B, T, N, A]
    rows = mac._build_inputs(batch, 0, batch.max_seq_length)  # [B, T, N, in]
    for b in (0, 5):
        for i in range(n):
            net = sub_policy(mac, i, int(index[b, i]))
            assert torch.allclose(out[b, :, i], net(rows[b, :, i].unsqueeze(0))[0][0], atol=1e-6)
    # one update moves only the sub-policies that played the sampled episodes
    batch.data.episode_data["policy_index"][:] = 0
    before = copy.deepcopy(mac)
    learner.train(batch, 0, 12)
    for i in range(1 if shared else n):
        for k in range(3):
            moved = any(
                not torch.equal(a, b)
                for a, b in zip(
                    sub_policy(before, i, k).parameters(), sub_policy(mac, i, k).parameters(), strict=True
                )
            )
            assert moved == (k == 0), (i, k)


def test_ensemble_runs_end_to_end_and_resumes(tmp_path, capsys):
    base = [
        "--config=maddpg",
        "--env-config=mpe",
        "with",
        f"local_results_path={tmp_path}",
        "seed=2",
        *QUICK,
        "env_args.scenario=simple_adversary_v3",
        "policy_ensemble=2",
        "runner=parallel",
        "batch_size_run=2",
        "env_args.continuous_actions=True",
    ]
    assert main.main(base + ["save_model=True", "save_model_interval=100"]) == 0
    run = sacred_run(tmp_path)
    assert read(run, "run.json")["status"] == "COMPLETED"
    assert read(run, "config.json")["policy_ensemble"] == 2
    assert {"test_agent0_return_mean", "critic_loss"} <= set(read(run, "metrics.json"))
    models = glob.glob(os.path.join(str(tmp_path), "models", "*"))
    assert main.main(base + [f"checkpoint_path={models[0]}", "evaluate=True"]) == 0
    # other networks than the saved ones: refused before the run starts, naming the saved value
    capsys.readouterr()
    assert main.main(base + [f"checkpoint_path={models[0]}", "evaluate=True", "policy_ensemble=3"]) == 2
    assert "policy_ensemble=3 (saved: 2)" in capsys.readouterr().err
    # forced through: a one-line error that the networks do not fit, exit code 2
    forced = [f"checkpoint_path={models[0]}", "evaluate=True", "policy_ensemble=3", "resume_override=True"]
    assert main.main(base + forced) == 2
    assert "does not fit this run's networks" in capsys.readouterr().err


# --- end to end ------------------------------------------------------------------------------
QUICK = [*helpers.QUICK, "t_max=200", "transition_batch_size=40", "env_args.max_cycles=10"]  # later wins


def sacred_run(results):
    runs = glob.glob(os.path.join(str(results), "sacred", "*", "*", "*", "[0-9]*"))
    assert len(runs) == 1, runs
    return runs[0]


def read(path, name):
    with open(os.path.join(path, name)) as f:
        return json.load(f)


@pytest.mark.parametrize("actions", ["discrete", "tanh", "softmax"])
@pytest.mark.parametrize("common_reward", [False, True])
@pytest.mark.parametrize("runner", ["episode", "parallel"])
def test_short_runs_write_sacred_record(tmp_path, actions, common_reward, runner):
    continuous = actions != "discrete"
    argv = [
        "--config=maddpg",
        "--env-config=mpe",
        "with",
        f"local_results_path={tmp_path}",
        "seed=1",
        *QUICK,
        f"env_args.continuous_actions={continuous}",
        f"common_reward={common_reward}",
    ]
    if continuous:
        argv.append(f"continuous_actor={actions}")
    if runner == "parallel":
        argv += ["runner=parallel", "batch_size_run=2"]
    assert main.main(argv) == 0
    run = sacred_run(tmp_path)
    assert read(run, "run.json")["status"] == "COMPLETED"
    metrics = read(run, "metrics.json")
    expected = {"return_mean", "test_return_mean", "critic_loss", "actor_loss", "q_taken_mean"}
    if not common_reward:
        expected |= {f"agent{i}_return_mean" for i in range(3)}
        expected |= {f"test_agent{i}_return_mean" for i in range(3)}
    assert expected <= set(metrics), expected - set(metrics)
    config = read(run, "config.json")
    assert config["env_args"]["continuous_actions"] == continuous
    if continuous:
        assert config["continuous_actor"] == actions


def test_competitive_scenario_checkpoint_resume_evaluate(tmp_path):
    import torch as th

    from helpers import sacred_runs

    base = [
        "--config=maddpg",
        "--env-config=mpe",
        "with",
        f"local_results_path={tmp_path}",
        "seed=2",
        *QUICK,
        "env_args.scenario=simple_adversary_v3",
        "common_reward=False",
    ]
    assert main.main(base + ["save_model=True", "save_model_interval=100"]) == 0
    models = glob.glob(os.path.join(str(tmp_path), "models", "*"))
    assert len(models) == 1
    steps = sorted(int(d) for d in os.listdir(models[0]) if d.isdigit())
    assert len(steps) >= 2
    first, last = (
        th.load(os.path.join(models[0], str(t), "learner.th"), weights_only=True)
        for t in (steps[0], steps[-1])
    )
    assert {"agent", "critic", "target_critic", "actor_optimiser", "critic_optimiser"} <= set(first)
    assert any(not th.equal(first["agent"][k], last["agent"][k]) for k in first["agent"])  # it trained

    # Resume from the first checkpoint: training goes on from its t_env, with its networks.
    assert main.main(base + [f"checkpoint_path={models[0]}", f"load_step={steps[0]}", "t_max=300"]) == 0
    first_run, resumed = sacred_runs(tmp_path)
    metrics, before = (
        read(resumed, "metrics.json")["critic_loss"],
        read(first_run, "metrics.json")["critic_loss"],
    )
    # the record carries the first run's values up to the checkpoint, then its own
    upto = sum(t <= steps[0] for t in before["steps"])
    assert (
        metrics["steps"][:upto] == before["steps"][:upto]
        and metrics["values"][:upto] == before["values"][:upto]
    )
    assert 0 < upto < len(metrics["steps"]) and min(metrics["steps"][upto:]) > steps[0]
    assert read(resumed, "run.json")["result"]["t_env"] >= 300
    with open(os.path.join(resumed, "cout.txt")) as f:
        assert f"(t_env {steps[0]})" in f.read()

    # Evaluate: test episodes at the latest checkpoint, each team's return, no training.
    assert main.main(base + [f"checkpoint_path={models[0]}", "evaluate=True"]) == 0
    metrics = read(sacred_runs(tmp_path)[-1], "metrics.json")
    assert "critic_loss" not in metrics and "return_mean" not in metrics
    per_agent = [k for k in metrics if k.startswith("test_agent") and k.endswith("_return_mean")]
    assert len(per_agent) == 3 and all(metrics[k]["steps"] == [steps[-1]] for k in per_agent)


def test_maddpg_learns_small_cooperative_task(tmp_path):
    # Both agents must match a cue (pz_coop): a random team scores about 10/9, the best 10.
    argv = [
        "--config=maddpg",
        "--env-config=mpe",
        "with",
        "env_args.key=pz_coop",
        "env_args.max_cycles=10",
        "common_reward=True",
        "reward_scalarisation=mean",
        "t_max=5000",
        "test_interval=2500",
        "test_nepisode=32",
        "batch_size=16",
        "seed=3",
        f"local_results_path={tmp_path}",
    ]
    assert main.main(argv) == 0
    path = glob.glob(os.path.join(str(tmp_path), "sacred", "*", "*", "*", "1", "metrics.json"))[0]
    with open(path) as f:
        curve = json.load(f)["test_return_mean"]["values"]
    assert curve[-1] >= 8.0, curve
