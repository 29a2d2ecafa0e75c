"""skirmish_v2: SMACv2's interface on the built-in simulator. Sizes from SMACv2's formulas (written
here independently of the env), a hand-checked feature layout, ranges, agent order, EPO, the
scenario laws, determinism, reward and termination, runners."""

import math
import os

import numpy as np
import pytest

from config import available
from envs.skirmish import distributions as dist
from envs.skirmish import sim
from envs.skirmish.args import validate_v2_env_args as validate_env_args
from envs.skirmish.v2 import SkirmishV2Env
from utils.errors import ConfigError

STANDARD = dict(use_unit_ranges=True, obs_own_pos=True)
RACES = ["protoss", "terran", "zerg"]
SIZES = {
    "5_vs_5": (5, 5),
    "10_vs_10": (10, 10),
    "20_vs_20": (20, 20),
    "10_vs_11": (10, 11),
    "20_vs_23": (20, 23),
}


def make(scenario="protoss_5_vs_5", seed=1, **kw):
    return SkirmishV2Env(scenario=scenario, seed=seed, **{**STANDARD, **kw})


def expected_sizes(
    race,
    na,
    ne,
    conic=False,
    own_pos=True,
    last_action=False,
    t_obs=False,
    t_state=False,
    attack=False,
    health=False,
):
    """SMACv2's size formulas."""
    shield = 1 if race == "protoss" else 0
    n_fov = 12 if conic else 0
    n_actions = 6 + n_fov + (na if race == "terran" and na > ne else ne)
    cap = 3 + attack + health
    nf_en = 4 + 3 + 1 + shield
    nf_al = 4 + 1 + shield + cap + n_actions * last_action
    own = cap + 1 + shield + 2 * own_pos + 2 * conic
    obs = 4 + ne * nf_en + (na - 1) * nf_al + own + t_obs
    al_s = 4 + shield + 2 * conic + attack + health + 3
    en_s = 3 + shield + 3
    state = na * al_s + ne * en_s + na * n_actions + t_state
    return dict(obs_shape=obs, state_shape=state, n_actions=n_actions, cap_shape=cap, episode_limit=200)


@pytest.mark.parametrize("race", RACES)
@pytest.mark.parametrize("size", list(SIZES))
def test_env_info_of_the_standard_scenarios(race, size):
    na, ne = SIZES[size]
    info = make(f"{race}_{size}").get_env_info()
    assert info["n_agents"] == na and info["n_enemies"] == ne
    for k, v in expected_sizes(race, na, ne).items():
        assert info[k] == v, (k, info[k], v)


# (obs_shape, state_shape, n_actions) printed by SMACv2's own StarCraftCapabilityEnvWrapper (HEAD
# 577ab5a, built from its sc2_gen_<race>.yaml with pysc2 stubbed out; no StarCraft II is needed for
# the sizes), standard settings and with conic_fov=True
SMACV2_SIZES = {
    "protoss_5_vs_5": (92, 130, 11),
    "protoss_5_vs_5/conic": (94, 200, 23),
    "protoss_10_vs_10": (182, 310, 16),
    "protoss_10_vs_10/conic": (184, 450, 28),
    "protoss_20_vs_20": (362, 820, 26),
    "protoss_20_vs_20/conic": (364, 1100, 38),
    "protoss_10_vs_11": (191, 327, 17),
    "protoss_10_vs_11/conic": (193, 467, 29),
    "protoss_20_vs_23": (389, 901, 29),
    "protoss_20_vs_23/conic": (391, 1181, 41),
    "terran_5_vs_5": (82, 120, 11),
    "terran_5_vs_5/conic": (84, 190, 23),
    "terran_10_vs_10": (162, 290, 16),
    "terran_10_vs_10/conic": (164, 430, 28),
    "terran_20_vs_20": (322, 780, 26),
    "terran_20_vs_20/conic": (324, 1060, 38),
    "terran_10_vs_11": (170, 306, 17),
    "terran_10_vs_11/conic": (172, 446, 29),
    "terran_20_vs_23": (346, 858, 29),
    "terran_20_vs_23/conic": (348, 1138, 41),
    "zerg_5_vs_5": (82, 120, 11),
    "zerg_5_vs_5/conic": (84, 190, 23),
    "zerg_10_vs_10": (162, 290, 16),
    "zerg_10_vs_10/conic": (164, 430, 28),
    "zerg_20_vs_20": (322, 780, 26),
    "zerg_20_vs_20/conic": (324, 1060, 38),
    "zerg_10_vs_11": (170, 306, 17),
    "zerg_10_vs_11/conic": (172, 446, 29),
    "zerg_20_vs_23": (346, 858, 29),
    "zerg_20_vs_23/conic": (348, 1138, 41),
}


@pytest.mark.parametrize("key", list(SMACV2_SIZES))
def test_sizes_equal_those_smacv2_itself_reports(key):
    scenario, _, variant = key.partition("/")
    info = make(scenario, conic_fov=variant == "conic").get_env_info()
    assert (info["obs_shape"], info["state_shape"], info["n_actions"]) == SMACV2_SIZES[key]


@pytest.mark.parametrize(
    "variant",
    [
        dict(conic_fov=True),
        dict(obs_own_pos=False),
        dict(obs_last_action=True),
        dict(obs_timestep_number=True),
        dict(state_timestep_number=True),
        dict(prob_obs_enemy=0.0, action_mask=False),
    ],
)
def test_env_info_of_variants(variant):
    for race in RACES:
        env = make(f"{race}_10_vs_11", **variant)
        want = expected_sizes(
            race,
            10,
            11,
            conic=variant.get("conic_fov", False),
            own_pos=variant.get("obs_own_pos", True),
            last_action=variant.get("obs_last_action", False),
            t_obs=variant.get("obs_timestep_number", False),
            t_state=variant.get("state_timestep_number", False),
        )
        info = env.get_env_info()
        for k, v in want.items():
            assert info[k] == v, (race, variant, k, info[k], v)
        obs, state = env.reset()
        assert len(obs[0]) == want["obs_shape"] and len(state) == want["state_shape"]


