"""PyMARL3's HPN agent: permutation equivariance of its attack values, invariance to the order of
allies, and short runs of its configs on skirmish and skirmish_v2."""

import glob
import json
import os
from types import SimpleNamespace

import pytest
import torch

import main
from envs import REGISTRY as env_REGISTRY
from modules.agents import REGISTRY as agent_REGISTRY
from utils.errors import ConfigError


def hpn_for(env_name, heads=2, agent="hpn_rnn", **env_args):
    env = env_REGISTRY[env_name](**env_args)
    info = env.get_env_info()
    args = SimpleNamespace(
        n_actions=info["n_actions"], hidden_dim=32, hpn_head_num=heads, hpn_hyper_dim=16,
        obs_entities=info["obs_entities"], action_entities=info["action_entities"],
    )  # fmt: skip
    extra = info["n_actions"] + info["n_agents"]  # last action and agent id after the observation
    torch.manual_seed(0)
    return agent_REGISTRY[agent](info["obs_shape"] + extra, args), info, extra


def permuted(inputs, start, count, dim, order):
    block = inputs[..., start : start + count * dim].unflatten(-1, (count, dim))[..., order, :]
    out = inputs.clone()
    out[..., start : start + count * dim] = block.flatten(-2)
    return out


@pytest.mark.parametrize(
    "env_name, env_args",
    [("skirmish", {"map_name": "5m_vs_6m"}), ("skirmish_v2", {"scenario": "zerg_5_vs_5"})],
)
@pytest.mark.parametrize("heads, agent_name", [(1, "hpn_rnn"), (2, "hpn_rnn"), (2, "deepset_hyper_rnn")])
def test_attack_values_follow_the_enemies_and_allies_change_nothing(env_name, env_args, heads, agent_name):
    agent, info, extra = hpn_for(env_name, heads=heads, agent=agent_name, seed=1, **env_args)
    d = info["obs_shape"] + extra
    inputs = torch.randn(7, 5, d)  # rows, steps
    hidden = agent.init_hidden(7)
    q, h = agent(inputs, hidden)
    e_start, n_e, e_dim = agent.groups["enemies"]
    a_start, n_a, a_dim = agent.groups["allies"]
    first = agent.first_attack
    order = torch.randperm(n_e, generator=torch.Generator().manual_seed(3))
    q_e, h_e = agent(permuted(inputs, e_start, n_e, e_dim, order), hidden)
    assert torch.allclose(q_e[..., first:], q[..., first:][..., order], atol=1e-5)  # equivariant
    assert torch.allclose(q_e[..., :first], q[..., :first], atol=1e-5) and torch.allclose(h_e, h, atol=1e-5)
    order = torch.randperm(n_a, generator=torch.Generator().manual_seed(4))
    q_a, h_a = agent(permuted(inputs, a_start, n_a, a_dim, order), hidden)
    assert torch.allclose(q_a, q, atol=1e-5) and torch.allclose(h_a, h, atol=1e-5)  # invariant
    # and it is not invariant to what the enemies are: a changed enemy changes its attack value
    changed = inputs.clone()
    changed[..., e_start : e_start + e_dim] += 1.0
    assert not torch.allclose(agent(changed, hidden)[0][..., first], q[..., first])


def test_deepset_values_ignore_the_order_of_enemies_and_allies_alike():
    """PyMARL3's deepset_rnn: invariant input, plain output, so no value follows its enemy."""
    agent, info, extra = hpn_for("skirmish", agent="deepset_rnn", map_name="5m_vs_6m", seed=1)
    inputs = torch.randn(7, 5, info["obs_shape"] + extra)
    hidden = agent.init_hidden(7)
    q, h = agent(inputs, hidden)
    for group, seed in (("enemies", 3), ("allies", 4)):
        start, count, dim = agent.groups[group]
        order = torch.randperm(count, generator=torch.Generator().manual_seed(seed))
        q_p, h_p = agent(permuted(inputs, start, count, dim, order), hidden)
        assert torch.allclose(q_p, q, atol=1e-5) and torch.allclose(h_p, h, atol=1e-5)
    changed = inputs.clone()
    start, _, dim = agent.groups["enemies"]
    changed[..., start : start + dim] += 1.0  # what an enemy is still matters
    assert not torch.allclose(agent(changed, hidden)[0], q)
    assert not hasattr(agent, "hyper_in") and not hasattr(agent, "hyper_out_w")


