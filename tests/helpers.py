"""Helpers the tests share: a deterministic mock env, configs without a command line, random
episode batches, and short end-to-end runs."""

import copy
import glob
import importlib.util
import json
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch

import main
from assembly import build
from components.episode_buffer import EpisodeBatch
from components.transforms import OneHot
from envs.multiagentenv import MultiAgentEnv
from utils.logger import Logger, get_console_logger

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_bench(name):
    """The module bench/<name>.py (bench/ is scripts, not a package), loaded as Python runs it:
    with bench/ first on the path, so that the sibling scripts it imports are found."""
    bench = os.path.join(ROOT, "bench")
    spec = importlib.util.spec_from_file_location(name, os.path.join(bench, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, bench)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(bench)
    return module


METRICS = {
    "return_mean",
    "return_std",
    "ep_length_mean",
    "test_return_mean",
    "test_return_std",
    "test_ep_length_mean",
    "loss",
    "grad_norm",
    "td_error_abs",
    "q_taken_mean",
    "target_mean",
    "epsilon",
}


class MockEnv(MultiAgentEnv):
    """Deterministic test env. Episode length ep_len + seed % 3 (a true termination) unless that
    reaches episode_limit (a time-limit cut). Agent i dies at step death_steps[i] (None: never).
    Observation of agent i at step t: [t, i, seed, 1]; state: [t, seed]."""

    def __init__(
        self,
        n_agents=2,
        n_actions=3,
        episode_limit=10,
        ep_len=5,
        death_steps=None,
        seed=0,
        common_reward=True,
        reward_scalarisation="sum",
        crash_at_step=None,
        raise_at_t=None,
        **_,
    ):
        self.n_agents, self.n_actions, self.episode_limit = n_agents, n_actions, episode_limit
        self.seed_ = seed or 0
        self.length = ep_len + self.seed_ % 3
        self.death_steps = death_steps or [None] * n_agents
        self.common_reward = common_reward
        self.crash_at_step = crash_at_step
        self.raise_at_t = raise_at_t  # raise after this many steps in total (a crashing run)
        self.total_steps = 0
        self.t = 0

    def reset(self):
        self.t = 0
        return self.get_obs(), self.get_state()

    def dead(self):
        return np.array([d is not None and self.t >= d for d in self.death_steps], dtype=np.uint8)

    def step(self, actions):
        if self.crash_at_step is not None and self.t == self.crash_at_step:
            os._exit(3)
        self.total_steps += 1
        if self.raise_at_t is not None and self.total_steps > self.raise_at_t:
            raise RuntimeError("mock env failure")
        self.t += 1
        rewards = np.array([(i + 1) * self.t for i in range(self.n_agents)], dtype=np.float32)
        terminated = self.t >= self.length
        limit = self.t >= self.episode_limit and not terminated
        reward = float(rewards.sum()) if self.common_reward else rewards
        return reward, terminated or limit, {"episode_limit": limit, "score": 1.0}

    def get_obs(self):
        return np.array([[self.t, i, self.seed_, 1] for i in range(self.n_agents)], dtype=np.float32)

    def get_obs_size(self):
        return 4

    def get_state(self):
        return np.array([self.t, self.seed_], dtype=np.float32)

    def get_state_size(self):
        return 2

    def get_avail_actions(self):
        avail = np.ones((self.n_agents, self.n_actions), dtype=np.uint8)
        avail[self.dead() == 1] = 0
        avail[self.dead() == 1, 0] = 1
        return avail

    def get_total_actions(self):
        return self.n_actions

    def get_indi_terminated(self):
        return self.dead()


def make_args(**overrides):
    """A config namespace from every key's default plus overrides (no command line)."""
    from config_keys import load_defaults

    cfg = load_defaults()
    cfg.update(device="cpu", seed=0, unique_token="test")
    cfg.update(overrides)
    return SimpleNamespace(**cfg)


N, A, OBS, S, L = 3, 4, 5, 6, 8  # agents, actions, obs, state, stored length


def make_batch(lengths=(5, 7, 3), terminated=(True, False, True), seed=0, individual=False):
    """Random episodes; episode b has lengths[b] steps (filled 0..T_ep)."""
    g = torch.Generator().manual_seed(seed)
    scheme = {
        "state": {"vshape": S},
        "obs": {"vshape": OBS, "group": "agents"},
        "avail_actions": {"vshape": (A,), "group": "agents", "dtype": torch.uint8},
        "actions": {"vshape": (1,), "group": "agents", "dtype": torch.long},
        "reward": {"vshape": (N,) if individual else (1,)},
        "terminated": {"vshape": (1,), "dtype": torch.uint8},
        "indi_terminated": {"vshape": (N,), "dtype": torch.uint8},
    }
    b = EpisodeBatch(
        scheme,
        {"agents": N},
        len(lengths),
        L,
        preprocess={"actions": ("actions_onehot", [OneHot(out_dim=A)])},
    )
    for i, (T, term) in enumerate(zip(lengths, terminated, strict=True)):
        avail = (torch.rand(T + 1, N, A, generator=g) > 0.3).to(torch.uint8)
        avail[..., 0] = 1
        actions = torch.multinomial(avail.reshape(-1, A).float(), 1, generator=g).view(T + 1, N, 1)
        b.update(
            {
                "state": torch.randn(T + 1, S, generator=g),
                "obs": torch.randn(T + 1, N, OBS, generator=g),
                "avail_actions": avail,
                "actions": actions,
            },
            bs=i,
            ts=slice(0, T + 1),
        )
        term_flags = torch.zeros(T, 1)
        term_flags[T - 1] = float(term)
        b.update(
            {"reward": torch.randn(T, N if individual else 1, generator=g), "terminated": term_flags},
            bs=i,
            ts=slice(0, T),
            mark_filled=False,
        )
    return b


QUICK = [
    "t_max=300",
    "test_interval=100",
    "test_nepisode=2",
    "log_interval=100",
    "runner_log_interval=100",
    "learner_log_interval=100",
    "batch_size=4",
    "buffer_size=50",
]


def run_main(results, alg="qmix", env="mpe", extra=(), seed=1):
    argv = [
        f"--config={alg}",
        f"--env-config={env}",
        "with",
        f"local_results_path={results}",
        f"seed={seed}",
        *QUICK,
        *extra,
    ]
    return main.main(argv)


def sacred_runs(results):
    return sorted(
        glob.glob(os.path.join(str(results), "sacred", "*", "*", "*", "[0-9]*")),
        key=lambda p: int(os.path.basename(p)),
    )


def read(path, name):
    with open(os.path.join(path, name)) as f:
        return json.load(f) if name.endswith(".json") else f.read()


def brief_training_argv(config, *extra):
    """A short MPE run that still trains (tiny batches, updates from the first episodes)."""
    return [
        f"--config={config}",
        "--env-config=mpe",
        "with",
        "seed=1",
        "t_max=120",
        "test_interval=100",
        "test_nepisode=1",
        "batch_size=2",
        "buffer_size=10",
        "env_args.max_cycles=10",
        "learner_log_interval=10",
        "transition_batch_size=0",
        *extra,
    ]


def learner_args(**overrides):
    """make_args for learners on make_batch's shapes."""
    return make_args(
        n_agents=N,
        n_actions=A,
        state_shape=S,
        obs_shape=OBS,
        episode_limit=L - 1,
        learner_log_interval=0,
        **overrides,
    )


LOSS_KEYS = ("loss", "q_loss", "critic_loss")  # what each learner family logs as its loss


def assert_trains(tmp_path, argv):
    """Run main with argv plus checkpoints: the run completes, logs a finite loss, and its agent
    network's weights at the last checkpoint differ from the first (the learner stepped them)."""
    import math

    results = os.path.join(str(tmp_path), "trains")
    assert (
        main.main([*argv, f"local_results_path={results}", "save_model=True", "save_model_interval=40"]) == 0
    )
    run = sacred_runs(results)[-1]
    assert read(run, "run.json")["status"] == "COMPLETED"
    metrics = read(run, "metrics.json")
    losses = [v for k in LOSS_KEYS if k in metrics for v in metrics[k]["values"]]
    assert losses and all(math.isfinite(v) for v in losses), sorted(metrics)
    models = glob.glob(os.path.join(results, "models", "*"))[0]
    steps = sorted(int(d) for d in os.listdir(models) if d.isdigit())
    first, last = (
        torch.load(os.path.join(models, str(t), "learner.th"), weights_only=True)["agent"]
        for t in (steps[0], steps[-1])
    )
    assert len(steps) >= 2 and any(not torch.equal(first[k], last[k]) for k in first)


class MockBatchEnv(MultiAgentEnv):
    """num_envs copies stepped as one batch, as VMAS: reset_batch/step_batch in NumPy and
    reset_tensors/step_tensors in torch. Copy i's episode ends after lengths[i] steps (a true
    termination) unless episode_limit comes first (a cut); a copy goes on stepping after its end.
    Observation of agent a in copy i at step t: [t, a, i, the sum of the actions it took];
    state: [t, i]; reward (a + 1) * t per agent."""

    def __init__(self, num_envs=4, n_agents=2, n_actions=3, episode_limit=8, lengths=(3, 5, 8, 20), **kw):
        self.num_envs, self.n_agents, self.n_actions = num_envs, n_agents, n_actions
        self.episode_limit = episode_limit
        self.lengths = torch.tensor([lengths[i % len(lengths)] for i in range(num_envs)])
        self.common_reward = kw.get("common_reward", True)
        self.reset_tensors()

    def _data(self):
        e, n = self.num_envs, self.n_agents
        obs = torch.stack(
            [
                self.t.float()[:, None].expand(e, n),
                torch.arange(n).float().expand(e, n),
                torch.arange(e).float()[:, None].expand(e, n),
                self.action_sums.float(),
            ],
            dim=-1,
        )
        state = torch.stack([self.t.float(), torch.arange(e).float()], dim=1)
        avail = torch.ones(e, n, self.n_actions, dtype=torch.uint8)
        return {"state": state, "avail_actions": avail, "obs": obs}

    def reset_tensors(self):
        self.t = torch.zeros(self.num_envs, dtype=torch.long)
        self.action_sums = torch.zeros(self.num_envs, self.n_agents, dtype=torch.long)
        self.score_sums = np.zeros(self.num_envs)
        return self._data()

    def step_tensors(self, actions):
        self.t += 1
        self.action_sums += actions.long()
        rewards = (torch.arange(self.n_agents) + 1).float() * self.t.float()[:, None]
        term = self.t == self.lengths
        out = self._data()
        out.update(
            reward=rewards.sum(1) if self.common_reward else rewards,
            terminated=term,
            cut=(self.t == self.episode_limit) & ~term,
            infos={"score": self.t.float() / 10},
        )
        return out

    def reset_batch(self):
        return {k: v.numpy() for k, v in self.reset_tensors().items()}

    def step_batch(self, actions):
        out = self.step_tensors(torch.as_tensor(np.asarray(actions)))
        term, cut = out.pop("terminated").numpy(), out.pop("cut").numpy()
        self.score_sums = self.score_sums + self.t.float().numpy() / 10
        res = {k: v.numpy() for k, v in out.items() if k != "infos"}
        res.update(
            terminated=term | cut,
            indi_terminated=np.repeat(term[:, None], self.n_agents, axis=1).astype(np.uint8),
            info=[
                {"episode_limit": bool(c), "score": float(s)}
                for c, s in zip(cut, self.score_sums, strict=True)
            ],
        )
        return res

    def get_obs_size(self):
        return 4

    def get_state_size(self):
        return 2

    def get_total_actions(self):
        return self.n_actions


# --- MADDPG on a real mpe2 env (test_maddpg.py, test_td3_sac.py) ---------------------------

MADDPG = dict(
    learner="maddpg_learner",
    mac="maddpg_mac",
    mixer=None,
    agent="mlp",
    lr=0.01,
    critic_lr=0.01,
    optimizer="adam",
    optim_eps=1e-8,
    gamma=0.95,
    target_update_mode="soft",
    tau=0.01,
    obs_agent_id=False,
    obs_last_action=False,
    agent_param_sharing=False,
    standardise_rewards=False,
    grad_norm_clip=0.5,
)


class RecordingLogger(Logger):
    def __init__(self):
        super().__init__(get_console_logger())
        self.stats = {}

    def log_stat(self, key, value, t):
        self.stats[key] = value


def maddpg_setup(scenario="simple_spread_v3", continuous=False, common_reward=True, **overrides):
    """Real mpe2 env, episode runner, MADDPG controller and learner."""
    env_args = dict(
        scenario=scenario,
        max_cycles=5,
        continuous_actions=continuous,
        seed=0,
        common_reward=common_reward,
        reward_scalarisation="sum",
    )
    args = make_args(**{**MADDPG, **overrides}, env="mpe", env_args=env_args, common_reward=common_reward)
    logger = RecordingLogger()
    parts = build(args, logger, buffer=False)
    runner, mac, learner, info = parts.runner, parts.mac, parts.learner, parts.env_info
    return args, runner, mac, learner, info


def play(runner, n=4):
    batches = [runner.run(test_mode=False) for _ in range(n)]
    batch = copy.copy(batches[0])
    batch.data = copy.copy(batches[0].data)
    for store in ("transition_data", "episode_data"):
        setattr(
            batch.data,
            store,
            {
                k: torch.cat([getattr(b.data, store)[k] for b in batches])
                for k in getattr(batches[0].data, store)
            },
        )
    batch.batch_size = n
    return batch


def main_in_process_of_its_own(argv, timeout=300):
    """src/main.py in a process of its own, as from a fresh shell (no protobuf runtime chosen by
    an earlier test) -> CompletedProcess with text stdout and stderr."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    main_py = os.path.join(ROOT, "src", "main.py")
    return subprocess.run(
        [sys.executable, main_py, *argv], capture_output=True, text=True, timeout=timeout, env=env
    )


def real_smac_check(*args):
    """A check of tests/real_smac_checks.py in a process of its own (SMAC and SMACv2 register the
    same maps with PySC2; protobuf's runtime must be chosen first); fails, never skips, if it fails."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    script = os.path.join(ROOT, "tests", "real_smac_checks.py")
    done = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, timeout=900, env=env
    )
    assert done.stdout.strip().splitlines()[-1:] == ["ok"], done.stdout[-2000:] + done.stderr[-3000:]


def hide_package(monkeypatch, name):
    """Make `import name` (and any of its modules, even ones imported earlier in this process) fail
    as if the package were not installed."""
    import sys

    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")] + [name]:
        monkeypatch.setitem(sys.modules, module, None)