@pytest.mark.parametrize("observe", [True, False])
def test_capabilities_add_their_slots(observe):
    _, cap = dist.scenario("protoss_5_vs_5")
    cap["attack"] = dict(dist_type="per_agent_uniform", lower_bound=[0.5], upper_bound=[1.0], observe=observe)
    cap["health"] = dict(dist_type="per_agent_uniform", lower_bound=[0.0], upper_bound=[0.2], observe=observe)
    env = SkirmishV2Env(map_name="10gen_protoss", capability_config=cap, seed=3, **STANDARD)
    want = expected_sizes("protoss", 5, 5, attack=True, health=True)
    info = env.get_env_info()
    for k, v in want.items():
        assert info[k] == v
    obs, state = env.reset()
    assert len(obs[0]) == want["obs_shape"] and len(state) == want["state_shape"]
    levels = env._attack_level
    assert ((levels >= 0.5) & (levels < 1.0)).all()
    # an agent's ally rows hold the others' attack probabilities only when observed
    nf_al = 4 + 2 + 2 + 3
    rows = np.asarray(obs)[:, 4 + 5 * 9 : 4 + 5 * 9 + 4 * nf_al].reshape(5, 4, nf_al)
    seen = rows[..., 0] == 1
    assert seen.any()
    others = env._others
    want_attack = np.where(seen, levels[others] * observe, 0.0)
    np.testing.assert_allclose(rows[..., 6], want_attack, atol=1e-6)
    caps = env.get_capabilities()
    assert caps.shape == (5 * 5,) and caps[0] == pytest.approx(levels[0], abs=1e-6)


@pytest.mark.parametrize("scenario", ["protoss_10_vs_11", "terran_10_vs_11", "zerg_20_vs_23"])
def test_vector_lengths_and_types_over_random_episodes(scenario):
    env = make(scenario, seed=7)
    info = env.get_env_info()
    rng = np.random.default_rng(0)
    for _ in range(3):
        obs, state = env.reset()
        done = False
        while not done:
            avail = np.array(env.get_avail_actions())
            assert avail.shape == (info["n_agents"], info["n_actions"])
            assert all(o.dtype == np.float32 and len(o) == info["obs_shape"] for o in env.get_obs())
            assert env.get_state().dtype == np.float32 and len(env.get_state()) == info["state_shape"]
            assert env.get_indi_terminated() == [int(a[0]) for a in avail]
            _, done, _ = env.step([int(rng.choice(np.flatnonzero(a))) for a in avail])


# --- the worked example of the spec (standard Protoss settings) ------------------------------
GOLDEN = {
    "team_gen": {"ally_team": ["stalker", "zealot", "colossus", "zealot", "stalker"]},
    "ally_start_positions": {"item": [(12, 14), (12, 16), (12, 18), (13, 15), (13, 17)]},
    "enemy_start_positions": {"item": [(20, 14), (20, 16), (20, 18), (19, 15), (19, 17)]},
}
GOLDEN["team_gen"]["enemy_team"] = list(GOLDEN["team_gen"]["ally_team"])


def golden_env():
    env = make(attack_jitter=False, sim_options={"reset_preroll_loops": 0})
    env._episode_count = 0
    env.max_reward = None  # the example is the first episode
    env.reset(GOLDEN)
    return env


