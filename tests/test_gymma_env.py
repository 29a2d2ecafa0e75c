"""--env-config=gymma: Gymnasium multi-agent envs with per-agent Tuple spaces (LBF, RWARE)."""

import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from envs.gymma_env import GymmaEnv, validate_env_args
from helpers import read, run_main, sacred_runs
from utils.errors import ConfigError

LBF = "lbforaging:Foraging-8x8-2p-3f-v3"
RWARE = "rware:rware-tiny-2ag-v2"


class Toy(gym.Env):
    """3 agents; agent i is done after done_at[i] steps (or all at once with one flag); reward
    of agent i at step t is (i + 1) * t; observation sizes 2, 3, 4."""

    def __init__(self, done_at=(3, 5, 7), one_flag=False, max_steps=None):
        self.done_at, self.one_flag, self.max_steps = done_at, one_flag, max_steps
        self.action_space = spaces.Tuple([spaces.Discrete(2), spaces.Discrete(3), spaces.Discrete(4)])
        self.observation_space = spaces.Tuple([spaces.Box(-1, 100, (k,)) for k in (2, 3, 4)])

    def _obs(self):
        return tuple(np.full(k, self.t, dtype=np.float32) for k in (2, 3, 4))

    def reset(self, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, actions):
        assert len(actions) == 3
        self.t += 1
        rewards = [float((i + 1) * self.t) for i in range(3)]
        done = [self.t >= d for d in self.done_at]
        if self.one_flag:
            done = all(done)
        if self.max_steps is not None and self.t >= self.max_steps:
            done = True if self.one_flag else [True] * 3
        return self._obs(), rewards, done, False, {}


gym.register("GymmaToy-v0", entry_point=Toy)


def make(key, **kw):
    args = {"key": key, "seed": 1, "common_reward": False, "reward_scalarisation": "sum"}
    return GymmaEnv(**{**args, **kw})


def play(env, steps, actions=None):
    out = []
    for t in range(steps):
        a = actions[t] if actions is not None else np.zeros(env.n_agents, dtype=int)
        reward, done, info = env.step(a)
        out.append((reward, done, info, env.get_obs(), env.get_indi_terminated(), env.get_avail_actions()))
        if done:
            break
    return out


@pytest.mark.parametrize("key,n,obs,acts,limit", [(LBF, 2, 15, 6, 50), (RWARE, 2, 71, 5, 500)])
def test_contract_of_lbf_and_rware(key, n, obs, acts, limit):
    env = make(key)
    info = env.get_env_info()
    assert (info["n_agents"], info["obs_shape"], info["n_actions"], info["episode_limit"]) == (
        n,
        obs,
        acts,
        limit,
    )
    assert info["state_shape"] == n * obs
    o, s = env.reset()
    assert o.shape == (n, obs) and s.shape == (n * obs,) and np.array_equal(s, o.reshape(-1))
    assert env.get_avail_actions().tolist() == [[1] * acts] * n
    rng = np.random.default_rng(0)
    steps = play(env, limit + 5, rng.integers(0, acts, (limit + 5, n)))
    assert all(r[0].shape == (n,) for r in steps)  # one reward per agent
    assert len(steps) <= limit and steps[-1][1]
    if len(steps) == limit:  # the step limit ends the return, as EPyMARL's wrapper reports it
        assert steps[-1][2] == {"episode_limit": False}


@pytest.mark.parametrize("key", [LBF, RWARE])
def test_seeding_repeats_and_separates_episodes(key):
    actions = np.random.default_rng(3).integers(0, 5, (40, 2))

    def trace(seed):
        env = make(key, seed=seed)
        env.reset()
        first = env.get_obs()
        return [first] + [r[3] for r in play(env, 40, actions)]

    a, b, c = trace(1), trace(1), trace(2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=False))


def test_common_reward_is_the_sum_or_mean_of_the_agents():
    env = make("GymmaToy-v0", time_limit=20)
    env.reset()
    indi = play(env, 2)
    for scal, f in (("sum", np.sum), ("mean", np.mean)):
        env = make("GymmaToy-v0", time_limit=20, common_reward=True, reward_scalarisation=scal)
        env.reset()
        team = play(env, 2)
        assert [t[0] for t in team] == pytest.approx([f(i[0]) for i in indi])


def test_padding_per_agent_termination_and_avail_actions():
    env = make("GymmaToy-v0", time_limit=20)
    assert env.get_env_info()["obs_sizes"] == [2, 3, 4] and env.obs_size == 4 and env.n_actions == 4
    env.reset()
    assert env.get_avail_actions().tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    steps = play(env, 20)
    assert len(steps) == 7  # the last agent is done after 7 steps
    obs = steps[0][3]
    assert obs.tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]  # zero-padded
    flags = [s[4].tolist() for s in steps]
    assert flags[2] == [1, 0, 0] and flags[4] == [1, 1, 0] and flags[6] == [1, 1, 1]
    assert steps[3][5][0].tolist() == [1, 0, 0, 0]  # a terminated agent may only no-op
    assert [s[1] for s in steps] == [False] * 6 + [True]
    assert steps[-1][2] == {"episode_limit": False}  # all terminated: a true end


