"""The skirmish simulator: SMAC's sizes, availability rules, reward, termination, determinism,
and that focus fire beats random play."""

import glob
import os

import numpy as np
import pytest

import main
from envs.skirmish.env import SkirmishEnv
from utils.errors import ConfigError

# SMAC's env_info with default options: n_agents, n_enemies, n_actions, obs, state, limit, max_reward
SMAC = {
    "3m": (3, 3, 9, 30, 48, 60, 365),
    "8m": (8, 8, 14, 80, 168, 120, 640),
    "25m": (25, 25, 31, 250, 950, 150, 1575),
    "5m_vs_6m": (5, 6, 12, 55, 98, 70, 530),
    "8m_vs_9m": (8, 9, 15, 85, 179, 120, 695),
    "10m_vs_11m": (10, 11, 17, 105, 243, 150, 805),
    "2s3z": (5, 5, 11, 80, 120, 120, 1020),
    "3s5z": (8, 8, 14, 128, 216, 150, 1510),
    "1c3s5z": (9, 9, 15, 162, 270, 180, 1870),
    "MMM": (10, 10, 16, 160, 290, 150, 1015),
    "MMM2": (10, 12, 18, 176, 322, 180, 1205),
    "2s_vs_1sc": (2, 1, 7, 17, 27, 300, 510),
    "3s_vs_5z": (3, 5, 11, 48, 68, 250, 1000),
    "2c_vs_64zg": (2, 64, 70, 332, 342, 400, 3080),
    "corridor": (6, 24, 30, 156, 282, 400, 1280),
    "6h_vs_8z": (6, 8, 14, 78, 140, 150, 1480),
    "bane_vs_bane": (24, 24, 30, 336, 984, 200, 1260),
    "so_many_baneling": (7, 32, 38, 202, 397, 100, 1480),
    "27m_vs_30m": (27, 30, 36, 285, 1170, 180, 1850),
    "3s5z_vs_3s6z": (8, 9, 15, 136, 230, 170, 1670),
    "2m_vs_1z": (2, 1, 7, 16, 26, 150, 360),
}


@pytest.mark.parametrize("name", sorted(SMAC))
def test_sizes_match_smac(name):
    env = SkirmishEnv(map_name=name, seed=0)
    info = env.get_env_info()
    na, ne, n_actions, obs, state, limit, max_reward = SMAC[name]
    assert (
        info["n_agents"],
        env.n_enemies,
        info["n_actions"],
        info["obs_shape"],
        info["state_shape"],
        info["episode_limit"],
    ) == (na, ne, n_actions, obs, state, limit)
    assert env.max_reward == max_reward
    assert len(env.get_obs()) == na and all(o.shape == (obs,) for o in env.get_obs())
    assert env.get_state().shape == (state,)
    layout = info["obs_entities"]
    assert sum(e["count"] * e["dim"] for e in layout) == obs
    assert [e["count"] for e in layout] == [1, ne, na - 1, 1]
    # every agent starts on a pathable cell
    cells = env.pos[:na].astype(int)
    assert env.grid[cells[:, 0], cells[:, 1]].all()


def test_timestep_feature_sizes_the_observation_it_is_in():
    """SMAC's get_obs_size() counts the time once (a zero own feature) and then appends it: the
    observations are one longer. env_info must give the true length, or no runner can store
    them (ippo with obs_timestep_number=True crashed on this)."""
    env = SkirmishEnv(map_name="3m", seed=0, obs_timestep_number=True)
    assert env.get_obs_size() == 31  # SMAC's figure: 30 + the own time feature
    assert env.get_env_info()["obs_shape"] == 32 == env.get_obs()[0].shape[0]
    env.reset()
    for t in (1, 2):
        env.step([1, 1, 1])
        assert env.get_obs()[0][-1] == pytest.approx(t / env.episode_limit)


def test_2s3z_layout_and_agent_order():
    env = SkirmishEnv(map_name="2s3z", seed=0)
    assert env.kinds[:5] == ["stalker", "stalker", "zealot", "zealot", "zealot"]
    env.pos[5:] = env.pos[0] + np.array([3.0, 0.0])  # bring the enemies into sight
    env._cache = None
    o = env.get_obs()[0]
    enemy0 = o[4:12]  # [avail, dist, dx, dy, health, shield, is_zealot, is_stalker]
    assert enemy0[4] == 1.0 and enemy0[5] == 1.0 and enemy0[7] == 1.0 and enemy0[6] == 0.0  # a Stalker
    assert o[76:80].tolist() == [1.0, 1.0, 1.0, 0.0]  # own: health, shield, is_stalker, is_zealot