def test_feature_layout_of_the_worked_example():
    env = golden_env()
    assert env.kinds[:5] == ["colossus", "stalker", "stalker", "zealot", "zealot"]
    assert env.pos[:5].tolist() == [[12, 18], [12, 14], [13, 17], [12, 16], [13, 15]]
    avail = np.array(env.get_avail_actions())
    assert avail[:, 6:].sum() == 1 and avail[2, 10] == 1
    obs = env.get_obs()
    o0 = obs[0]
    assert o0[:4].tolist() == [1, 1, 1, 1]
    enemies = o0[4 : 4 + 45].reshape(5, 9)
    want = [
        [0, 0.8944, 0.8, -0.4, 1, 1, 1, 0, 0],
        [0, 0.8246, 0.8, -0.2, 1, 1, 0, 1, 0],
        [0, 0.8, 0.8, 0, 1, 1, 0, 0, 1],
        [0, 0.7616, 0.7, -0.3, 1, 1, 0, 1, 0],
        [0, 0.7071, 0.7, -0.1, 1, 1, 1, 0, 0],
    ]
    np.testing.assert_allclose(enemies, want, atol=1e-4)
    allies = o0[49 : 49 + 36].reshape(4, 9)
    want = [
        [1, 0.4, 0, -0.4, 1, 1, 1, 0, 0],
        [1, 0.1414, 0.1, -0.1, 1, 1, 1, 0, 0],
        [1, 0.2, 0, -0.2, 1, 1, 0, 1, 0],
        [1, 0.3162, 0.1, -0.3, 1, 1, 0, 1, 0],
    ]
    np.testing.assert_allclose(allies, want, atol=1e-4)
    np.testing.assert_allclose(o0[85:], [1, 1, 0.375, 0.5625, 0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(obs[3][4:13], [0, 0.9162, 0.8889, -0.2222, 1, 1, 1, 0, 0], atol=1e-4)
    state = env.get_state()
    assert len(state) == 130
    np.testing.assert_allclose(state[:8], [1, 0, -0.125, 0.0625, 1, 0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(state[40:47], [1, 0.125, -0.0625, 1, 1, 0, 0], atol=1e-6)
    assert (state[75:] == 0).all()
    assert env.max_reward == 1220


def test_reward_of_the_worked_example():
    env = golden_env()
    na = env.n_agents
    env.hp[na] = env.sh[na] = 0.0
    env.alive[na] = False
    env.sh[na + 3], env.hp[na + 3] = 0.0, 70.0  # a Zealot from 150 to 70
    r = env._reward() / (env.max_reward / env.reward_scale_rate)
    assert r == pytest.approx((160 + 10 + 80) / (1220 / 20), abs=1e-4)
    assert r == pytest.approx(4.0984, abs=1e-4)


def test_a_medivac_heals_allies_in_its_range_but_never_itself():
    cfg = {
        "team_gen": {"ally_team": ["medivac", "marine", "marine", "marine", "marauder"]},
        "ally_start_positions": {"item": [(10, 16), (13, 16), (10, 19.5), (10, 11.9), (14.5, 16)]},
        "enemy_start_positions": {"item": [(30, 2), (30, 6), (30, 10), (30, 14), (30, 18)]},
    }
    cfg["team_gen"]["enemy_team"] = ["marine"] * 5
    env = make("terran_5_vs_5", attack_jitter=False, sim_options={"reset_preroll_loops": 0})
    env.reset(cfg)
    med = env.kinds.index("medivac")
    assert env.kinds[:5] == ["marauder", "marine", "marine", "marine", "medivac"] and med == 4
    avail = np.array(env.get_avail_actions())
    d = np.hypot(*(env.pos[:4] - env.pos[med]).T)
    assert sorted(np.round(d, 3).tolist()) == [3.0, 3.5, 4.1, 4.5]
    heal = avail[med, 6 : 6 + 5]
    assert heal[med] == 0
    assert heal[:4].tolist() == (d <= 4).astype(int).tolist()
    assert heal.sum() == 2
    state = env.get_state()
    assert state[med * 7 + 1] == pytest.approx(0.25)


# --- ranges, order ------------------------------------------------------------------------
TYPES = {
    "protoss": ["stalker", "zealot", "colossus"],
    "terran": ["marine", "marauder"],
    "zerg": ["zergling", "hydralisk", "baneling"],
}
SHOOT = {
    "stalker": 6,
    "zealot": 2,
    "colossus": 7,
    "marine": 5,
    "marauder": 6,
    "zergling": 2,
    "hydralisk": 5,
    "baneling": 2,
}
SIGHT = {
    "stalker": 10,
    "zealot": 9,
    "colossus": 10,
    "marine": 9,
    "marauder": 10,
    "zergling": 8,
    "hydralisk": 9,
    "baneling": 8,
}


def duel(race, kind, dist_x, **kw):
    """One agent of `kind` at (10, 16) and an enemy straight east at distance dist_x, all else far."""
    sim = {"reset_preroll_loops": 0, **kw.pop("sim_options", {})}
    env = make(f"{race}_5_vs_5", attack_jitter=False, sim_options=sim, **kw)
    filler = TYPES[race][0]
    ally = [kind] + [filler] * 4
    cfg = {
        "team_gen": {"ally_team": ally, "enemy_team": [filler] * 5},
        "ally_start_positions": {"item": [(10, 16), (1, 30), (3, 30), (5, 30), (7, 30)]},
        "enemy_start_positions": {"item": [(10 + dist_x, 16), (31, 1), (29, 1), (27, 1), (25, 1)]},
    }
    env.reset(cfg)
    i = [k for k in range(5) if np.allclose(env.pos[k], (10, 16))][0]
    return env, i


@pytest.mark.parametrize("race,kind", [(r, k) for r in TYPES for k in TYPES[r]])
def test_shoot_and_sight_ranges_per_unit_type(race, kind):
    shoot, sight = SHOOT[kind], SIGHT[kind]
    env, i = duel(race, kind, shoot)
    assert env.get_avail_agent_actions(i)[6] == 1
    assert env.unit_shoot_range(i) == shoot and env.unit_sight_range(i) == sight
    env, i = duel(race, kind, shoot + 1e-6)
    assert env.get_avail_agent_actions(i)[6] == 0
    mode = {"sim_options": {"reset_preroll_loops": 0, "enemy_obs_mode": "per_row"}}
    env, i = duel(race, kind, sight, **mode)
    assert env.get_obs()[i][4:13].sum() == 0  # at exactly the sight range: not seen
    env, i = duel(race, kind, sight - 1e-6, **mode)
    row = env.get_obs()[i][4:13]
    assert row[1] == pytest.approx(1.0, abs=1e-5)  # distance / the observer's own sight
    env, i = duel(race, kind, 6, use_unit_ranges=False)
    assert env.get_avail_agent_actions(i)[6] == 1 and env.unit_sight_range(i) == 9


def test_agents_are_sorted_by_rl_name_then_position():
    env = make("zerg_5_vs_5", sim_options={"reset_preroll_loops": 0})
    cfg = {
        "team_gen": {"ally_team": ["zergling", "hydralisk", "baneling", "zergling", "hydralisk"]},
        "ally_start_positions": {"item": [(5, 5), (6, 20), (2, 8), (3, 25), (6, 4)]},
        "enemy_start_positions": {"item": [(27, 5), (26, 20), (30, 8), (29, 25), (26, 4)]},
    }
    cfg["team_gen"]["enemy_team"] = list(cfg["team_gen"]["ally_team"])
    env.reset(cfg)
    assert env.kinds[:5] == ["baneling", "hydralisk", "hydralisk", "zergling", "zergling"]
    assert env.pos[:5].tolist() == [[2, 8], [6, 4], [6, 20], [3, 25], [5, 5]]
    # enemies keep their creation order
    assert env.kinds[5:] == cfg["team_gen"]["enemy_team"]


# --- EPO -------------------------------------------------------------------------------------
def spread_scene(gap=7, x=16, **kw):
    """Agents spread on the left, enemies on the right: each enemy is seen by only some agents."""
    env = make(
        "protoss_5_vs_5",
        attack_jitter=False,
        sim_options={"reset_preroll_loops": 0, **kw.pop("sim", {})},
        **kw,
    )
    ys = [16 + gap * k for k in (-2, -1, 0, 1, 2)]
    cfg = {
        "team_gen": {"ally_team": ["stalker"] * 5, "enemy_team": ["stalker"] * 5},
        "ally_start_positions": {"item": [(8, y) for y in ys]},
        "enemy_start_positions": {"item": [(x, y) for y in ys]},
    }
    env.reset(cfg)
    return env


def enemy_rows(env, i):
    return np.asarray(env.get_obs()[i][4 : 4 + 5 * 9]).reshape(5, 9)


def test_epo_only_the_holder_sees_an_enemy_and_another_agent_takes_over_when_it_dies():
    env = spread_scene(gap=2, x=17, prob_obs_enemy=0.0, action_mask=False, sim={"enemy_obs_mode": "per_row"})
    env.get_obs()
    seen = env._seen(slice(5, 10))
    for j in range(5):
        holder = env.enemy_tags[j]
        assert holder >= 0 and seen[holder, j]
        for i in range(5):
            assert (enemy_rows(env, i)[j].any()) == (i == holder)
    # the holder of enemy 2 dies: after the step another agent that sees it holds it
    holder = int(env.enemy_tags[2])
    env.hp[holder] = env.sh[holder] = 0.0
    env.alive[holder] = False
    env._cache = None
    env.step([0 if not env.alive[i] else 1 for i in range(5)])
    env.get_obs()
    new = int(env.enemy_tags[2])
    assert new >= 0 and new != holder and enemy_rows(env, new)[2].any()


def test_epo_holder_is_the_first_agent_of_the_processing_order_that_sees_the_enemy():
    env = spread_scene(prob_obs_enemy=0.0)
    clone = np.random.Generator(type(env._obs_rng.bit_generator)())
    clone.bit_generator.state = env._obs_rng.bit_generator.state
    order = clone.permutation(5)  # the order the next observation processes the agents in
    env.get_obs()
    seen = env._seen(slice(5, 10))
    for j in range(5):
        first = next(i for i in order if seen[i, j])
        assert env.enemy_tags[j] == first


def ally_rows(env, obs):
    start = 4 + 5 * 9
    return np.asarray(obs[start : start + 4 * env.nf_al]).reshape(4, env.nf_al)


def test_fully_observable_ignores_sight_for_one_call_or_for_every_call():
    # each agent sees the enemy in its row (9 away) and the allies next to it (7 away)
    env = spread_scene(x=17, sim={"enemy_obs_mode": "per_row"})
    part = env.get_obs_agent(0)
    assert enemy_rows(env, 0).any(1).tolist() == [1, 0, 0, 0, 0]
    assert ally_rows(env, part)[:, 0].tolist() == [1, 0, 0, 0]
    full = env.get_obs_agent(0, fully_observable=True)
    rows = np.asarray(full[4 : 4 + 5 * 9]).reshape(5, 9)
    assert rows.any(1).all() and np.allclose(rows[4, 1] * env.sight[0], np.hypot(9, 28), atol=1e-4)
    assert ally_rows(env, full)[:, 0].tolist() == [1, 1, 1, 1]
    assert np.array_equal(env.get_obs_agent(0), part)  # one call leaves the next observations alone
    every = spread_scene(x=17, fully_observable=True, sim={"enemy_obs_mode": "per_row"})
    every.get_obs()  # the first observation tags the enemies (whose grants count from the next)
    for e in (env, every):
        e.step([1] * 5)
    assert np.array_equal(every.get_obs()[0], env.get_obs_agent(0, fully_observable=True))
    # as in SMACv2, an enemy that no agent has seen yet stays hidden: its EPO tag is unset
    far = spread_scene(x=31, fully_observable=True, sim={"enemy_obs_mode": "per_row"})
    assert not enemy_rows(far, 0).any() and ally_rows(far, far.get_obs()[0])[:, 0].all()


def test_smacv2_mode_wipes_the_whole_enemy_block_when_the_last_enemy_is_unseen():
    env = make(
        "protoss_5_vs_5",
        attack_jitter=False,
        sim_options={"reset_preroll_loops": 0, "enemy_obs_mode": "smacv2"},
    )
    cfg = {
        "team_gen": {"ally_team": ["stalker"] * 5, "enemy_team": ["stalker"] * 5},
        "ally_start_positions": {"item": [(8, 14), (8, 15), (8, 16), (8, 17), (8, 18)]},
        "enemy_start_positions": {"item": [(14, 14), (14, 15), (14, 16), (14, 17), (31, 31)]},
    }
    env.reset(cfg)
    for i in range(5):
        assert not enemy_rows(env, i).any()
    # per_row, the default (the behaviour SMACv2's published results were produced with), hides
    # only the enemy nobody has seen
    env2 = make("protoss_5_vs_5", attack_jitter=False, sim_options={"reset_preroll_loops": 0})
    env2.reset(cfg)
    for i in range(5):
        rows = enemy_rows(env2, i)
        assert rows[:4].any(axis=1).all() and not rows[4].any()


def test_per_row_mode_with_p1_is_plain_visibility_over_random_episodes():
    env = make("terran_10_vs_11", seed=4, sim_options={"enemy_obs_mode": "per_row"})
    rng = np.random.default_rng(1)
    for _ in range(2):
        env.reset()
        done = False
        while not done:
            na = env.n_agents
            seen = env._seen(slice(na, env.n)) & env.alive[na:][None] & env.alive[:na, None]
            obs = np.asarray(env.get_obs())
            rows = obs[:, 4 : 4 + 11 * env.nf_en].reshape(na, 11, env.nf_en)
            assert ((rows[..., 1] > 0) == seen).all()
            avail = env.get_avail_actions()
            _, done, _ = env.step([int(rng.choice(np.flatnonzero(a))) for a in avail])


def test_without_the_action_mask_far_targets_are_offered_and_their_orders_dropped():
    env = spread_scene(prob_obs_enemy=0.0, action_mask=False)
    avail = np.array(env.get_avail_actions())
    assert (avail[:, 6:] == 1).all()
    true = np.array([env.get_true_avail_agent_actions(i) for i in range(5)])
    assert true[:, 6:].sum() < 25
    # agent 0 moves north, then is ordered at a far enemy: it keeps moving
    env.step([2, 1, 1, 1, 1])
    far = int(np.argmax(np.hypot(*(env.pos[5:] - env.pos[0]).T)))
    assert not true[0, 6 + far]
    y = env.pos[0, 1]
    env.step([6 + far, 1, 1, 1, 1])
    assert env.order[0] != sim.ATTACK and env.target[0] != 5 + far
    assert env.pos[0, 1] > y  # still on its way north
    rows = enemy_rows(env, 0)
    flags = env._target_flags(True)[0]
    np.testing.assert_array_equal(rows[:, 0] > 0, flags & rows.any(axis=1))


# --- the scenario laws --------------------------------------------------------------------
def draws(name, n=20000, seed=0):
    _, cap = dist.scenario(name)
    sampler = dist.ScenarioSampler(cap, np.random.default_rng(seed))
    return cap, [sampler.sample() for _ in range(n)]


def test_team_laws():
    cap, out = draws("terran_10_vs_11")
    types, weights = cap["team_gen"]["unit_types"], cap["team_gen"]["weights"]
    ally = np.array([d["team_gen"]["ally_team"] for d in out])
    enemy = np.array([d["team_gen"]["enemy_team"] for d in out])
    assert (enemy[:, :10] == ally).all()
    for pos in (0, 5, 9):
        for t, w in zip(types, weights, strict=True):
            assert abs((ally[:, pos] == t).mean() - w) < 0.015
    extra = enemy[:, 10]
    assert (extra != "medivac").all()
    assert abs((extra == "marine").mean() - 0.5) < 0.015
    _, out = draws("protoss_10_vs_11")
    extra = np.array([d["team_gen"]["enemy_team"][10] for d in out])
    assert abs((extra == "colossus").mean() - 0.1) < 0.01
    _, out = draws("zerg_5_vs_5")
    ally = np.array([d["team_gen"]["ally_team"] for d in out])
    assert abs((ally == "baneling").mean() - 0.1) < 0.015 and abs((ally == "zergling").mean() - 0.45) < 0.015


def test_start_position_laws():
    _, out = draws("protoss_10_vs_11")
    reflect = [d for d in out if d["_layout"]["layout"] == "reflect"]
    assert abs(len(reflect) / len(out) - 0.5) < 0.015
    for d in reflect[:2000]:
        a, e = d["ally_start_positions"]["item"], d["enemy_start_positions"]["item"]
        assert ((a[:, 0] >= 0) & (a[:, 0] < 15) & (a[:, 1] >= 0) & (a[:, 1] < 32)).all()
        np.testing.assert_allclose(e[:10], np.stack([32 - a[:, 0], a[:, 1]], -1))
        assert 16 <= e[10, 0] < 32
    sur = [d for d in out if d["_layout"]["layout"] == "surrounded"]
    groups = np.array([d["_layout"]["groups"] for d in sur])
    for g in range(1, 5):
        assert abs((groups == g).mean() - 0.25) < 0.015
    for d in sur[:2000]:
        assert (d["ally_start_positions"]["item"] == 16).all()
        e = d["enemy_start_positions"]["item"]
        start = 0
        for size, diag in zip(d["_layout"]["sizes"], d["_layout"]["diagonals"], strict=True):
            pts = e[start : start + size]
            start += size
            if size == 0:
                continue
            assert (pts == pts[0]).all()  # a group stands at one point
            (kx, ky), (cx, cy) = dist.DIAGONALS[diag]
            t = (pts[0, 0] - kx) / (cx - kx)
            assert 0 <= t < 1 and pts[0, 1] == pytest.approx(ky + t * (cy - ky))


# --- determinism, reward, termination --------------------------------------------------------
def rollout(env, rng, episodes=2):
    trace = []
    for _ in range(episodes):
        obs, state = env.reset()
        trace.append(list(env.kinds))
        done = False
        while not done:
            avail = env.get_avail_actions()
            r, done, _ = env.step([int(rng.choice(np.flatnonzero(a))) for a in avail])
            trace.append((np.concatenate(env.get_obs()).tobytes(), env.get_state().tobytes(), r))
    return trace


def test_same_seed_same_battles_and_streams():
    a = rollout(make("zerg_10_vs_11", seed=5), np.random.default_rng(0))
    b = rollout(make("zerg_10_vs_11", seed=5), np.random.default_rng(0))
    assert a == b
    c = rollout(make("zerg_10_vs_11", seed=6), np.random.default_rng(0))
    assert a[0] != c[0] or a[1] != c[1]
    # the k-th battle does not depend on the actions taken before
    e1, e2 = make("zerg_10_vs_11", seed=5), make("zerg_10_vs_11", seed=5)
    rollout(e1, np.random.default_rng(1), episodes=2)
    rollout(e2, np.random.default_rng(2), episodes=2)
    e1.reset()
    e2.reset()
    assert e1.kinds == e2.kinds and np.array_equal(e1._spawn, e2._spawn)
    obs = e1.get_obs()
    assert all(np.array_equal(x, y) for x, y in zip(obs, e1.get_obs(), strict=True))


def test_shield_regeneration_does_not_pay():
    env = golden_env()
    na = env.n_agents
    env.sh[na] -= 5.0
    env._reward()  # the damage step
    env.sh[na] += 2.0  # regenerates
    assert env._reward() == 0.0


def test_max_reward_is_fixed_by_the_first_battle():
    env = make("protoss_10_vs_10", seed=2)
    first = env.max_reward
    for _ in range(3):
        env.reset()
    assert env.max_reward == first
    exp = make("protoss_10_vs_10", seed=2, sim_options={"max_reward_mode": "expected"}).max_reward
    assert exp == pytest.approx(10 * 10 + 200 + 10 * 174.5, rel=1e-4)


def test_terran_battles_end_when_only_medivacs_are_left():
    env = make("terran_5_vs_5", sim_options={"reset_preroll_loops": 0})
    cfg = {
        "team_gen": {
            "ally_team": ["marine", "marine", "marine", "marine", "medivac"],
            "enemy_team": ["marine", "marine", "marine", "marine", "medivac"],
        },
        "ally_start_positions": {"item": [(4, 4), (4, 6), (4, 8), (4, 10), (4, 12)]},
        "enemy_start_positions": {"item": [(28, 4), (28, 6), (28, 8), (28, 10), (28, 12)]},
    }
    env.reset(cfg)
    for j in range(4):  # every enemy but the Medivac
        env.hp[5 + j] = 0.0
        env.alive[5 + j] = False
    env._cache = None
    _, done, info = env.step([1] * 5)
    assert done and info["battle_won"]
    env.reset(cfg)
    for i in range(4):
        env.hp[i] = 0.0
        env.alive[i] = False
    env._cache = None
    _, done, info = env.step([0, 0, 0, 0, 1])
    assert done and not info["battle_won"]


def test_time_out_at_200_steps():
    for cont in (False, True):
        env = make("protoss_5_vs_5", continuing_episode=cont, sim_options={"reset_preroll_loops": 0})
        cfg = {
            "team_gen": {"ally_team": ["stalker"] * 5, "enemy_team": ["stalker"] * 5},
            "ally_start_positions": {"item": [(2, 2 + 3 * i) for i in range(5)]},
            "enemy_start_positions": {"item": [(30, 2 + 3 * i) for i in range(5)]},
        }
        env.reset(cfg)
        env._modes[1] = 2  # enemies stand (STATIC) so the battle cannot end
        steps, done = 0, False
        while not done:
            _, done, info = env.step([1] * 5)
            steps += 1
        assert steps == 200 and info.get("episode_limit", False) == cont


# --- behaviour -------------------------------------------------------------------------------
def test_enemies_hunt_the_nearest_agent_and_keep_it():
    env = make("terran_5_vs_5", attack_jitter=False, sim_options={"reset_preroll_loops": 0})
    cfg = {
        "team_gen": {"ally_team": ["marine"] * 5, "enemy_team": ["marine"] * 5},
        "ally_start_positions": {"item": [(2, 2), (2, 30), (16, 30), (30, 30), (30, 16)]},
        "enemy_start_positions": {"item": [(20, 4), (22, 4), (24, 4), (26, 4), (28, 4)]},
    }
    env.reset(cfg)
    start = env.pos[5:].copy()
    env.step([1] * 5)  # one step = 8 loops: the first tick
    near = [int(np.argmin(np.hypot(*(env.pos[:5] - env.pos[5 + j]).T))) for j in range(5)]
    assert env.target[5:].tolist() == near
    locked = env.target[5:].copy()
    for _ in range(3):
        env.step([1] * 5)
    assert (env.target[5:] == locked).all()
    moved = np.hypot(*(env.pos[5:] - start).T)
    assert (moved > 3).all()


def test_an_enemy_medivac_stays_with_the_nearest_hunter_not_between_the_groups():
    env = make("terran_5_vs_5", attack_jitter=False, sim_options={"reset_preroll_loops": 0})
    cfg = {
        "team_gen": {"ally_team": ["marine"] * 5, "enemy_team": ["marine"] * 4 + ["medivac"]},
        "ally_start_positions": {"item": [(2, 31), (7, 31), (31, 2), (31, 7), (16, 2)]},
        "enemy_start_positions": {"item": [(4, 28), (5, 28), (28, 4), (28, 5), (9, 24)]},
    }
    env.reset(cfg)
    for _ in range(4):
        env.step([1] * 5)
    marines = env.pos[5:9][env.alive[5:9]]
    gap = np.hypot(*(marines - env.pos[9]).T)
    assert gap.min() < 1.5 and np.hypot(*(marines.mean(0) - env.pos[9])) > 8


def test_random_play_rarely_wins_and_focus_fire_wins_more():
    def play(policy, episodes=20):
        env = make("protoss_5_vs_5", seed=11)
        rng = np.random.default_rng(0)
        wins = 0
        for _ in range(episodes):
            env.reset()
            done = False
            while not done:
                avail = np.array(env.get_avail_actions())
                _, done, info = env.step(policy(env, avail, rng))
            wins += info["battle_won"]
        return wins / episodes

    def random(env, avail, rng):
        return [int(rng.choice(np.flatnonzero(a))) for a in avail]

    def focus(env, avail, rng):
        na = env.n_agents
        alive = np.flatnonzero(env.alive[na:])
        centre = env.pos[:na][env.alive[:na]].mean(0)
        tgt = alive[np.argmin(np.hypot(*(env.pos[na + alive] - centre).T))]
        acts = []
        for i in range(na):
            if avail[i, 0]:
                acts.append(0)
            elif avail[i, 6 + tgt]:
                acts.append(6 + tgt)
            else:
                dx, dy = env.pos[na + tgt] - env.pos[i]
                acts.append((4 if dx > 0 else 5) if abs(dx) > abs(dy) else (2 if dy > 0 else 3))
        return acts

    r, f = play(random), play(focus)
    assert r < 0.2 and f > r + 0.2, (r, f)


# --- configuration ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,needle",
    [
        (dict(scenario="protoss_6_vs_6"), "protoss_5_vs_5"),
        (dict(map_name="3m"), "10gen_protoss"),
        (dict(scenario="protoss_5_vs_5", obs_instead_of_state=True), "obs_instead_of_state"),
        (dict(scenario="protoss_5_vs_5", capability_config={"n_units": 5}), "exclude"),
        (dict(map_name="10gen_zerg"), "capability_config"),
        (dict(scenario="zerg_5_vs_5", sim_options={"enemy_obs_mode": "rows"}), "per_row"),
        (dict(scenario="zerg_5_vs_5", bogus=1), "bogus"),
    ],
)
def test_bad_settings_are_refused_in_one_line(args, needle):
    with pytest.raises(ConfigError) as e:
        validate_env_args(args)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_bad_capability_configs_are_refused():
    _, cap = dist.scenario("terran_5_vs_5")
    bad = dict(cap, team_gen=dict(cap["team_gen"], unit_types=["marine", "zealot", "medivac"]))
    with pytest.raises(ConfigError, match="zealot"):
        validate_env_args(dict(map_name="10gen_terran", capability_config=bad))
    bad = dict(cap, team_gen=dict(cap["team_gen"], weights=[0.5, 0.5, 0.5]))
    with pytest.raises(ConfigError, match="weights"):
        validate_env_args(dict(map_name="10gen_terran", capability_config=bad))
    bad = dict(cap, start_positions=dict(cap["start_positions"], dist_type="circle"))
    with pytest.raises(ConfigError, match="surrounded"):
        validate_env_args(dict(map_name="10gen_terran", capability_config=bad))
    bad = dict(cap, n_units=0)
    with pytest.raises(ConfigError, match="n_units"):
        validate_env_args(dict(map_name="10gen_terran", capability_config=bad))
    ok = dict(
        cap, health=dict(dist_type="per_agent_uniform", lower_bound=[0.0], upper_bound=[0.1], observe=True)
    )
    with pytest.raises(ConfigError, match="reward_only_positive"):
        validate_env_args(dict(map_name="10gen_terran", capability_config=ok, reward_only_positive=False))
    with pytest.raises(ConfigError, match="kill_unit_step_mul"):
        validate_env_args(dict(map_name="10gen_terran", capability_config=ok, kill_unit_step_mul=8))


def test_conic_field_of_view_follows_smacv2_arithmetic():
    a, f = np.zeros(2), np.array([1.0, 0.0])
    inside = lambda p, r=10: bool(dist.is_position_in_cone(a, f, np.asarray(p, float), r, 12))  # noqa: E731
    assert inside((5, 0)) and inside((5, 1)) and not inside((5, 3))
    assert inside((-5, 0))  # the reference's arctan also sees straight behind
    assert not inside((11, 0))
    f = np.array([math.cos(math.pi / 2), 1.0])
    assert inside((0.01, 5), 10)
    # a hand-built scene: a Stalker at (10, 16) facing east; enemy 0 east of it, enemy 1 north
    env = make(
        "protoss_5_vs_5",
        conic_fov=True,
        attack_jitter=False,
        sim_options={"reset_preroll_loops": 0, "enemy_obs_mode": "per_row", "hunt_tick_loops": 0},
    )
    cfg = {
        "team_gen": {"ally_team": ["stalker"] * 5, "enemy_team": ["stalker"] * 5},
        "ally_start_positions": {"item": [(10, 16), (1, 1), (1, 4), (1, 28), (1, 31)]},
        "enemy_start_positions": {"item": [(14, 16), (10, 20), (31, 1), (31, 16), (31, 31)]},
    }
    env.reset(cfg)
    i = int(np.flatnonzero(np.all(env.pos[:5] == (10, 16), axis=1))[0])
    avail = np.array(env.get_avail_actions())
    assert avail.shape[1] == 6 + 12 + 5 and (avail[:, 6:18] == 1).all()
    first = 18
    rows = lambda: np.asarray(env.get_obs()[i][4 : 4 + 5 * 9]).reshape(5, 9)  # noqa: E731
    assert rows()[0].any() and not rows()[1].any()  # east in the cone, north not
    assert avail[i, first] == 1 and avail[i, first + 1] == 0
    acts = [1] * 5
    acts[i] = 6 + 3  # face north (90 degrees)
    env.step(acts)
    np.testing.assert_allclose(env.fov_directions[i], [0, 1], atol=1e-9)
    assert not rows()[0].any() and rows()[1].any()
    avail = np.array(env.get_avail_actions())
    assert avail[i, first] == 0 and avail[i, first + 1] == 1
    own = env.get_obs()[i]
    np.testing.assert_allclose(own[-5:-3], [0, 1], atol=1e-6)


# --- runners and adapters -------------------------------------------------------------------
@pytest.mark.parametrize(
    "config,scenario,extra",
    [
        ("qmix", "protoss_5_vs_5", []),
        ("differ_qmix", "terran_10_vs_11", ["runner=parallel", "batch_size_run=2"]),
        ("qmix", "zerg_20_vs_23_epo", ["env_args.sim_options.enemy_obs_mode=per_row"]),
        ("differ_qmix_transformer", "protoss_5_vs_5", ["transformer_n_layers=1"]),
        ("mappo", "zerg_5_vs_5", ["runner=parallel", "batch_size_run=2"]),
    ],
)
def test_training_runs_on_skirmish_v2(tmp_path, config, scenario, extra):
    import glob
    import json
    import os

    import main

    argv = [
        f"--config={config}",
        "--env-config=skirmish_v2",
        "with",
        f"env_args.scenario={scenario}",
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
    runs = glob.glob(os.path.join(str(tmp_path), "sacred", "skirmish_v2", scenario, "*", "1"))
    assert len(runs) == 1
    with open(os.path.join(runs[0], "metrics.json")) as f:
        metrics = json.load(f)
    assert "test_battle_won_mean" in metrics and "dead_enemies_mean" in metrics


@pytest.mark.slow
@pytest.mark.parametrize("alg", available("algs"))
def test_every_algorithm_config_trains_on_skirmish_v2(tmp_path, alg):
    # As on MPE (test_integration): every file in config/algs/ completes a short run on a v2
    # battle, logs a finite loss and steps its agent network. One team reward, as SMACv2 gives.
    from config import CONFIG_DIR, load_yaml
    from helpers import assert_trains

    cfg = load_yaml(os.path.join(CONFIG_DIR, "algs", f"{alg}.yaml"))
    extra = ["batch_size_run=2"] if cfg.get("runner") in ("parallel", "vector") else []
    if cfg.get("num_mini_batch", 1) > 2:
        extra.append("num_mini_batch=2")
    argv = [
        f"--config={alg}",
        "--env-config=skirmish_v2",
        "with",
        "env_args.scenario=zerg_5_vs_5",
        "seed=1",
        "t_max=160",
        "test_interval=150",
        "test_nepisode=1",
        "batch_size=2",
        "buffer_size=10",
        "learner_log_interval=10",
        "transition_batch_size=0",
        "common_reward=True",
        "transformer_n_layers=1",
        *extra,
    ]
    assert_trains(tmp_path, argv)


def test_pettingzoo_parallel_api_on_v2_battles():
    from pettingzoo.test import parallel_api_test

    from envs.skirmish.pettingzoo import parallel_env

    parallel_api_test(parallel_env(scenario="terran_5_vs_5", seed=0), num_cycles=200)
    env = parallel_env(scenario="zerg_5_vs_5", seed=0)
    obs, _ = env.reset(seed=3)
    assert obs["agent_0"]["observation"].shape == (env.sim.get_obs_size(),)
    first = list(env.sim.kinds)
    env.reset(seed=3)
    assert env.sim.kinds == first


def test_replays_and_smacs_heuristic_work_on_v2_battles(tmp_path):
    from PIL import Image

    env = make("terran_5_vs_5", seed=2, heuristic_ai=True, replay_dir=str(tmp_path))
    steps, done = 0, False
    fighters = [i for i in range(env.n_agents) if not env.is_medivac[i]]
    while not done:
        acts = [0] * env.n_agents
        _, done, info = env.step(acts)  # the heuristic overrides (and writes back) the actions
        if steps == 0:  # everyone who can fight is sent after an enemy
            assert all(acts[i] >= env.n_actions_no_attack for i in fighters)
        steps += 1
    assert steps < env.episode_limit and info["dead_enemies"] + info["dead_allies"] > 0
    env.reset()
    with Image.open(env.save_replay()) as gif:
        assert gif.size == (256, 256) and gif.n_frames > 1


def capability_env(enemy_x=14, **caps):
    _, cap = dist.scenario("terran_5_vs_5")
    for key, (low, high) in caps.items():
        cap[key] = dict(dist_type="per_agent_uniform", lower_bound=[low], upper_bound=[high], observe=True)
    env = SkirmishV2Env(
        map_name="10gen_terran",
        capability_config=cap,
        seed=1,
        attack_jitter=False,
        sim_options={"reset_preroll_loops": 0, "hunt_tick_loops": 0},
        **STANDARD,
    )
    scene = {
        "team_gen": {"ally_team": ["marine"] * 5, "enemy_team": ["marine"] * 5},
        "ally_start_positions": {"item": [(10, 10 + 2 * i) for i in range(5)]},
        "enemy_start_positions": {"item": [(enemy_x, 10 + 2 * i) for i in range(5)]},
    }
    levels = {k: {"item": np.full((5, 1), v[0])} for k, v in caps.items()}
    env.reset({**scene, **levels})
    return env


def test_health_capability_kills_below_the_threshold_and_rescales_health():
    env = capability_env(enemy_x=30, health=(0.8, 0.8))  # enemies out of reach
    env.hp[0] = 0.85 * env.hp_max[0]  # above the threshold: alive, observed as (0.85 - 0.8) / 0.2
    env._cache = None
    assert env.get_obs()[0][4 + 5 * 8 + 4 * 9] == pytest.approx(0.25, abs=1e-5)  # own health
    env.hp[1] = 0.75 * env.hp_max[1]  # below it: killed during the next step
    env._cache = None
    env.step([1] * 5)
    assert not env.alive[1] and env.alive[0]


def test_attack_capability_drops_every_order_at_probability_zero():
    env = capability_env(attack=(0.0, 0.0))
    avail = np.array(env.get_avail_actions())
    assert avail[:, 6:].any()
    acts = [6 + int(np.flatnonzero(a[6:])[0]) if a[6:].any() else 1 for a in avail]
    env.step(acts)
    assert (env.order[:5] != sim.ATTACK).all()
    env2 = capability_env(attack=(1.0, 1.0))
    env2.step(acts)
    assert (env2.order[:5] == sim.ATTACK).any()


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"conic_fov": True, "obs_last_action": True},
        {"obs_timestep_number": True, "state_timestep_number": True},
    ],
)
def test_feature_names_cover_every_feature(variant):
    _, cap = dist.scenario("protoss_10_vs_11")
    cap["attack"] = dict(dist_type="per_agent_uniform", lower_bound=[0.5], upper_bound=[1.0], observe=True)
    env = SkirmishV2Env(map_name="10gen_protoss", capability_config=cap, seed=0, **{**STANDARD, **variant})
    info = env.get_env_info()
    assert len(env.get_obs_feature_names()) == info["obs_shape"]
    assert len(env.get_state_feature_names()) == info["state_shape"]
    assert info["agent_features"][-3:] == ["type_0", "type_1", "type_2"]
    assert len(info["agent_features"]) == env.nf_al_s and len(info["enemy_features"]) == env.nf_en_s
