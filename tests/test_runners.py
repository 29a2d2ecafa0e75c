import time

import numpy as np
import pytest
import torch

from runners.parallel_runner import EnvWorkerError
from utils.seeding import env_seed


def lengths(k, ep_len=5):
    """The mock env's episode lengths (ep_len + seed % 3) of a k-env runner seeded 0."""
    return sum(ep_len + env_seed(0, i) % 3 for i in range(k))


def test_episode_runner_layout_terminated(mock_setup):
    args, runner, _ = mock_setup(ep_len=5, episode_limit=10)
    b = runner.run(test_mode=False)
    assert b["filled"][0, :, 0].tolist() == [1] * 6 + [0] * 5
    assert b["terminated"][0, :, 0].tolist() == [0, 0, 0, 0, 1] + [0] * 6
    assert b["reward"][0, :, 0].tolist() == [3, 6, 9, 12, 15] + [0] * 6  # (1 + 2) * t
    assert b["obs"][0, :6, 0, 0].tolist() == [0, 1, 2, 3, 4, 5] and b["obs"][0, 6:].abs().sum() == 0
    assert b["state"][0, :6, 0].tolist() == [0, 1, 2, 3, 4, 5]
    assert (b["actions_onehot"][0, :6].sum(-1) == 1).all()  # actions at 0..T_ep, the last one extra
    assert b["actions_onehot"][0, 6:].sum() == 0
    assert runner.t_env == 5


def test_episode_runner_time_limit_not_terminal(mock_setup):
    _, runner, _ = mock_setup(ep_len=50, episode_limit=10)
    b = runner.run()
    assert b["filled"][0, :, 0].sum() == 11
    assert b["terminated"].sum() == 0  # a time-limit cut bootstraps


@pytest.mark.parametrize("runner_name,n", [("episode", 1), ("parallel", 2)])
def test_indi_terminated_recorded(mock_setup, runner_name, n):
    _, runner, _ = mock_setup(
        runner=runner_name, batch_size_run=n, ep_len=6, death_steps=[2, None, 4], n_agents=3
    )
    b = runner.run()
    for i in range(n):
        flags = b["indi_terminated"][i, :6].numpy()  # after transition t the env is at t + 1
        assert flags[:, 0].tolist() == [0, 1, 1, 1, 1, 1]
        assert flags[:, 1].tolist() == [0] * 6
        assert flags[:, 2].tolist() == [0, 0, 0, 1, 1, 1]
        # dead agents may only take action 0 (no-op)
        assert (b["actions"][i, 2:6, 0, 0] == 0).all()


def test_parallel_equals_stacked_episodes(mock_setup):
    k = 3
    _, par, mac_p = mock_setup(runner="parallel", batch_size_run=k, ep_len=5, episode_limit=10)
    batch_p = par.run(test_mode=True)
    assert par.t_env == 0  # test runs do not count
    batch_p2 = par.run(test_mode=False)
    assert par.t_env == lengths(k) and len({5 + env_seed(0, i) % 3 for i in range(k)}) > 1
    for i in range(k):
        _, ep, mac_e = mock_setup(runner="episode", ep_len=5, episode_limit=10, seed=env_seed(0, i))
        mac_e.load_state(mac_p)
        batch_e = ep.run(test_mode=True)
        for key in batch_e.data.transition_data:
            assert torch.equal(batch_p[key][i], batch_e[key][0]), key
    assert torch.equal(batch_p["filled"], batch_p2["filled"])


def test_runner_logs_stats(mock_setup):
    args, runner, _ = mock_setup(ep_len=5, common_reward=False)
    args.runner_log_interval = 1
    args.test_nepisode = 2
    runner.run()
    stats = runner.logger.stats
    assert stats["agent0_return_mean"][-1][1] == 15.0 and stats["agent1_return_mean"][-1][1] == 30.0
    assert stats["return_mean"][-1][1] == 45.0 and stats["ep_length_mean"][-1][1] == 5
    assert stats["score_mean"][-1][1] == 1.0 and "epsilon" in stats
    runner.run(test_mode=True)
    assert "test_return_mean" not in stats  # logged once test_nepisode episodes are in
    runner.run(test_mode=True)
    assert stats["test_return_mean"][-1][1] == 45.0


def test_dead_worker_raises_instead_of_hanging(mock_setup):
    _, runner, _ = mock_setup(runner="parallel", batch_size_run=2, ep_len=5, crash_at_step=2)
    start = time.time()
    with pytest.raises(EnvWorkerError, match=r"env worker \d \(pid \d+\) died with exit code 3"):
        runner.run()
    assert time.time() - start < 30


