"""VMAS: the wrapper's contract (shapes, padding, rewards, termination against time-limit cuts,
seeding), the vector runner stepping one batched env, and short runs writing their records."""

import glob
import json
import os
import sys

import numpy as np
import pytest
import torch

import main
from envs.vmas_env import VMASEnv, validate_env_args
from helpers import make_args
from runners import REGISTRY as r_REGISTRY
from utils.errors import ConfigError
from utils.logger import Logger, get_console_logger


def env(**kw):
    return VMASEnv(**{"scenario": "navigation", "max_steps": 6, "seed": 3, "n_agents": 3, **kw})


def test_contract_shapes_padding_and_state():
    e = env()
    info = e.get_env_info()
    assert info["n_agents"] == 3 and info["episode_limit"] == 6 and info["action_space"] == "discrete"
    assert info["n_actions"] == e.env.action_space[0].n
    assert info["obs_shape"] == max(int(np.prod(s.shape)) for s in e.env.observation_space)
    assert info["state_shape"] == 3 * info["obs_shape"]
    obs, state = e.reset()
    assert len(obs) == 3 and np.array_equal(np.concatenate(obs), state)
    assert e.get_avail_actions().shape == (3, info["n_actions"]) and e.get_avail_actions().all()
    c = env(continuous_actions=True)
    ci = c.get_env_info()
    assert ci["action_space"] == "continuous" and ci["n_actions"] == 2
    assert ci["action_low"] == [-1.0, -1.0] and ci["action_high"] == [1.0, 1.0]


def test_rewards_per_agent_and_team():
    rng = np.random.default_rng(0)
    ind, team = env(common_reward=False), env(common_reward=True)
    for _ in range(3):
        a = rng.integers(0, ind.n_actions, 3)
        r_ind, _, _ = ind.step(a)
        r_team, _, _ = team.step(a)
        assert np.shape(r_ind) == (3,) and r_team == pytest.approx(float(np.sum(r_ind)))
    mean = env(common_reward=True, reward_scalarisation="mean")
    ind2 = env(common_reward=False)
    a = rng.integers(0, ind.n_actions, 3)
    assert mean.step(a)[0] == pytest.approx(float(np.mean(ind2.step(a)[0])))


def test_last_step_info_sums_the_scenarios_reward_parts():
    # navigation's reward is pos_rew + final_rew + agent_collisions per agent (shared_rew=False);
    # the last step's info carries each part summed over the episode, averaged over agents
    e = env(num_envs=8, continuous_actions=True, common_reward=False, shared_rew=False, agent_radius=0.3)
    total = np.zeros((8, 3))
    obs = e.reset_batch()["obs"]
    for t in range(6):  # everyone heads for the centre at full force, so they collide
        out = e.step_batch(np.clip(-5 * obs[..., :2], -1, 1))
        obs = out["obs"]
        total += out["reward"]
        if t < 5:
            assert set(out["info"][0]) == {"episode_limit"}
    parts = [sum(info[k] for k in ("pos_rew", "final_rew", "agent_collisions")) for info in out["info"]]
    assert np.allclose(parts, total.mean(1), atol=1e-5)
    assert any(info["agent_collisions"] < 0 for info in out["info"])
    assert e.reset_batch() and e._info_sums == {}


def test_time_limit_is_a_cut_and_scenario_done_a_termination(monkeypatch):
    e = env()
    for t in range(6):
        _, done, info = e.step([0, 0, 0])
        assert done == (t == 5) and info["episode_limit"] == (t == 5)
    assert not e.get_indi_terminated().any()
    # a scenario that says done for copy 0 at its second step: a true termination there
    b = env(num_envs=2)
    calls = {"n": 0}

    def done():
        calls["n"] += 1
        return torch.tensor([calls["n"] >= 2, False])

    monkeypatch.setattr(b.env.scenario, "done", done)
    b.reset_batch()
    out = b.step_batch(np.zeros((2, 3), dtype=np.int64))
    assert not out["terminated"].any()
    out = b.step_batch(np.zeros((2, 3), dtype=np.int64))
    assert out["terminated"].tolist() == [True, False] and out["info"][0]["episode_limit"] is False
    assert out["indi_terminated"][0].all() and not out["indi_terminated"][1].any()


