"""Agent networks (mlp, rnn, transformer): shapes across learners, memory, action-semantic heads,
configuration errors and gradient flow."""

import pytest
import torch

import main
from helpers import make_args
from modules.agents import REGISTRY as agent_REGISTRY
from modules.agents.transformer_agent import token_layout
from utils.errors import ConfigError

# A SMAC-like layout: move (4), 3 enemies (5 each), 2 allies (5 each), own (3); actions: no-op,
# stop, 4 moves, then attack enemy j.
SMAC_LIKE = [
    {"name": "move", "count": 1, "dim": 4},
    {"name": "enemies", "count": 3, "dim": 5},
    {"name": "allies", "count": 2, "dim": 5},
    {"name": "own", "count": 1, "dim": 3},
]
D = 4 + 15 + 10 + 3
ATTACK = {"group": "enemies", "first_action": 6}


def transformer(input_shape=D, n_actions=9, **kw):
    settings = dict(
        transformer_embed_dim=16, transformer_n_head=2, transformer_n_layers=2, transformer_token_dim=5
    )
    args = make_args(n_actions=n_actions, **{**settings, **kw})
    return agent_REGISTRY["transformer"](input_shape, args)


@pytest.mark.parametrize("agent", ["mlp", "rnn", "transformer"])
def test_output_shapes_and_hidden(agent):
    args = make_args(n_actions=7, hidden_dim=16, transformer_embed_dim=16, transformer_n_head=4)
    net = agent_REGISTRY[agent](11, args)
    h = net.init_hidden(6)
    out, h2 = net(torch.randn(6, 5, 11), h)
    assert out.shape == (6, 5, 7)
    if agent != "mlp":
        assert h2.shape == h.shape
    one, _ = net(torch.randn(6, 1, 11), h)
    assert one.shape == (6, 1, 7)


@pytest.mark.parametrize("agent", ["rnn", "transformer"])
def test_hidden_state_carries_memory(agent):
    torch.manual_seed(0)
    args = make_args(n_actions=5, hidden_dim=16, transformer_embed_dim=16, transformer_n_head=2)
    net = agent_REGISTRY[agent](8, args)
    x = torch.randn(3, 4, 8)
    out, _ = net(x, net.init_hidden(3))
    # the same last input after a different history gives a different output
    x2 = x.clone()
    x2[:, 0] = torch.randn(3, 8)
    out2, _ = net(x2, net.init_hidden(3))
    assert not torch.allclose(out[:, -1], out2[:, -1])
    # stepping one step at a time with the carried hidden state equals the sequence call
    h = net.init_hidden(3)
    steps = []
    for t in range(4):
        o, h = net(x[:, t : t + 1], h)
        steps.append(o)
    assert torch.allclose(torch.cat(steps, 1), out, atol=1e-5)


def test_chunk_tokens_reproduce_the_input():
    index, groups, own, _ = token_layout(13, None, 5)
    assert index.shape == (3, 5) and own is None and groups.tolist() == [0, 1, 2]
    x = torch.arange(13.0)
    padded = torch.cat([x, torch.zeros(1)])
    tokens = padded[index]
    assert torch.equal(tokens.reshape(-1)[:13], x) and tokens.reshape(-1)[13:].abs().sum() == 0


def test_entity_layout_tokens():
    index, groups, own, names = token_layout(D + 2, SMAC_LIKE, 5)  # + 2 extra inputs (agent id)
    assert index.shape[0] == 1 + 3 + 2 + 1 + 1
    assert names["enemies"] == [1, 2, 3] and own == 6 and names["extra"] == [7]
    assert groups.tolist() == [0, 1, 1, 1, 2, 2, 3, 4]


def test_permuting_enemies_permutes_attack_outputs():
    torch.manual_seed(0)
    net = transformer(obs_entities=SMAC_LIKE, action_entities=ATTACK)
    assert net.entity_actions is not None
    x = torch.randn(4, 1, D)
    perm = [2, 0, 1]
    enemies = x[..., 4:19].reshape(4, 1, 3, 5)
    xp = x.clone()
    xp[..., 4:19] = enemies[:, :, perm].reshape(4, 1, 15)
    out, h = net(x, net.init_hidden(4))
    outp, hp = net(xp, net.init_hidden(4))
    assert torch.allclose(outp[..., 6:], out[..., 6:][..., perm], atol=1e-5)
    assert torch.allclose(outp[..., :6], out[..., :6], atol=1e-5)
    assert torch.allclose(hp, h, atol=1e-5)
    # without the entity layout, chunks carry position embeddings and no such symmetry holds
    plain = transformer()
    assert plain.entity_actions is None