def test_time_limit_cuts_without_terminating():
    cut = {"time_limit_terminal": False}
    env = make("GymmaToy-v0", time_limit=4, done_at=(9, 9, 9), one_flag=True, **cut)
    env.reset()
    steps = play(env, 10)
    assert len(steps) == 4 and steps[-1][1] and steps[-1][2] == {"episode_limit": True}
    assert steps[-1][4].tolist() == [0, 0, 0]
    # the env's own limit (reported as done) counts as a cut too
    env = make("GymmaToy-v0", time_limit=10, done_at=(9, 9, 9), one_flag=True, max_steps=6, **cut)
    assert env.own_limit == 6 and env.episode_limit == 10
    env.reset()
    steps = play(env, 10)
    assert len(steps) == 6 and steps[-1][2] == {"episode_limit": True}
    # a true termination before the limit is not a cut
    env = make("GymmaToy-v0", time_limit=10, done_at=(3, 3, 3), one_flag=True, **cut)
    env.reset()
    steps = play(env, 10)
    assert len(steps) == 3 and steps[-1][2] == {"episode_limit": False} and steps[-1][4].tolist() == [1, 1, 1]


@pytest.mark.parametrize("time_limit,max_steps,length", [(4, None, 4), (10, 6, 6)])
def test_by_default_the_time_limit_ends_the_return_as_in_epymarl(time_limit, max_steps, length):
    """EPyMARL's gymma wrapper passes the env's done flag (or gymnasium's TimeLimit) on as a
    termination, so its actor-critic algorithms do not bootstrap there: the runners store the
    step as terminated, whatever an algorithm's time_limit_bootstrap says."""
    env = make("GymmaToy-v0", time_limit=time_limit, done_at=(9, 9, 9), one_flag=True, max_steps=max_steps)
    env.reset()
    steps = play(env, 10)
    assert len(steps) == length and steps[-1][1] and steps[-1][2] == {"episode_limit": False}


def test_time_limit_terminal_must_be_a_bool():
    base = {"seed": 1, "common_reward": True, "reward_scalarisation": "sum", "time_limit": None}
    with pytest.raises(ConfigError, match=r"env_args.time_limit_terminal='yes' is not valid; valid choices"):
        validate_env_args({**base, "key": LBF, "time_limit_terminal": "yes"})


def test_bad_keys_are_refused_in_one_line():
    base = {"seed": 1, "common_reward": True, "reward_scalarisation": "sum", "time_limit": None}
    with pytest.raises(ConfigError, match=r"did you mean .*Foraging-8x8-2p-3f-v3"):
        validate_env_args({**base, "key": "lbforaging:Foraging-8x8-2p-3f-v9"})
    with pytest.raises(ConfigError, match=r"needs the package 'nosuchsuite': pip install nosuchsuite"):
        validate_env_args({**base, "key": "nosuchsuite:Thing-v0"})
    with pytest.raises(ConfigError, match=r"env_args.key is empty"):
        validate_env_args({**base, "key": ""})
    with pytest.raises(ConfigError, match=r"env_args.time_limit=0 must be a positive integer"):
        validate_env_args({**base, "key": LBF, "time_limit": 0})
    with pytest.raises(ConfigError, match=r"cannot be built with \{'no_such_arg': 1\}"):
        validate_env_args({**base, "key": LBF, "no_such_arg": 1})


@pytest.mark.parametrize("key", [LBF, RWARE])
@pytest.mark.parametrize("alg", ["qmix", "maddpg"])
def test_short_runs_write_sacred_record(tmp_path, key, alg):
    extra = [f"env_args.key={key}", "env_args.time_limit=25", "common_reward=True"]
    assert run_main(tmp_path, alg, env="gymma", extra=extra) == 0
    (run,) = sacred_runs(tmp_path)
    assert run.startswith(os.path.join(str(tmp_path), "sacred", "gymma", key.rpartition(":")[2], alg))
    assert read(run, "run.json")["status"] == "COMPLETED"
    assert "test_return_mean" in read(run, "metrics.json")


def test_vector_and_parallel_runners_on_lbf(tmp_path):
    for runner in ("vector", "parallel"):
        extra = [f"env_args.key={LBF}", "env_args.time_limit=25", f"runner={runner}", "batch_size_run=2"]
        assert run_main(tmp_path / runner, "qmix", env="gymma", extra=extra) == 0
        (run,) = sacred_runs(tmp_path / runner)
        assert read(run, "run.json")["status"] == "COMPLETED"


def readme_lbf_tasks():
    """docs/environments.md's rows for EPyMARL's LBF benchmark tasks: (task name, env_args)."""
    readme = read(os.path.join(os.path.dirname(__file__), "..", "docs"), "environments.md")
    rows = []
    for line in readme.splitlines():
        if line.startswith("| LBF "):
            name, args = (cell.strip() for cell in line.strip("|").split("|"))
            kv = dict(tok.split("=", 1) for tok in args.strip("`").split())
            rows.append((name[len("LBF ") :], kv))
    return rows


def test_readme_lists_epymarls_seven_lbf_tasks():
    assert len(readme_lbf_tasks()) == 7


@pytest.mark.parametrize("name,kv", readme_lbf_tasks())
def test_readme_lbf_tasks_build_as_named(name, kv):
    # "15x15-3p-5f": 15x15 grid, 3 players, 5 foods; "2s": sight 2; "c": cooperative foods
    size, players, foods = name.split("-")[:3]
    n, f = int(players[:-1]), int(foods[:-1])
    extra = {k: int(v) for k, v in kv.items() if k != "key"}
    env = make(kv["key"], **extra)
    info = env.get_env_info()
    assert info["n_agents"] == n
    assert info["obs_shape"] == 3 * (n + f)  # x, y, level of every food and player
    base = env.env.unwrapped
    assert base.field_size == (int(size.split("x")[0]),) * 2
    assert base.sight == (2 if "-2s" in name else base.field_size[0])
    assert base.force_coop == name.endswith("-c")
