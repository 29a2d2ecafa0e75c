"""Google Research Football behind our env contract (envs/gfootball_env.py). gfootball is built by
install_grf.sh, which .ci/run runs; where it is absent the tests that play it skip saying so."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from envs import REGISTRY
from helpers import read, run_main, sacred_runs
from utils.errors import ConfigError
from utils.seeding import env_seed

HAVE_GRF = (
    importlib.util.find_spec("gfootball") is not None
    and importlib.util.find_spec("gfootball_engine") is not None
)
needs_grf = pytest.mark.skipif(not HAVE_GRF, reason="gfootball is not installed (bash install_grf.sh)")
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def test_without_gfootball_the_run_stops_in_one_line_naming_the_install():
    # gfootball hidden from the interpreter, whether or not this machine has it
    code = (
        "import sys; sys.modules['gfootball_engine'] = None; sys.modules['gfootball'] = None\n"
        "import main; sys.exit(main.main(['--config=qmix', '--env-config=gfootball', 'with', 't_max=100']))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=SRC, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    lines = [
        ln for ln in out.stderr.strip().splitlines() if "UserWarning" not in ln and "pkg_resources" not in ln
    ]
    assert lines[-1].endswith(
        "needs Google Research Football, which is not installed: install it with `bash install_grf.sh` "
        "(apt packages, then an ~8 min build; see docs/environments.md)"
    ), out.stderr
    assert "Traceback" not in out.stderr


def make(**kw):
    return REGISTRY["gfootball"](**kw)


def play(env, actions):
    """One episode with the given action rows (cycled): (obs, states, rewards, ends, infos)."""
    obs, state = env.reset()
    out = [[np.array(obs)], [state], [], [], []]
    for t in range(env.episode_limit):
        r, done, info = env.step(actions[t % len(actions)])
        out[0].append(np.array(env.get_obs()))
        out[1].append(env.get_state())
        out[2].append(r)
        out[3].append(done)
        out[4].append(info)
        if done:
            break
    return out


ACTIONS = np.random.default_rng(0).integers(0, 19, size=(400, 11))


@needs_grf
@pytest.mark.parametrize(
    "scenario, players, duration",
    # from each scenario's build_scenario: every left player is controllable (AddPlayer's default)
    [
        ("academy_3_vs_1_with_keeper", 4, 400),
        ("academy_counterattack_hard", 11, 400),
        ("academy_corner", 11, 400),
    ],
)
def test_agents_and_episode_limit_come_from_the_scenario(scenario, players, duration):
    env = make(map_name=scenario, seed=1)
    info = env.get_env_info()
    assert (env.n_agents, env.episode_limit) == (players, duration)
    assert info["n_agents"] == players and info["episode_limit"] == duration
    assert info["obs_shape"] == 115 and info["state_shape"] == 115 * players and info["n_actions"] == 19
    env.close()


@needs_grf
def test_every_listed_scenario_has_facts():
    from envs.gfootball_env import scenario_facts, scenario_names

    names = scenario_names()
    assert "academy_3_vs_1_with_keeper" in names and "11_vs_11_stochastic" in names
    for name in names:
        facts = scenario_facts(name)
        assert 1 <= facts["controllable"] <= facts["left"] and facts["game_duration"] > 0


@needs_grf
def test_the_docs_scenario_table_matches_gfootball():
    from envs.gfootball_env import scenario_facts

    text = (Path(__file__).resolve().parents[1] / "docs" / "environments.md").read_text()
    block = text.split("| scenario | players | `n_agents` | `attackers` | limit |")[1].split("\n\n")[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in block.strip().splitlines()[1:]]
    assert len(rows) >= 10
    for names, *shown in rows:
        for name in names.split(", "):
            facts = scenario_facts(name)
            real = (
                f"{facts['left']} / {facts['right']}",
                str(facts["controllable"]),
                str(facts["attackers"] or "none"),
                str(facts["game_duration"]),
            )
            assert tuple(shown) == real, name


@needs_grf
def test_same_seed_repeats_episodes_and_workers_differ():
    runs = []
    for seed in (3, 3, env_seed(3, 1)):
        env = make(seed=seed)
        runs.append([play(env, ACTIONS[:, :4]) for _ in range(2)])
        env.close()
    same = all(
        np.array_equal(np.stack(a[0]), np.stack(b[0])) and a[2] == b[2]
        for a, b in zip(runs[0], runs[1], strict=True)
    )
    assert same
    assert not np.array_equal(np.stack(runs[0][0][0]), np.stack(runs[2][0][0]))


@needs_grf
def test_a_restored_random_state_plays_the_same_next_episode():
    env = make(seed=5)
    play(env, ACTIONS[:, :4])
    state = env.get_rng_state()
    expected = play(env, ACTIONS[:, :4])
    env.close()
    other = make(seed=99)
    other.set_rng_state(state)
    got = play(other, ACTIONS[:, :4])
    other.close()
    assert np.array_equal(np.stack(expected[0]), np.stack(got[0])) and expected[2] == got[2]


@needs_grf
def test_fewer_agents_than_players_warns_what_it_means():
    with pytest.warns(UserWarning, match="3 agents for 4 controllable players, so the engine picks"):
        env = make(n_agents=3, seed=1)
    env.close()
    with pytest.raises(ConfigError, match="n_agents=5 is more than academy_3_vs_1_with_keeper's 4"):
        make(n_agents=5)


@needs_grf
def test_time_limit_is_a_cut_terminal_ends_terminate_every_agent():
    env = make(seed=2, time_limit=3)
    _, _, _, ends, infos = play(env, [[0] * 4])  # idle: nothing ends the play in 3 steps
    assert ends == [False, False, True] and infos[-1]["episode_limit"] is True
    assert env.get_indi_terminated().tolist() == [0, 0, 0, 0]
    env.close()
    env = make(seed=2, time_limit=3, time_limit_terminal=True)
    play(env, [[0] * 4])
    assert env.get_indi_terminated().tolist() == [1, 1, 1, 1]
    env.close()
    # a true end: the play stops (a goal, the ball out, possession lost) before the limit
    env = make(seed=2)
    for _ in range(20):
        _, _, _, ends, infos = play(env, ACTIONS[:, :4])
        if len(ends) < env.episode_limit:
            break
    assert infos[-1]["episode_limit"] is False and env.get_indi_terminated().tolist() == [1, 1, 1, 1]
    assert set(infos[-1]) >= {"goal", "conceded", "battle_won"}
    env.close()


@needs_grf
def test_reward_forms_and_the_cds_layout():
    env = make(seed=4, reward="summed", obs="relative", n_agents=3)
    assert env.get_obs_size() == 2 + 2 * 2 + 2 + 2 * 2 + 2 * 2 + 2 * 2 + 2 + 1 + 3  # CDS's 26 on 3 vs 1
    assert env.get_state_size() == 3 * 4 + 2 * 4 + 6
    assert env._reward(1.0, True) == 3.0 and env._reward(-1.0, True) == -3.0
    env.reward_form = "cds"
    assert (env._reward(1.0, True), env._reward(0.0, True), env._reward(0.0, False)) == (100.0, -1.0, -0.0)
    env.reward_form = "score"
    assert env._reward(1.0, True) == 1.0
    obs, state = env.reset()
    raw = env._raw[0]
    me = raw["left_team"][env.controlled_players()[0]]
    assert np.allclose(obs[0][:2], me) and np.allclose(obs[0][-6:-4], raw["ball"][:2] - me)
    env.close()


def same_raw(a, b):
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


@needs_grf
@pytest.mark.parametrize("scenario", ["academy_3_vs_1_with_keeper", "academy_counterattack_hard"])
def test_the_direct_engine_step_plays_footballenvs_own_step(scenario):
    """Our step sends the actions to the engine core and views its observation; FootballEnv.step
    itself, on a twin env with the same seed, gives the same players' observations, rewards and
    ends, step for step, and so the same agents' observations and states."""
    ours, ref = make(map_name=scenario, seed=5), make(map_name=scenario, seed=5, obs="relative")
    ref._engine_step = ref.env.step  # gfootball's own step
    rng = np.random.default_rng(1)
    steps = 0
    for _ in range(2):
        ours.reset(), ref.reset()
        for _ in range(ours.episode_limit):
            actions = rng.integers(0, 19, size=ours.n_agents)
            r, done, info = ours.step(actions)
            r_ref, done_ref, info_ref = ref.step(actions)
            assert (done, info) == (done_ref, info_ref) and r == r_ref
            assert len(ours._raw) == len(ref._raw) == ours.n_agents
            assert all(same_raw(a, b) for a, b in zip(ours._raw, ref._raw, strict=True))
            ref.obs_form = "simple115"  # each form from the same raw observations
            assert np.array_equal(np.array(ours.get_obs()), np.array(ref.get_obs()))
            assert np.array_equal(ours.get_state(), ref.get_state())
            ref.obs_form = ours.obs_form = "relative"
            assert np.array_equal(np.array(ours.get_obs()), np.array(ref.get_obs()))
            ours.obs_form = "simple115"
            steps += 1
            if done:
                break
    assert steps > 50
    ours.close(), ref.close()


