"""QPLEX with Qatten's transform (mixer=qplex_qatten, ICES's football mixer): the transform against a
by-hand computation, keys from the state or the observations, the attention penalty in the loss,
the target mixer's observations (their code's step before, or the step's own), and IGM."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from controllers import REGISTRY as mac_REGISTRY
from helpers import OBS, A, N, S, learner_args, make_args, make_batch
from learners import REGISTRY as le_REGISTRY
from modules.mixers import REGISTRY as mixer_REGISTRY
from utils.errors import ConfigError
from utils.logger import Logger, get_console_logger

UNIT = 2  # state features per agent when keys come from the state (N * UNIT <= S)


def make_mixer(seed=0, **kw):
    torch.manual_seed(seed)
    kw = {"qplex_qatten_keys": "obs", "state_agent_features": UNIT, "env": "mpe", **kw}
    args = make_args(n_agents=N, n_actions=A, state_shape=S, obs_shape=OBS, **kw)
    return mixer_REGISTRY["qplex_qatten"](args)


def inputs(seed, m=5):
    g = torch.Generator().manual_seed(seed)
    states, obs = torch.randn(m, S, generator=g), torch.randn(m, N, OBS, generator=g)
    q = torch.randn(m, N, generator=g) * 2
    return states, obs, q


@pytest.mark.parametrize("weighted_head", [False, True])
def test_the_transform_is_attention_summed_over_heads(weighted_head):
    mixer = make_mixer(weighted_head=weighted_head, qplex_qatten_heads=3)
    states, obs, q = inputs(1)
    with torch.no_grad():
        w, v = mixer.transform(states, q, obs)
        e = mixer.embed
        want = torch.zeros(len(states), N)
        for m in range(len(states)):
            query = mixer.query(states[m]).view(3, e)
            keys = mixer.unit_key(obs[m]).view(N, 3, e)  # [N, H, E]
            for h in range(3):
                att = torch.softmax(torch.stack([query[h] @ keys[i, h] for i in range(N)]) / np.sqrt(e), 0)
                scale = mixer.head_weights(states[m])[h].abs() if weighted_head else 1.0
                want[m] += att * scale
    assert torch.allclose(w, want + 1e-10, atol=1e-6) and (w > 0).all()
    if not weighted_head:  # each head's weights sum to 1 over the agents
        assert torch.allclose(w.sum(1), torch.full((len(states),), 3.0), atol=1e-5)
    assert torch.allclose(v, (mixer.V(states) / N).expand(-1, N))


def test_keys_from_obs_read_each_agents_observation_and_from_state_its_block():
    by_obs, by_state = make_mixer(), make_mixer(qplex_qatten_keys="state")
    states, obs, q = inputs(2)
    other = obs.clone()
    other[:, 1] += 1.0  # agent 1 observes something else
    with torch.no_grad():
        assert not torch.allclose(by_obs.transform(states, q, obs)[0], by_obs.transform(states, q, other)[0])
        assert torch.equal(by_state.transform(states, q, obs)[0], by_state.transform(states, q, other)[0])
        moved = states.clone()
        moved[:, UNIT : 2 * UNIT] += 1.0  # agent 1's block of the state
        assert not torch.allclose(by_state.transform(states, q)[0], by_state.transform(moved, q)[0])
    with pytest.raises(ConfigError, match="qplex_qatten_keys=state reads each agent's own block"):
        make_mixer(qplex_qatten_keys="state", state_agent_features=None)


def test_greedy_joint_action_is_greedy_for_q_tot():
    mixer = make_mixer(seed=3)
    g = torch.Generator().manual_seed(4)
    state, obs = torch.randn(1, S, generator=g), torch.randn(1, N, OBS, generator=g)
    qs = torch.randn(N, A, generator=g) * 3
    best = qs.max(dim=1)
    joints = list(itertools.product(range(A), repeat=N))
    idx = torch.tensor(joints)
    onehot = F.one_hot(idx, A).float()
    j = len(joints)
    with torch.no_grad():
        q_tot = mixer(
            qs[torch.arange(N), idx],
            state.expand(j, S),
            onehot,
            best.values.expand(j, N),
            obs.expand(j, N, OBS),
        )
    assert q_tot.argmax().item() == joints.index(tuple(best.indices.tolist()))


def test_the_penalty_is_the_logits_mean_square_summed_over_heads():
    mixer = make_mixer(qplex_qatten_reg=0.01)
    states, obs, _ = inputs(5)
    logits = mixer.logits(states, obs)  # [M, H, N]
    want = 0.01 * sum((logits[:, h] ** 2).mean() for h in range(logits.shape[1]))
    assert torch.allclose(mixer.penalty(states, obs=obs), want)
    mixer.reg = 0.0
    assert mixer.penalty(states, obs=obs) == 0


def make_learner(**kw):
    torch.manual_seed(0)
    args = learner_args(
        mixer="qplex_qatten", agent="rnn", gamma=0.9, t_max=1000, qplex_qatten_keys="obs", **kw
    )
    scheme = make_batch().scheme
    mac = mac_REGISTRY["basic_mac"](scheme, {"agents": N}, args)
    return le_REGISTRY["q_learner"](mac, scheme, Logger(get_console_logger()), args)


def test_the_learner_adds_the_penalty_to_its_loss():
    batch = make_batch(seed=6)
    losses = {}
    for reg in (0.0, 0.5):
        learner = make_learner(qplex_qatten_reg=reg)
        out = learner.forward_and_targets(batch)
        penalty = learner.mixer_penalty(batch, out)
        learner.train(batch, t_env=0, episode_num=0)
        losses[reg] = (learner.logger.stats["loss"][-1][1], float(penalty.detach()))
    assert losses[0.0][1] == 0 and losses[0.5][1] > 0
    assert losses[0.5][0] == pytest.approx(losses[0.0][0] + losses[0.5][1], rel=1e-5)


def test_the_target_mixer_reads_the_step_before_only_as_their_code_does():
    batch = make_batch(seed=7)
    targets = {}
    for when in ("next", "current"):
        learner = make_learner(qplex_qatten_target_obs=when, td_lambda=0.0)
        obs = batch["obs"]
        seen = learner.mixer.target_observations(obs)
        if when == "next":
            assert torch.equal(seen, obs)
        else:
            assert torch.equal(seen[:, 1:], obs[:, :-1])
        targets[when] = learner.forward_and_targets(batch).targets
    assert not torch.allclose(targets["next"], targets["current"])