def test_available_actions_follow_smac_rules():
    env = SkirmishEnv(map_name="3m", seed=0)
    na = env.n_agents
    env.pos[:na] = [[5.0, 8.3], [5.0, 16.0], [5.0, 20.0]]  # agent 0 at the strip's south edge
    env.pos[na:] = [[10.5, 8.3], [11.5, 16.0], [30.0, 20.0]]
    env.hp[na + 2] = 0.0
    env.alive[na + 2] = False
    env.hp[2] = 0.0
    env.alive[2] = False
    env._cache = None
    avail = np.array(env.get_avail_actions())
    assert avail[0, :6].tolist() == [0, 1, 1, 0, 1, 1]  # south blocked by the map's edge
    assert avail[0, 6:].tolist() == [1, 0, 0]  # in range (5.5 <= 6) / out of range / dead
    assert avail[1, 6:].tolist() == [0, 0, 0]  # 6.5 > 6
    assert avail[2].tolist() == [1] + [0] * 8  # dead: no-op only
    with pytest.raises(AssertionError):
        env.step([7, 1, 0])  # enemy 1 is out of range of agent 0


def test_perfect_win_returns_twenty():
    env = SkirmishEnv(map_name="3m", seed=0)
    na = env.n_agents
    env.hp[na:] = 0.0  # every enemy dies in the first step, no damage taken
    env.sh[na:] = 0.0
    reward, done, info = env.step([1, 1, 1])
    assert done and info["battle_won"] and info["dead_enemies"] == 3
    assert reward == pytest.approx(20.0)  # (3 * 45 + 3 * 10 + 200) / (365 / 20)
    assert env.get_stats()["battles_won"] == 1 and env.get_stats()["win_rate"] == 1.0


def test_loss_and_time_limit():
    env = SkirmishEnv(map_name="3m", seed=0)
    env.hp[:3] = 0.0
    reward, done, info = env.step([1, 1, 1])
    assert done and not info["battle_won"] and info["dead_allies"] == 3
    assert env.get_indi_terminated() == [1, 1, 1]
    env.reset()
    assert env.get_indi_terminated() == [0, 0, 0]
    env._episode_steps = env.episode_limit - 1
    reward, done, info = env.step([1, 1, 1])
    assert done and not info["battle_won"] and "episode_limit" not in info
    assert env.timeouts == 1
    env = SkirmishEnv(map_name="3m", seed=0, continuing_episode=True)
    env._episode_steps = env.episode_limit - 1
    assert env.step([1, 1, 1])[2]["episode_limit"] is True


def random_actions(env, rng):
    return [rng.choice(np.flatnonzero(a)) for a in env.get_avail_actions()]


def test_same_seed_same_trajectory():
    trajectories = []
    for seed in (4, 4, 5):
        env = SkirmishEnv(map_name="2s3z", seed=seed)
        rng = np.random.default_rng(0)
        obs = []
        for _ in range(40):
            _, done, _ = env.step(random_actions(env, rng))
            obs.append(np.concatenate(env.get_obs()))
            if done:
                env.reset()
        trajectories.append(np.stack(obs))
    assert np.array_equal(trajectories[0], trajectories[1])
    assert not np.array_equal(trajectories[0], trajectories[2])  # attack timing jitter differs


def focus_fire(env):
    """Every agent attacks the weakest enemy it can, else steps toward the nearest one."""
    avail = np.array(env.get_avail_actions())
    na = env.n_agents
    hs = env.hp[na:] + env.sh[na:]
    actions = []
    for i in range(na):
        targets = np.flatnonzero(avail[i, 6:])
        if avail[i, 0]:
            actions.append(0)
        elif len(targets):
            actions.append(6 + targets[np.argmin(hs[targets])])
        else:
            d = env.pos[na:] - env.pos[i]
            d[~env.alive[na:]] = 1e9
            dx, dy = d[np.argmin((d**2).sum(1))]
            a = (4 if dx > 0 else 5) if abs(dx) > abs(dy) else (2 if dy > 0 else 3)
            actions.append(a if avail[i, a] else 1)
    return actions