@needs_grf
def test_checkpoint_reward_equals_gfootballs_own_wrapper_step_for_step():
    """gfootball's CheckpointRewardWrapper, fed the engine's per-player rewards of our episodes,
    gives per agent what our checkpoints add: summed, their sum; score, the goal once plus their mean."""
    from gfootball.env import wrappers

    for form in ("summed", "score"):
        env = make(seed=3, reward=form, checkpoints=True)
        ref = wrappers.CheckpointRewardWrapper(env.env)
        engine_step, theirs = env._engine_step, []

        def step(actions, engine_step=engine_step, ref=ref, theirs=theirs):
            obs, rewards, done, info = engine_step(actions)
            per_agent = ref.reward(np.array(rewards, dtype=float).reshape(-1))
            theirs.append((float(np.reshape(rewards, -1)[0]), per_agent))
            return obs, rewards, done, info

        env._engine_step = step
        rng = np.random.default_rng(0)  # mostly run right, sometimes shoot: a goal in episode 2
        goals = bonus_steps = 0
        for _ in range(3):
            env.reset()
            ref._collected_checkpoints = {}
            for _ in range(env.episode_limit):
                r, done, info = env.step(rng.choice([5, 5, 12], size=env.n_agents))
                score, per_agent = theirs[-1]
                want = per_agent.sum() if form == "summed" else score + (per_agent - score).mean()
                assert r == pytest.approx(want, abs=1e-12)
                bonus_steps += bool((per_agent - score).any())
                if done:
                    goals += info["goal"]
                    break
        assert goals >= 1 and bonus_steps > goals  # both branches: zones with the ball, and a goal
        env.close()
    with pytest.raises(ConfigError, match="checkpoints=True does not go with env_args.reward=cds"):
        make(reward="cds", checkpoints=True)