def test_default_env_workers_one_per_core(mock_setup, monkeypatch):
    import runners.parallel_runner as pr

    monkeypatch.setattr(pr, "usable_cores", lambda: 2)
    _, runner, _ = mock_setup(runner="parallel", batch_size_run=5)
    assert runner.groups == [[0, 1, 2], [3, 4]]
    _, runner, _ = mock_setup(runner="parallel", batch_size_run=1)
    assert runner.groups == [[0]]


def test_env_workers_above_envs_refused():
    from config import load_config
    from utils.errors import ConfigError

    with pytest.raises(ConfigError, match=r"env_workers=4 is more processes than envs \(batch_size_run=2\)"):
        load_config(
            [
                "--config=qmix",
                "--env-config=mpe",
                "with",
                "runner=parallel",
                "batch_size_run=2",
                "env_workers=4",
            ]
        )


def test_workers_exit_after_close(mock_setup):
    _, runner, _ = mock_setup(runner="parallel", batch_size_run=3, env_workers=3)
    runner.run()
    runner.close_env()
    assert not any(p.is_alive() for p in runner.ps)


def test_env_seeds_of_neighbouring_runs_do_not_overlap():
    runs = [{env_seed(seed, i) for i in range(10)} for seed in range(1, 6)]
    assert all(len(r) == 10 for r in runs)
    assert all(not (a & b) for j, a in enumerate(runs) for b in runs[j + 1 :])
    assert env_seed(7, 0) == 7  # env 0 keeps the run seed, as the episode runner's env


@pytest.mark.parametrize("env_workers", [0, 1, 2, 3])
def test_vector_runner_equals_parallel_runner(mock_setup, env_workers):
    """The in-process vector runner plays the same episodes as the parallel runner from the same
    seeds and controller, whatever the number of worker processes the envs are spread over (0:
    none, the parallel runner's envs in this process): every field of the batch, training and
    test episodes, and t_env."""
    k = 3
    _, par, mac_p = mock_setup(
        runner="parallel", batch_size_run=k, env_workers=env_workers, ep_len=5, episode_limit=10
    )
    assert len(par.ps) == env_workers
    assert sorted(i for g in par.groups for i in g) == ([0, 1, 2] if env_workers else [])
    assert (par.local_envs is None) == (env_workers > 0)
    _, vec, mac_v = mock_setup(runner="vector", batch_size_run=k, ep_len=5, episode_limit=10)
    mac_v.load_state(mac_p)
    for test_mode in (False, True):
        np.random.seed(4)
        torch.manual_seed(4)
        batch_p = par.run(test_mode=test_mode)
        np.random.seed(4)
        torch.manual_seed(4)
        batch_v = vec.run(test_mode=test_mode)
        for key in batch_p.data.transition_data:
            assert torch.equal(batch_p[key], batch_v[key]), key
    assert par.t_env == vec.t_env == lengths(k)


def _batch_env_runner(monkeypatch, lengths, common_reward=True):
    """A vector runner of 4 copies of the batched mock env, with a basic controller."""
    import runners.vector_runner as vector_runner
    from assembly import build_scheme
    from controllers import REGISTRY as mac_REGISTRY
    from helpers import MockBatchEnv, make_args
    from utils.logger import Logger, get_console_logger

    monkeypatch.setattr(vector_runner, "batched", lambda env, env_args, numpy_mpe=True: MockBatchEnv)
    env_args = {"lengths": lengths, "episode_limit": 8, "common_reward": common_reward}
    args = make_args(env="mockbatch", runner="vector", batch_size_run=4, env_args=env_args)
    runner = vector_runner.VectorRunner(args=args, logger=Logger(get_console_logger()))
    info = runner.get_env_info()
    for k in ("n_agents", "n_actions", "state_shape", "obs_shape", "episode_limit"):
        setattr(args, k, info[k])
    args.common_reward = common_reward
    scheme, groups, preprocess = build_scheme(args, info)
    mac = mac_REGISTRY["basic_mac"](
        {**scheme, "actions_onehot": {"vshape": (info["n_actions"],), "group": "agents"}}, groups, args
    )
    runner.setup(scheme=scheme, groups=groups, preprocess=preprocess, mac=mac)
    return runner, mac


