import numpy as np
import pytest

from envs.pettingzoo_env import PettingZooEnv, validate_env_args
from utils.errors import ConfigError


def make(**kw):
    args = dict(
        scenario="simple_spread_v3",
        key="",
        max_cycles=25,
        continuous_actions=False,
        seed=0,
        common_reward=True,
        reward_scalarisation="sum",
    )
    args.update(kw)
    return PettingZooEnv(**args)


def test_env_info_and_state():
    env = make()
    info = env.get_env_info()
    assert (
        info["n_agents"],
        info["n_actions"],
        info["obs_shape"],
        info["state_shape"],
        info["episode_limit"],
    ) == (3, 5, 18, 54, 25)
    for _ in range(10):
        env.step(np.random.randint(0, 5, size=3))
        assert np.array_equal(env.get_state(), np.asarray(env.env.unwrapped.state(), dtype=np.float32))


def test_heterogeneous_obs_are_zero_padded():
    env = make(scenario="simple_adversary_v3")
    assert env.get_obs_size() == 10 and env.obs_sizes == [8, 10, 10]
    raw, _ = env.env.reset(seed=3)
    env._set_obs(raw)
    obs = env.get_obs()
    assert np.array_equal(obs[0, :8], raw["adversary_0"]) and np.all(obs[0, 8:] == 0)
    assert np.array_equal(obs[1], raw["agent_0"])


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_reward_scalarisation(mode):
    common = make(scenario="simple_adversary_v3", reward_scalarisation=mode)
    indi = make(scenario="simple_adversary_v3", common_reward=False)
    for _ in range(5):
        a = np.random.randint(0, 5, size=3)
        r, _, _ = common.step(a)
        ri, _, _ = indi.step(a)
        assert ri.shape == (3,)
        assert r == pytest.approx(ri.sum() if mode == "sum" else ri.mean(), rel=1e-5)


def test_time_limit_is_not_termination():
    env = make(max_cycles=4)
    for _ in range(4):
        _, done, info = env.step([0, 0, 0])
    assert done and info["episode_limit"] and env.get_indi_terminated().sum() == 0


def test_the_final_observation_at_the_time_limit_is_kept():
    # A critic of observations (IPPO, IA2C) bootstraps from it; zeros there made every episode's
    # last targets come from an input the critic never sees elsewhere.
    env = make(max_cycles=4)
    for _ in range(4):
        _, done, _ = env.step([1, 2, 3])
    obs = env.get_obs()
    assert done and np.abs(obs).sum() > 0
    assert np.array_equal(obs.reshape(-1), env.get_state())  # simple_spread's state: the observations
    assert (env.get_avail_actions() == [1, 0, 0, 0, 0]).all()  # done agents can only no-op


def test_any_pettingzoo_env_by_import_path():
    env = PettingZooEnv(
        key="pz_toy", max_cycles=6, seed=0, common_reward=False, reward_scalarisation="sum", bonus=0.5
    )
    info = env.get_env_info()
    assert (info["n_agents"], info["n_actions"], info["obs_shape"], info["episode_limit"]) == (2, 3, 3, 6)
    assert env.get_avail_actions().tolist() == [[1, 1, 0], [1, 1, 1]]
    assert info["state_shape"] == 6  # no state(): the padded observations, concatenated
    rewards = []
    for t in range(6):
        r, done, info_t = env.step([1, 2])
        rewards.append(r)
        if t == 2:
            assert env.get_indi_terminated().tolist() == [0, 1]
            assert env.get_avail_actions().tolist() == [[1, 1, 0], [1, 0, 0]]  # dead: no-op only
            assert np.all(env.get_obs()[1] == 0)
    assert done and info_t["episode_limit"]  # cut by max_cycles, which the wrapper enforces
    assert rewards[0].tolist() == [1.5, 2.5] and rewards[4].tolist() == [1.5, 0.0]


def test_bad_env_args_refused():
    with pytest.raises(ConfigError, match="valid choices: .*simple_spread_v3"):
        validate_env_args({"scenario": "nope", "reward_scalarisation": "sum"})
    with pytest.raises(ConfigError, match="local_ratio"):
        validate_env_args({"scenario": "simple_spread_v3", "local_ratoi": 1, "reward_scalarisation": "sum"})
    with pytest.raises(ConfigError, match="cannot be imported"):
        validate_env_args({"key": "no.such.module", "reward_scalarisation": "sum"})


def test_seeded_resets_are_reproducible():
    a, b = make(seed=11), make(seed=11)
    assert np.array_equal(a.get_obs(), b.get_obs())
    a.reset(), b.reset()
    assert np.array_equal(a.get_obs(), b.get_obs())
    assert not np.array_equal(make(seed=12).get_obs(), make(seed=11).get_obs())


