"""ICES's kills-and-deaths reward (env_args.reward_kills_deaths) on the SMAC-like envs, checked
step by step against a hand computation from the battle's own record of deaths and wins."""

import numpy as np
import pytest

from envs import REGISTRY as env_REGISTRY
from utils.errors import ConfigError

ICES = dict(reward_kills_deaths=True, reward_only_positive=False, reward_scale_rate=10)


def hand_reward(env, killed, lost, won):
    """+10 an enemy killed, -10 * 0.5 an ally lost, +200 a win, over the env's max_reward / 10."""
    return (10 * killed - 5 * lost + 200 * won) / (env.max_reward / 10)


def smac_max_reward(env):
    """SMAC's normaliser: the enemies' kills, the win, and the enemies' health and shields."""
    health = sum(env.enemies[e].health_max + env.enemies[e].shield_max for e in range(env.n_enemies))
    return 10 * env.n_enemies + 200 + health


@pytest.mark.parametrize(
    "name, kwargs", [("skirmish", {"map_name": "2s3z"}), ("skirmish_v2", {"scenario": "protoss_5_vs_5"})]
)
def test_kills_and_deaths_reward_equals_the_hand_computation(name, kwargs):
    env = env_REGISTRY[name](seed=7, **kwargs, **ICES)
    rng = np.random.default_rng(0)
    battles = 100 if name == "skirmish" else 30
    kills = deaths = wins = 0
    for _ in range(battles):
        env.reset()
        dead_e = dead_a = 0
        done = False
        while not done:
            avail = np.array(env.get_avail_actions())
            reward, done, info = env.step([rng.choice(np.flatnonzero(row)) for row in avail])
            killed, lost = info["dead_enemies"] - dead_e, info["dead_allies"] - dead_a
            dead_e, dead_a = info["dead_enemies"], info["dead_allies"]
            expected = hand_reward(env, killed, lost, bool(info["battle_won"]))
            assert reward == pytest.approx(expected, abs=1e-9), (killed, lost, info)
            kills, deaths, wins = kills + killed, deaths + lost, wins + int(info["battle_won"])
        if name == "skirmish":  # SMACv2 fixes its normaliser at the first episode's units
            assert env.max_reward == pytest.approx(smac_max_reward(env))
    env.close()
    assert kills > 0 and deaths > 0  # the check saw both kinds of events


def test_the_default_reward_counts_damage_and_the_option_does_not():
    plain = env_REGISTRY["skirmish"](
        map_name="2s3z", seed=7, reward_only_positive=False, reward_scale_rate=10
    )
    ices = env_REGISTRY["skirmish"](map_name="2s3z", seed=7, **ICES)
    rng = np.random.default_rng(1)
    differs = False
    for env in (plain, ices):
        env.reset()
    for _ in range(60):
        avail = np.array(plain.get_avail_actions())
        actions = [rng.choice(np.flatnonzero(row)) for row in avail]
        (r1, d1, _), (r2, d2, _) = plain.step(actions), ices.step(actions)
        differs |= r1 != r2
        if d1 or d2:
            break
    assert differs


@pytest.mark.parametrize(
    "args, message",
    [
        ({"reward_kills_deaths": True}, "defined with env_args.reward_only_positive=False"),
        ({"reward_kills_deaths": "yes"}, "must be True or False"),
    ],
)
def test_the_option_is_refused_where_it_does_not_hold(args, message):
    from envs.skirmish.args import validate_env_args

    with pytest.raises(ConfigError, match=message):
        validate_env_args({"map_name": "2s3z", **args})


def test_the_wrappers_kills_and_deaths_battle_reward_on_a_smac_like_env():
    # SMAC's StarCraft2Env as reward_battle reads it: units with health, death trackers
    from types import SimpleNamespace

    from envs.sc2_env import kills_deaths_battle

    unit = lambda health: SimpleNamespace(health=health)  # noqa: E731
    env = SimpleNamespace(
        reward_sparse=False, reward_death_value=10, reward_negative_scale=0.5,
        agents={0: unit(0), 1: unit(30), 2: unit(0)}, enemies={0: unit(0), 1: unit(0), 2: unit(5)},
        death_tracker_ally=np.array([0, 0, 1]), death_tracker_enemy=np.array([0, 0, 0]),
    )  # fmt: skip
    # ally 0 just died (ally 2 died before), enemies 0 and 1 just died: 2 * 10 - 5
    assert kills_deaths_battle(env) == 15.0
    assert env.death_tracker_ally.tolist() == [1, 0, 1] and env.death_tracker_enemy.tolist() == [1, 1, 0]
    assert kills_deaths_battle(env) == 0.0  # each death counts once
    env.reward_sparse = True
    env.enemies[2].health = 0
    assert kills_deaths_battle(env) == 0


def test_sc2_takes_the_option_and_refuses_it_where_it_does_not_hold():
    from envs.sc2_env import check_reward_options

    check_reward_options({"reward_kills_deaths": True, "reward_only_positive": False})
    with pytest.raises(ConfigError, match="reward_only_positive=False"):
        check_reward_options({"reward_kills_deaths": True})