@pytest.mark.parametrize("agent_name", ["hpn_rnn", "deepset_hyper_rnn", "transformer"])
def test_a_medivacs_slots_follow_the_allies_it_heals(agent_name):
    """MMM2: agent 9 (the Medivac) heals agent j through attack slot j. Its slot values come from
    the ally in its observation that slot heals (all agents but itself, in order), so permuting
    the allies permutes them the same way; every other agent's slots still follow the enemies."""
    from modules.agents.hpn_agent import entity_slices

    env = env_REGISTRY["skirmish"](map_name="MMM2", seed=1)
    info = env.get_env_info()
    n = info["n_agents"]
    args = SimpleNamespace(
        n_actions=info["n_actions"], hidden_dim=32, hpn_head_num=2, hpn_hyper_dim=16, n_agents=n,
        obs_agent_id=True, obs_entities=info["obs_entities"], action_entities=info["action_entities"],
        transformer_embed_dim=16, transformer_n_head=2, transformer_n_layers=1, transformer_token_dim=8,
    )  # fmt: skip
    assert info["action_entities"]["healers"] == [9]
    torch.manual_seed(0)
    agent = agent_REGISTRY[agent_name](info["obs_shape"] + n, args)  # obs, then the agent id
    obs = torch.randn(2, 3, n, info["obs_shape"])
    ids = torch.eye(n).expand(2, 3, n, n)
    rows = torch.cat([obs, ids], -1).transpose(1, 2).reshape(2 * n, 3, -1)  # agent-inner rows
    hidden = agent.init_hidden(2 * n)
    q, _ = agent(rows, hidden)
    _, groups = entity_slices(info["obs_shape"] + n, info["obs_entities"])
    (a_start, n_a, a_dim), (e_start, n_e, e_dim) = groups["allies"], groups["enemies"]
    first = info["action_entities"]["first_action"]
    heals = slice(first, first + n_a)  # the Medivac's slots 0-8: agents 0-8, its allies in order
    medic = torch.arange(2 * n) % n == 9
    order = torch.randperm(n_a, generator=torch.Generator().manual_seed(5))
    q_a, _ = agent(permuted(rows, a_start, n_a, a_dim, order), hidden)
    assert torch.allclose(q_a[medic][..., heals], q[medic][..., heals][..., order], atol=1e-5)
    assert torch.allclose(q_a[~medic], q[~medic], atol=1e-5)  # the others: invariant to allies
    order = torch.randperm(n_e, generator=torch.Generator().manual_seed(6))
    q_e, _ = agent(permuted(rows, e_start, n_e, e_dim, order), hidden)
    assert torch.allclose(q_e[~medic][..., first:], q[~medic][..., first:][..., order], atol=1e-5)
    assert torch.allclose(q_e[medic][..., heals], q[medic][..., heals], atol=1e-5)
    with pytest.raises(ConfigError, match="set obs_agent_id=True"):
        agent_REGISTRY[agent_name](
            info["obs_shape"], SimpleNamespace(**{**vars(args), "obs_agent_id": False})
        )


def test_skipping_steps_without_entities_changes_nothing():
    """The input layer skips the (row, step) places where a group's features are all zero
    (padding, dead agents): their sum is exactly zero. Values and gradients match the full sum."""
    agent, info, extra = hpn_for("skirmish", map_name="5m_vs_6m", seed=1)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, 9, info["obs_shape"] + extra, generator=g)
    x[:, 6:] = 0  # padded steps
    x[::3, 2:] = 0  # dead agents
    start, count, dim = agent.groups["enemies"]
    x[1, :, start : start + count * dim] = 0  # nobody in sight
    full = agent._summed_embeddings

    def grads(summed):
        agent.zero_grad()
        agent._live_summed_embeddings = summed
        q, _ = agent(x, agent.init_hidden(20))
        q.square().sum().backward()
        del agent._live_summed_embeddings
        return q.detach(), [p.grad.clone() for p in agent.parameters() if p.grad is not None]

    q_live, g_live = grads(agent._live_summed_embeddings)
    q_full, g_full = grads(full)
    assert torch.allclose(q_live, q_full, atol=1e-6)
    assert len(g_live) == len(g_full) and all(
        torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(g_live, g_full, strict=True)
    )