@pytest.mark.parametrize(
    "scenario",
    [
        "simple_spread_v3",
        "simple_adversary_v3",
        "simple_tag_v3",
        "simple_world_comm_v3",
        "simple_speaker_listener_v4",
    ],
)
@pytest.mark.parametrize("continuous", [False, True])
def test_direct_aec_stepping_matches_the_parallel_api(scenario, continuous):
    """The wrapper drives mpe2's raw AEC env itself; PettingZoo's parallel API must give the
    same episodes (observations, state, rewards, flags) from the same seed and actions."""
    fast = make(scenario=scenario, continuous_actions=continuous, common_reward=False, seed=5)
    slow = make(scenario=scenario, continuous_actions=continuous, common_reward=False, seed=5)
    assert fast._aec is not None
    slow._aec, slow._seeded = None, False
    slow.reset()
    fast._seeded = False
    fast.reset()
    rng = np.random.default_rng(0)
    for _ in range(2):
        fast.reset(), slow.reset()
        done = False
        while not done:
            assert np.array_equal(fast.get_obs(), slow.get_obs())
            assert np.array_equal(fast.get_state(), slow.get_state())
            if continuous:  # wide enough to need clipping to the bounds
                a = rng.uniform(-0.5, 1.5, size=(fast.n_agents, fast.n_actions))
            else:
                a = rng.integers(0, fast.agent_action_sizes, size=fast.n_agents)
            r1, done, i1 = fast.step(a)
            r2, done2, i2 = slow.step(a)
            assert np.array_equal(r1, r2) and done == done2 and i1 == i2
            assert np.array_equal(fast.get_indi_terminated(), slow.get_indi_terminated())
            assert np.array_equal(fast.get_avail_actions(), slow.get_avail_actions())


# --- the NumPy port of simple_spread_v3 (envs/mpe_batch.py) ---------------------------------
@pytest.mark.parametrize(
    "options",
    [{}, {"continuous_actions": True}, {"common_reward": False}, {"N": 4, "local_ratio": 0.3}],
)
def test_numpy_simple_spread_equals_mpe2_bit_for_bit(options):
    from envs.mpe_batch import SimpleSpreadBatch
    from runners.base import env_command, stack_replies
    from utils.seeding import env_seed

    B, seed = 5, 7
    args = {"scenario": "simple_spread_v3", "max_cycles": 25, "seed": seed, **options}
    refs = [PettingZooEnv(**{**args, "seed": env_seed(seed, i)}) for i in range(B)]
    fast = SimpleSpreadBatch(B, **args)
    n = args.get("N", 3)
    rng = np.random.default_rng(0)
    for _ in range(2):
        ref = stack_replies([env_command(e, "reset", None) for e in refs])
        out = fast.reset_batch()
        for k in ("obs", "state", "avail_actions"):
            assert np.array_equal(ref[k], out[k]), k
        for t in range(25):
            if args.get("continuous_actions"):  # outside the box too: both clip
                acts = rng.uniform(-0.2, 1.2, (B, n, 5)).astype(np.float32)
            else:
                acts = rng.integers(0, 5, (B, n))
            ref = stack_replies([env_command(e, "step", a) for e, a in zip(refs, acts, strict=True)])
            out = fast.step_batch(acts)
            for k in ("obs", "state", "avail_actions", "reward", "terminated", "indi_terminated"):
                assert np.array_equal(np.asarray(ref[k]), np.asarray(out[k])), (t, k)
                assert np.asarray(ref[k]).dtype == np.asarray(out[k]).dtype, k
            assert ref["info"] == out["info"]
    assert fast.get_env_info() == refs[0].get_env_info()


def test_numpy_simple_spread_takes_only_what_it_reproduces():
    from envs.mpe_batch import applies

    assert applies(
        {"scenario": "simple_spread_v3", "key": "", "max_cycles": 25, "seed": 1, "common_reward": True}
    )
    assert not applies({"scenario": "simple_adversary_v3"})
    assert not applies({"scenario": "simple_spread_v3", "num_agent_neighbors": 2})
    assert not applies({"scenario": "simple_spread_v3", "key": "mpe2.simple_spread_v3"})


def test_vector_runs_with_and_without_the_numpy_port_log_the_same(tmp_path, monkeypatch):
    import json
    import os

    from envs.mpe_batch import SimpleSpreadBatch
    from helpers import run_main, sacred_runs

    steps = []
    original = SimpleSpreadBatch.step_batch
    monkeypatch.setattr(SimpleSpreadBatch, "step_batch", lambda self, a: steps.append(1) or original(self, a))
    extra = ["runner=vector", "batch_size_run=4", "t_max=300", "test_nepisode=4"]
    for flag in ("True", "False"):
        before = len(steps)
        assert run_main(tmp_path / flag, "qmix", extra=[*extra, f"numpy_mpe={flag}"]) == 0
        assert (len(steps) > before) == (flag == "True")  # the port ran only when asked
    metrics = []
    for flag in ("True", "False"):
        with open(os.path.join(sacred_runs(tmp_path / flag)[0], "metrics.json")) as f:
            metrics.append(json.load(f))
    a, b = metrics
    assert {k: v["values"] for k, v in a.items()} == {k: v["values"] for k, v in b.items()}