def test_bad_head_count_is_refused():
    with pytest.raises(ConfigError, match="not divisible by transformer_n_head=3"):
        transformer(transformer_n_head=3)


def test_bad_head_count_is_refused_on_the_command_line(capsys):
    assert main.main(["--config=qmix", "with", "agent=transformer", "transformer_n_head=3"]) == 2
    err = capsys.readouterr().err
    assert "transformer_embed_dim=32 is not divisible by transformer_n_head=3" in err
    assert "1, 2, 4, 8, 16, 32" in err


@pytest.mark.parametrize("layout", [False, True])
def test_supervised_fit_reaches_every_parameter(layout):
    torch.manual_seed(0)
    kw = dict(obs_entities=SMAC_LIKE, action_entities=ATTACK) if layout else {}
    net = transformer(**kw)
    x, y = torch.randn(16, 2, D), torch.randn(16, 2, 9)
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    first = None
    for _ in range(60):
        out, _ = net(x, net.init_hidden(16))
        loss = ((out - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        if first is None:
            first = loss.item()
            for name, p in net.named_parameters():
                assert p.grad is not None and p.grad.abs().sum() > 0, name
        opt.step()
    assert loss.item() < 0.5 * first


@pytest.mark.parametrize(
    "config,extra",
    [
        ("qmix", ["agent=transformer"]),
        ("maddpg", ["agent=transformer"]),
        ("differ_qmix_transformer", ["transformer_n_layers=1"]),
        ("differ_qmix_transformer", ["transformer_n_head=1"]),
        ("iql", ["agent=transformer", "env_args.scenario=simple_adversary_v3", "common_reward=False"]),
    ],
)
def test_transformer_trains_with_every_learner(tmp_path, config, extra):
    from helpers import assert_trains, brief_training_argv

    assert_trains(tmp_path, brief_training_argv(config, *extra))


@pytest.mark.parametrize("agent", ["mlp", "rnn"])
def test_agent_group_routes_each_row_to_its_network(agent):
    from modules.agents.agent_group import AgentGroup

    torch.manual_seed(0)
    args = make_args(n_actions=4, hidden_dim=8)
    group = AgentGroup(lambda: agent_REGISTRY[agent](5, args), 4)
    nets = torch.tensor([2, 0, 2, 3, 0, 2])  # network 1 runs on no row
    x = torch.randn(6, 3, 5)
    route = group.route(nets)
    h = group.init_hidden(6, route)
    if agent == "rnn":
        h = h + torch.randn_like(h)  # a carried state, not zeros
    out, h2 = group(x, h, route)
    for r, g in enumerate(nets.tolist()):
        want, want_h = group.agents[g](x[r : r + 1], None if h is None else h[r : r + 1])
        assert torch.allclose(out[r], want[0], atol=1e-6), r
        if agent == "rnn":
            assert torch.allclose(h2[r], want_h[0], atol=1e-6), r
    # gradients reach only the networks that ran, and each from its own rows
    out[nets == 3].sum().backward()
    grads = [any(p.grad is not None and p.grad.abs().sum() > 0 for p in a.parameters()) for a in group.agents]
    assert grads == [False, False, False, True]


@pytest.mark.parametrize("activation,fn", [("relu", torch.relu), ("tanh", torch.tanh)])
def test_mlp_activation_for_the_agent_and_the_critics(activation, fn):
    from modules.critics.batched_mlp import BatchedMLP

    torch.manual_seed(0)
    x = torch.randn(6, 2, 5)
    agent = agent_REGISTRY["mlp"](5, make_args(n_actions=3, hidden_dim=8, mlp_activation=activation))
    h = fn(agent.fc2(fn(agent.fc1(x))))
    assert torch.allclose(agent(x)[0], agent.fc3(h), atol=1e-6)
    for n_nets in (1, 4):  # one shared net, and one per agent as a batched product
        net = BatchedMLP(n_nets, (5, 8, 8, 1), activation)
        inp = torch.randn(3, 2, 4, 5)
        w, b = net.weights, net.biases
        k = torch.arange(4) % n_nets  # the net of each agent
        h = fn(torch.einsum("btnd,nde->btne", inp, w[0][k]) + b[0][k, 0])
        h = fn(torch.einsum("btnd,nde->btne", h, w[1][k]) + b[1][k, 0])
        ref = torch.einsum("btnd,nde->btne", h, w[2][k]) + b[2][k, 0]
        assert torch.allclose(net(inp), ref, atol=1e-5)