@pytest.mark.parametrize("heads", [1, 2])
def test_attack_values_equal_each_enemys_own_hypernetwork_weights(heads):
    """The output layer computes the values of entities without features (padding, dead agents,
    enemies out of sight) once per step and runs the hypernetworks on the rest only; values and
    gradients equal those of weights made explicitly for every enemy, as PyMARL3 makes them."""
    agent, info, extra = hpn_for("skirmish", heads=heads, map_name="5m_vs_6m", seed=1)
    g = torch.Generator().manual_seed(0)
    start, count, dim = agent.groups["enemies"]
    h_seq = torch.randn(20, 9, agent.hidden_dim, generator=g)
    feats = torch.randn(20, 9, count, dim, generator=g)
    feats[:, 6:] = 0  # padded steps
    feats[::3, 2:] = 0  # dead agents
    feats[1, :, 1:] = 0  # one enemy in sight
    feats[2, :, ::2] = 0  # every other enemy out of sight
    k, h = agent.heads, agent.hidden_dim

    def explicit(f, hs):
        weights = agent.hyper_out_w(f).unflatten(-1, (k, h))  # [n, T, E, k, H]
        values = torch.einsum("nth,ntekh->ntek", hs, weights) + agent.hyper_out_b(f)
        return agent.merge_out(values.unsqueeze(-1)).squeeze(-1)

    def grads(fn, f):
        agent.zero_grad()
        hs = h_seq.clone().requires_grad_(True)
        v = fn(f, hs)
        (v * torch.randn(v.shape, generator=torch.Generator().manual_seed(1))).sum().backward()
        return v.detach(), hs.grad, [p.grad.clone() for p in agent.parameters() if p.grad is not None]

    def ours(f, hs):
        return agent._entity_values(agent.hyper_out_w, agent.hyper_out_b, agent.merge_out, f, hs)

    for f in (feats, torch.randn(20, 9, count, dim, generator=g), torch.zeros(20, 9, count, dim)):
        (v, gh, gp), (v_ref, gh_ref, gp_ref) = grads(ours, f), grads(explicit, f)
        assert v.shape == (20, 9, count) and torch.allclose(v, v_ref, atol=1e-5)
        assert torch.allclose(gh, gh_ref, atol=1e-5)
        assert len(gp) == len(gp_ref)  # float32 sums in another order: equal to 1e-5 of each scale
        assert all(
            (a - b).abs().max() <= 1e-5 * b.abs().max() + 1e-6 for a, b in zip(gp, gp_ref, strict=True)
        )
    # the values of enemies without features are one value per step, not zero
    v = ours(feats, h_seq).detach()
    assert torch.equal(v[2, :6, 0], v[2, :6, 2]) and not torch.equal(v[2, :6, 0], v[2, :6, 1])


@pytest.mark.parametrize("agent_name", ["hpn_rnn", "deepset_rnn", "deepset_hyper_rnn"])
def test_one_step_at_a_time_equals_the_sequence(agent_name):
    agent, info, extra = hpn_for("skirmish", agent=agent_name, map_name="3m", seed=1)
    inputs = torch.randn(4, 6, info["obs_shape"] + extra)
    q_seq, h_seq = agent(inputs, agent.init_hidden(4))
    h, outs = agent.init_hidden(4), []
    for t in range(6):
        q, h = agent(inputs[:, t : t + 1], h)
        outs.append(q)
    assert torch.allclose(torch.cat(outs, 1), q_seq, atol=1e-5) and torch.allclose(h, h_seq, atol=1e-5)


def test_an_env_without_entities_is_refused(capsys):
    args = SimpleNamespace(n_actions=5, hidden_dim=8, hpn_head_num=1, hpn_hyper_dim=8)
    with pytest.raises(ConfigError, match="hpn_rnn needs an env that declares"):
        agent_REGISTRY["hpn_rnn"](10, args)