def test_seeding_gives_the_same_episodes_whatever_else_draws():
    a = env(num_envs=4)
    torch.rand(50)
    np.random.rand(5)
    b = env(num_envs=4)
    c = env(num_envs=4, seed=4)
    before = torch.get_rng_state()
    ra, rb, rc = a.reset_batch(), b.reset_batch(), c.reset_batch()
    assert np.array_equal(ra["obs"], rb["obs"]) and not np.array_equal(ra["obs"], rc["obs"])
    assert torch.equal(before, torch.get_rng_state())  # the run's generators are left alone
    acts = np.random.default_rng(1).integers(0, a.n_actions, (4, 3))
    assert np.array_equal(a.step_batch(acts)["obs"], b.step_batch(acts)["obs"])


def test_bad_scenario_and_kwargs_are_named():
    with pytest.raises(ConfigError, match="unknown VMAS scenario.*'navigaton'.*navigation"):
        validate_env_args({"scenario": "navigaton", "max_steps": 10})
    with pytest.raises(ConfigError, match="max_steps"):
        validate_env_args({"scenario": "navigation", "max_steps": 0})
    with pytest.raises(ConfigError, match="cannot be built with"):
        validate_env_args({"scenario": "navigation", "max_steps": 10, "n_agents": "three"})


def test_missing_package_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "vmas", None)  # import vmas now raises ImportError
    with pytest.raises(ConfigError, match="needs the package 'vmas': pip install vmas"):
        VMASEnv(scenario="navigation", max_steps=5)


class _RandomMAC:
    """Random available actions; what the vector runner asks of a controller."""

    action_selector = None

    def __init__(self, n_actions):
        self.n_actions = n_actions
        self.g = torch.Generator().manual_seed(0)

    def init_hidden(self, batch_size):
        pass

    def episode_data(self):
        return {}

    def select_actions(self, batch, t_ep, t_env, bs=slice(None), test_mode=False):
        n = len(bs) if isinstance(bs, list) else batch.batch_size
        return torch.randint(0, self.n_actions, (n, batch["obs"].shape[2]), generator=self.g)

    def env_actions(self, actions, batch, t, bs):
        return actions


def test_vector_runner_batch_equals_stepping_the_batched_env_by_hand():
    from assembly import build_scheme

    env_args = {"scenario": "navigation", "max_steps": 5, "seed": 7, "n_agents": 3, "common_reward": False}
    args = make_args(env="vmas", env_args=env_args, runner="vector", batch_size_run=4, common_reward=False)
    runner = r_REGISTRY["vector"](args=args, logger=Logger(get_console_logger()))
    assert len(runner.envs) == 1 and runner.envs[0].num_envs == 4  # one batched env, not 4 envs
    info = runner.get_env_info()
    args.n_agents, args.n_actions = info["n_agents"], info["n_actions"]
    scheme, groups, preprocess = build_scheme(args, info)
    runner.setup(scheme=scheme, groups=groups, preprocess=preprocess, mac=_RandomMAC(info["n_actions"]))
    batch = runner.run(test_mode=False)
    assert runner.t_env == 4 * 5
    ref = VMASEnv(**{**env_args, "num_envs": 4})
    data = ref.reset_batch()  # the same seed; both were also reset once at construction
    for t in range(5):
        assert np.allclose(batch["obs"][:, t].numpy(), data["obs"]), t
        assert np.allclose(batch["state"][:, t].numpy(), data["state"]), t
        data = ref.step_batch(batch["actions"][:, t, :, 0].numpy())
        assert np.allclose(batch["reward"][:, t].numpy(), data["reward"]), t
        assert batch["terminated"][:, t, 0].tolist() == [0] * 4  # step 5 is a cut, not an end
    assert np.allclose(batch["obs"][:, 5].numpy(), data["obs"])
    assert batch["filled"][:, :5].all() and not batch["filled"][:, 6:].any()