@pytest.mark.parametrize("name", ["8m", "2s3z"])
def test_focus_fire_beats_random(name):
    rates = {}
    for policy in ("focus", "random"):
        env = SkirmishEnv(map_name=name, seed=1)
        rng = np.random.default_rng(0)
        wins = 0
        for _ in range(20):
            env.reset()
            done = False
            while not done:
                _, done, info = env.step(focus_fire(env) if policy == "focus" else random_actions(env, rng))
            wins += info["battle_won"]
        rates[policy] = wins / 20
    assert rates["focus"] >= rates["random"] + 0.2, rates


def test_render_and_bad_arguments():
    env = SkirmishEnv(map_name="3m", seed=0)
    img = env.render()
    assert img.shape == (256, 256, 3) and img.dtype == np.uint8
    assert (img == np.array([40, 90, 230], dtype=np.uint8)).all(-1).sum() > 0  # agents drawn
    with pytest.raises(
        ConfigError, match=r"did you mean 3m\b.*\(23 valid choices, listed in config/envs/skirmish.yaml\)"
    ):
        SkirmishEnv(map_name="3mm")
    with pytest.raises(ConfigError, match="unknown env_args key"):
        SkirmishEnv(map_name="3m", reward_wins=1)


@pytest.mark.parametrize(
    "config,map_name,extra",
    [
        ("qmix", "3m", []),
        ("differ_qmix", "2s3z", ["runner=parallel", "batch_size_run=2"]),
        ("differ_qmix_transformer", "2s3z", ["transformer_n_layers=1"]),
    ],
)
def test_training_runs_on_skirmish(tmp_path, config, map_name, extra):
    argv = [
        f"--config={config}",
        "--env-config=skirmish",
        "with",
        f"env_args.map_name={map_name}",
        f"local_results_path={tmp_path}",
        "seed=1",
        "t_max=150",
        "test_interval=100",
        "test_nepisode=2",
        "batch_size=2",
        "buffer_size=10",
        *extra,
    ]
    assert main.main(argv) == 0
    runs = glob.glob(os.path.join(str(tmp_path), "sacred", "skirmish", map_name, "*", "1"))
    assert len(runs) == 1
    with open(os.path.join(runs[0], "metrics.json")) as f:
        text = f.read()
    assert "test_battle_won_mean" in text and "dead_enemies_mean" in text


def test_pettingzoo_parallel_api():
    from pettingzoo.test import parallel_api_test

    from envs.skirmish.pettingzoo import parallel_env

    for name in ("3m", "2s3z"):
        parallel_api_test(parallel_env(map_name=name, seed=0), num_cycles=300)
    env = parallel_env(map_name="3m", seed=0)
    obs, _ = env.reset(seed=1)
    assert set(obs) == {"agent_0", "agent_1", "agent_2"}
    assert obs["agent_0"]["observation"].shape == (30,) and obs["agent_0"]["action_mask"][1] == 1


def test_save_replay_writes_a_gif_of_the_last_episode(tmp_path):
    from PIL import Image

    env = SkirmishEnv(map_name="3m", seed=0, replay_dir=str(tmp_path))
    rng = np.random.default_rng(0)
    steps = 0
    done = False
    while not done:
        _, done, _ = env.step(random_actions(env, rng))
        steps += 1
    env.reset()
    path = env.save_replay()
    with Image.open(path) as gif:
        assert gif.size == (256, 256) and 1 < gif.n_frames <= steps + 1
        total = 0
        for k in range(gif.n_frames):  # identical frames are merged: their durations add up
            gif.seek(k)
            total += gif.info["duration"]
        assert total == 150 * (steps + 1)


def test_open_loop_observation_is_the_time_step_alone():
    env = SkirmishEnv(map_name="3m", seed=0, obs_starcraft=False, obs_timestep_number=True)
    assert env.get_env_info()["obs_shape"] == 1 and "obs_entities" not in env.get_env_info()
    rng = np.random.default_rng(0)
    for t in range(1, 4):
        env.step(random_actions(env, rng))
        assert [o.tolist() for o in env.get_obs()] == [[np.float32(t / 60)]] * 3
    with pytest.raises(ConfigError, match="obs_timestep_number"):
        SkirmishEnv(map_name="3m", obs_starcraft=False)