RUNS = [
    ("hpn_qmix", "skirmish", "env_args.map_name=5m_vs_6m", []),
    ("hpn_vdn", "skirmish", "env_args.map_name=5m_vs_6m", ["runner=episode", "batch_size_run=1"]),
    ("hpn_qplex", "skirmish_v2", "env_args.map_name=zerg_5_vs_5", []),
    ("deepset_qmix", "skirmish", "env_args.map_name=5m_vs_6m", []),
    ("deepset_hyper_vdn", "skirmish_v2", "env_args.map_name=zerg_5_vs_5", []),
    ("qmix_pymarl2", "skirmish", "env_args.map_name=5m_vs_6m", ["batch_size_run=2"]),  # HPN's baseline
    ("hpn_qmix", "skirmish", "env_args.map_name=MMM2", []),  # a Medivac's heal slots
    ("differ_qmix", "skirmish", "env_args.map_name=5m_vs_6m", ["agent=hpn_rnn"]),
    (
        "differ_qmix",
        "skirmish_v2",
        "env_args.map_name=zerg_5_vs_5",
        ["agent=hpn_rnn", "runner=parallel", "batch_size_run=2"],
    ),
]


@pytest.mark.parametrize("config, env, task, extra", RUNS)
def test_hpn_configs_run(tmp_path, config, env, task, extra):
    argv = [
        f"--config={config}", f"--env-config={env}", "with", task, "t_max=300", "test_nepisode=2",
        "batch_size=2", "buffer_size=8", f"local_results_path={tmp_path}", "seed=1", *extra,
    ]  # fmt: skip
    if config.startswith(("hpn", "deepset")) and "runner=episode" not in extra:
        argv += ["batch_size_run=2"]
    assert main.main(argv) == 0
    (run,) = glob.glob(os.path.join(tmp_path, "sacred", "**", "run.json"), recursive=True)
    with open(run) as f:
        assert json.load(f)["status"] == "COMPLETED"


SHORT = ["t_max=200", "test_nepisode=2", "batch_size=2", "buffer_size=4"]


@pytest.mark.parametrize(
    "argv, notes",
    [
        (
            ["--config=differ_qmix", "--env-config=skirmish", "with", "agent=n_rnn"],
            ["agent: n_rnn -> agent: rnn"],
        ),
        (["--config=differ_qmix_parallel", "--env-config=skirmish", "with"], []),
        (
            [
                "--config=differ_qmix_transformertest",
                "--env-config=skirmish",
                "with",
                "transformer_n_layers=1",
                "transformer_n_head=1",
                "transformer_embedding_dim=128",
            ],
            [
                "--config=differ_qmix_transformertest -> --config=differ_qmix_transformer",
                "transformer_embedding_dim: 128 -> transformer_embed_dim: 128",
            ],
        ),
    ],
)
def test_the_researchers_pymarl3_commands_run_verbatim(tmp_path, capsys, argv, notes):
    assert main.main([*argv, *SHORT, f"local_results_path={tmp_path}"]) == 0
    err = capsys.readouterr().err
    for note in notes:
        assert "note: " in err and note in err, note


def test_pymarl3s_smacv2_env_configs(capsys):
    from config_keys import CONFIG_DIR, load_yaml

    for race in ("protoss", "terran", "zerg"):
        real = load_yaml(os.path.join(CONFIG_DIR, "envs", f"sc2_v2_{race}.yaml"))
        sim = load_yaml(os.path.join(CONFIG_DIR, "envs", f"skirmish_v2_{race}.yaml"))
        assert (real["env"], sim["env"]) == ("sc2v2", "skirmish_v2")
        assert real["env_args"]["scenario"] == sim["env_args"]["scenario"] == f"{race}_5_vs_5"
        assert real["t_max"] == sim["t_max"] == 2050000
        assert real["env_args"]["obs_own_pos"] and not real["env_args"]["conic_fov"]
        assert real["env_args"]["reward_only_positive"]
        simulator_only = ("seed", "sim_options", "attack_jitter", "sc2_timeout")  # sc2_timeout: the game's
        assert {k: v for k, v in real["env_args"].items() if k not in simulator_only} == {
            k: v for k, v in sim["env_args"].items() if k not in simulator_only
        }
    assert main.main(["--config=hpn_qmix", "--env-config=sc2_v2_zerg"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SMACv2" in err[0]