@needs_grf
def test_own_half_end_needs_attackers_only():
    with pytest.raises(
        ConfigError, match="ends every academy_counterattack_hard episode at once with n_agents=11"
    ):
        make(map_name="academy_counterattack_hard", own_half_end=True)
    env = make(map_name="academy_3_vs_1_with_keeper", own_half_end=True, n_agents=3, seed=1)
    env.close()


@needs_grf
@pytest.mark.parametrize("alg", ["qmix", "differ_vdn"])
@pytest.mark.parametrize("runner", ["episode", "parallel"])
def test_short_runs_on_3_vs_1(tmp_path, alg, runner):
    extra = [
        "env_args.time_limit=30",
        f"runner={runner}",
        "batch_size_run=2" if runner == "parallel" else "batch_size_run=1",
    ]
    assert run_main(tmp_path, alg, env="gfootball", extra=extra) == 0
    (run,) = sacred_runs(tmp_path)
    assert read(run, "run.json")["status"] == "COMPLETED"
    metrics = read(run, "metrics.json")
    assert "test_battle_won_mean" in metrics and any(k.endswith("loss") for k in metrics)  # it trained


def test_install_grf_names_a_missing_python_in_one_line():
    root = os.path.dirname(SRC)
    done = subprocess.run(
        ["bash", os.path.join(root, "install_grf.sh")],
        env={**os.environ, "PYTHON": "/nonexistent/python"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "install_grf.sh: no Python at '/nonexistent/python' (set PYTHON=/path/to/python)"
    ]


@needs_grf
def test_install_grf_leaves_an_installed_gfootball_alone():
    root = os.path.dirname(SRC)
    done = subprocess.run(
        ["bash", os.path.join(root, "install_grf.sh")],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "nothing to do" in done.stdout, done.stdout + done.stderr


@needs_grf
@pytest.mark.parametrize(
    "scenario, attackers",
    # the left players starting in the opponent's half: CDS's and PyMARL2's agent counts
    [
        ("academy_3_vs_1_with_keeper", 3),
        ("academy_counterattack_hard", 4),
        ("academy_pass_and_shoot_with_keeper", 2),
    ],
)
def test_n_agents_attackers_counts_the_players_in_the_opponents_half(scenario, attackers):
    with pytest.warns(UserWarning, match=f"{attackers} agents for"):
        env = make(map_name=scenario, n_agents="attackers", own_half_end=True, seed=0)
    raw = env._raw[0]
    assert env.n_agents == attackers
    assert (raw["left_team"][-attackers:, 0] > 0).all()  # the watched players start forward
    env.close()


@needs_grf
def test_cds_env_config_runs(tmp_path):
    assert run_main(tmp_path, "differ_vdn", env="gfootball_cds", extra=["t_max=300"]) == 0
    (run,) = sacred_runs(tmp_path)
    config = read(run, "config.json")
    assert config["env_args"]["n_agents"] == "attackers" and config["env_args"]["reward"] == "cds"