def test_pathing_and_terrain_height_features_follow_smacs_probe_points():
    base = SkirmishEnv(map_name="3m", seed=0)
    env = SkirmishEnv(map_name="3m", seed=0, obs_pathing_grid=True, obs_terrain_height=True)
    assert env.get_env_info()["obs_shape"] == base.get_env_info()["obs_shape"] + 8 + 9
    assert env.get_obs_move_feats_size() == 4 + 8 + 9
    layout = env.get_env_info()["obs_entities"]
    assert layout[0]["dim"] == 21 and sum(e["count"] * e["dim"] for e in layout) == len(env.get_obs()[0])
    # 3m's strip: pathable for y in [8, 24); its ground stands at height 8 (byte 191 of the game's
    # -16..16 scale), the walls round it fall to 1 (byte 135), cliff edges in between
    env.pos[0] = (10.3, 9.6)
    env._cache = None
    move = env.get_obs()[0][:21]
    # probes at (10, 13), (10, 5), (14, 9), (6, 9), (12, 11), (8, 7), (12, 7), (8, 11), then (10, 9)
    assert move[4:12].tolist() == [1, 0, 1, 1, 1, 0, 0, 1]
    probes = [(10, 13), (10, 5), (14, 9), (6, 9), (12, 11), (8, 7), (12, 7), (8, 11), (10, 9)]
    np.testing.assert_allclose(move[12:], [env.terrain_height[p] for p in probes], rtol=1e-6)
    ground = round((8 + 16) * 255 / 32) / 255
    np.testing.assert_allclose(move[[12, 14, 15, 16, 19, 20]], ground, rtol=1e-6)
    assert move[13] < ground and env.terrain_height[10, 2] == 135 / 255
    unit = env.agents[0]
    assert env.get_surrounding_pathing(unit) == move[4:12].tolist()
    np.testing.assert_allclose(env.get_surrounding_height(unit), move[12:])
    env.pos[0] = (0.5, 12.0)  # probes west of the map count as 1
    env._cache = None
    assert env.get_obs()[0][4 + 3] == 1 and env.get_obs()[0][12 + 3] == 1
    # 2c_vs_64zg's ramps lie between the levels they join
    from envs.skirmish import terrain

    h = terrain.height("L6", "2c_vs_64zg")
    assert h.min() >= 0.5 and h.max() <= 1.0 and len(np.unique(h)) > 3
    lv = terrain.cliffs("L6")
    assert h[lv == 2].mean() > h[lv == 1].mean() > h[lv == 0].mean()
    # a map without its heights falls back on its cliff levels
    assert np.allclose(terrain.height("L6"), 0.5 + 0.125 * lv)


def test_heights_decode_the_game_s_height_map_format():
    """bench/sc2map_facts.py's reading of t3SyncHeightMap (uint32 a vertex: height in 1/256 below,
    cliff level above) and the game's byte scale (-16..16 over 0..255), on a hand-made grid."""
    from helpers import load_bench

    facts = load_bench("sc2map_facts")
    z = np.full((33, 33), 8.0)
    z[:, :4] = 1.0  # a low strip: x = 0..3
    b = facts.cell_bytes(z)
    assert b.shape == (32, 32) and b[5, 10] == 191 and b[5, 1] == 135
    assert 135 < b[5, 3] < 191  # a cell with two corners down and two up: halfway


def test_a_first_run_says_the_simulator_is_compiled_once(monkeypatch, capfd):
    from envs.skirmish import sim

    monkeypatch.setattr(sim, "_told", False)
    monkeypatch.setattr(sim, "compiled_before", lambda: False)
    SkirmishEnv(map_name="3m", seed=1)
    SkirmishEnv(map_name="3m", seed=2)
    said = [
        line
        for line in capfd.readouterr().err.splitlines()
        if "compiling the skirmish simulator once" in line
    ]
    assert len(said) == 1 and sim.compile_cache() in said[0]
    monkeypatch.setattr(sim, "_told", False)
    monkeypatch.setattr(sim, "compiled_before", lambda: True)
    SkirmishEnv(map_name="3m", seed=3)
    assert "compiling" not in capfd.readouterr().err