CUDA_RUNS = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.mark.parametrize(
    "config,extra",
    [
        ("qmix", []),
        ("maddpg", ["env_args.continuous_actions=True"]),
        ("mappo", []),
        pytest.param("qmix", ["device=cuda"], marks=CUDA_RUNS),
        pytest.param("maddpg", ["env_args.continuous_actions=True", "device=cuda"], marks=CUDA_RUNS),
        pytest.param("mappo", ["device=cuda"], marks=CUDA_RUNS),
    ],
)
def test_short_runs_write_their_record(tmp_path, config, extra):
    argv = [
        f"--config={config}",
        "--env-config=vmas",
        "with",
        "env_args.max_steps=10",
        "env_args.n_agents=2",
        "batch_size_run=4",
        "batch_size=4",
        "t_max=120",
        "test_interval=120",
        "test_nepisode=4",
        "buffer_size=20",
        "transition_batch_size=0",
        f"local_results_path={tmp_path}",
        *extra,
    ]
    assert main.main(argv) == 0
    (run,) = glob.glob(os.path.join(str(tmp_path), "sacred", "*", "*", "*", "[0-9]*"))
    with open(os.path.join(run, "run.json")) as f:
        assert json.load(f)["status"] == "COMPLETED"
    with open(os.path.join(run, "metrics.json")) as f:
        metrics = json.load(f)
    assert {"return_mean", "test_return_mean"} <= set(metrics)
    assert any(k in metrics for k in ("loss", "critic_loss"))


def _vmas_runner(config, overrides, mac=None, device="cpu"):
    """A vector runner on VMAS with `config`'s controller (or `mac`), built as run.py builds one."""
    from types import SimpleNamespace

    from assembly import build
    from config import load_config

    cfg = load_config([f"--config={config}", "--env-config=vmas", "with", "runner=vector", *overrides])
    args = SimpleNamespace(**cfg)
    args.device, args.unique_token = device, "test"
    args.env_args = {**args.env_args, "device": device}
    parts = build(args, Logger(get_console_logger()), buffer=False)
    if mac is not None:
        parts.runner.mac = mac
    return parts.runner


def test_vector_runner_keeps_vmas_on_its_device_and_writes_what_the_step_path_writes():
    kw = [
        "env_args.max_steps=6",
        "env_args.seed=5",
        "env_args.n_agents=2",
        "common_reward=False",
        "mixer=None",
        "batch_size_run=3",
    ]
    dev = _vmas_runner("qmix", kw, _RandomMAC(5))
    step = _vmas_runner("qmix", kw, _RandomMAC(5))
    assert dev.on_device
    step.on_device = False
    for _ in range(2):
        b_dev, b_step = dev.run(), step.run()
        for key in b_step.data.transition_data:
            assert torch.allclose(b_dev[key].float(), b_step[key].float()), key
    assert dev.t_env == step.t_env == 2 * 3 * 6
    assert np.allclose(dev.train_returns, step.train_returns)
    assert dev.train_stats.keys() == step.train_stats.keys() >= {"pos_rew", "agent_collisions"}
    assert all(np.isclose(dev.train_stats[k], step.train_stats[k]) for k in dev.train_stats)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize(
    "config,continuous", [("qmix", False), ("mappo", False), ("mappo", True), ("maddpg", True)]
)
def test_on_cuda_episodes_stay_on_the_gpu(config, continuous):
    """device=cuda: VMAS, the controller and the batch on the GPU, and the runner's own code
    reads nothing back to the host while the episodes run, except its check every CHECK_EVERY
    steps whether all are over (torch's sync debug mode names each synchronising call)."""
    import warnings

    kw = [
        "env_args.max_steps=32",
        "env_args.n_agents=3",
        "batch_size_run=16",
        "batch_size=16",
        "epsilon_start=0.5",
    ]
    kw.append(f"env_args.continuous_actions={continuous}")
    runner = _vmas_runner(config, kw, device="cuda")
    runner.run()  # warm-up
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batch = runner.run()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert batch["obs"].is_cuda and batch["actions"].is_cuda
    ours = [w for w in caught if "synchroniz" in str(w.message) and w.filename.startswith(src)]
    sites = [f"{os.path.relpath(w.filename, src)}:{w.lineno} {_line(w).strip()}" for w in ours]
    in_loop = [s for s in sites if "alive.any" in s]
    assert len(in_loop) <= 32 // runner.CHECK_EVERY, sites
    assert len(sites) - len(in_loop) <= 8, sites  # the reads after the loop


def _line(w):
    import linecache

    return linecache.getline(w.filename, w.lineno)