@pytest.mark.parametrize(
    "lengths,test_mode,common_reward",
    [
        ((3, 5, 8, 20), True, True),  # ends at 3, 5 and 8 steps and a cut at 8; greedy actions
        ((3, 5, 8, 20), True, False),
        ((20,), False, True),  # all cut at once: epsilon-greedy draws the same numbers on both paths
    ],
)
def test_vector_runner_on_device_equals_step_by_step(monkeypatch, lengths, test_mode, common_reward):
    """The path that keeps a batched env's episodes on its device writes the batch, t_env and
    the logged returns and infos that the step-by-step path writes."""
    step, mac_s = _batch_env_runner(monkeypatch, lengths, common_reward)
    dev, mac_d = _batch_env_runner(monkeypatch, lengths, common_reward)
    assert dev.on_device and step.on_device
    step.on_device = False
    mac_d.load_state(mac_s)
    for _ in range(2):
        np.random.seed(3)
        b_step = step.run(test_mode=test_mode)
        np.random.seed(3)
        b_dev = dev.run(test_mode=test_mode)
        for key in b_step.data.transition_data:
            assert torch.equal(b_step[key], b_dev[key]), key
    assert step.t_env == dev.t_env == (0 if test_mode else 2 * 4 * 8)
    returns = (step.test_returns, dev.test_returns) if test_mode else (step.train_returns, dev.train_returns)
    # training summaries are logged (and cleared) after the first run: the second one's are left
    assert np.allclose(np.asarray(returns[0]), np.asarray(returns[1])) and len(returns[0]) == (
        8 if test_mode else 4
    )
    stats = (step.test_stats, dev.test_stats) if test_mode else (step.train_stats, dev.train_stats)
    assert stats[0].keys() == stats[1].keys() >= {"score", "episode_limit", "ep_length"}
    assert all(np.isclose(stats[0][k], stats[1][k]) for k in stats[0])
    if test_mode:
        filled = b_dev["filled"][:, :, 0].sum(1).tolist()
        assert filled == [4, 6, 9, 9]  # T + 1 steps each: 3, 5, 8 and the cut at 8
        assert b_dev["terminated"][:, :, 0].sum(1).tolist() == [1, 1, 1, 0]


def _first_obs(env):
    if hasattr(env, "reset_batch"):
        return np.asarray(env.reset_batch()["obs"])
    env.reset()
    return np.asarray(env.get_obs())


@pytest.mark.parametrize(
    "name,env_args",
    [
        ("mpe", {"scenario": "simple_spread_v3", "max_cycles": 25}),
        ("skirmish", {"map_name": "2s3z", "placement": "random"}),
        ("skirmish_v2", {"map_name": "10gen_protoss", "scenario": "protoss_5_vs_5"}),
        ("gymma", {"key": "lbforaging:Foraging-8x8-2p-3f-v3"}),
        ("vmas", {"scenario": "navigation", "max_steps": 6, "n_agents": 3}),
        ("mpe_batch", {"scenario": "simple_spread_v3", "max_cycles": 25}),
    ],
)
def test_an_env_given_another_envs_random_state_plays_its_next_episodes(name, env_args):
    # What a checkpoint keeps of an env: a fresh env with the same seed that takes it plays the
    # episodes the first one goes on to play, not the ones its own seed starts with.
    import io
    from functools import partial

    from envs import REGISTRY, batched

    # mpe_batch: MPE's batched NumPy port, three copies in one env
    make = partial(batched("mpe", env_args), num_envs=3) if name == "mpe_batch" else REGISTRY[name]
    first = make(seed=7, **env_args)
    for _ in range(2):
        _first_obs(first)
    state = first.get_rng_state()
    buf = io.BytesIO()
    torch.save(state, buf)  # as run_state.th is written and read back
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    ahead = [_first_obs(first) for _ in range(3)]

    fresh = make(seed=7, **env_args)
    from_seed = _first_obs(make(seed=7, **env_args))
    fresh.set_rng_state(state)
    again = [_first_obs(fresh) for _ in range(3)]
    assert all(np.array_equal(a, b) for a, b in zip(ahead, again, strict=True))
    assert not np.array_equal(from_seed, again[0])


def test_one_episode_loop():
    """Every runner plays its episodes with RunnerBase.run (the vector runner's on-device path
    aside), and the time-limit rule is written once: transition_fields."""
    import inspect

    from runners import REGISTRY as r_REGISTRY
    from runners import base
    from runners.vector_runner import VectorRunner

    for name in ("episode", "parallel", "vector"):
        assert r_REGISTRY[name].run in (base.RunnerBase.run, VectorRunner.run), name
    dispatch = inspect.getsource(VectorRunner.run)  # on-device VMAS, else RunnerBase.run
    assert "super().run(" in dispatch and "while" not in dispatch and "for " not in dispatch
    for name in ("episode_runner", "parallel_runner", "vector_runner"):
        text = inspect.getsource(__import__(f"runners.{name}", fromlist=["x"]))
        assert '"terminated":' not in text and "~cut" not in text, name


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_transition_fields_time_limit_rule(kind):
    from runners.base import transition_fields

    arr = np.asarray if kind == "numpy" else torch.as_tensor
    ended = arr([True, True, False])
    cut = arr([False, True, False])  # env 1 was cut by its episode limit
    out = transition_fields(arr([1.0, 2.0, 3.0]), ended, cut, arr([[1, 0], [0, 0], [0, 0]]))
    assert out["terminated"].tolist() == [[True], [False], [False]]
    assert out["reward"].shape == (3, 1) and out["indi_terminated"].shape == (3, 2)
