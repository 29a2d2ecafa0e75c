"""The SMAC wrapper, against a stand-in class with SMAC's method signatures (the real SMAC needs
StarCraft II, which these machines do not have; the last test runs it wherever it is installed)."""

import sys
import types

import pytest

import main
from envs import sc2_env
from envs.skirmish.env import SkirmishEnv
from utils.errors import ConfigError


class StandInStarCraft2Env(SkirmishEnv):
    """NOT SMAC: a stand-in with StarCraft2Env's constructor and methods (our simulator), used to
    test the wrapper's plumbing without StarCraft II."""


@pytest.fixture
def wrapped(monkeypatch):
    monkeypatch.setattr(sc2_env, "load_smac", lambda: StandInStarCraft2Env)
    return sc2_env.StarCraft2Env(map_name="2s3z", seed=0, common_reward=True, reward_scalarisation="sum")


def test_indi_terminated_follows_unit_health(wrapped):
    assert wrapped.get_indi_terminated() == [0, 0, 0, 0, 0]
    wrapped.env.hp[1] = 0.0  # SMAC reports a dead unit with health 0
    assert wrapped.get_indi_terminated() == [0, 1, 0, 0, 0]


def test_env_info_and_passthrough(wrapped):
    info = wrapped.get_env_info()
    assert (info["n_agents"], info["n_actions"], info["obs_shape"], info["state_shape"]) == (5, 11, 80, 120)
    assert [e["dim"] for e in info["obs_entities"]] == [4, 8, 8, 4]
    assert info["action_entities"] == {"group": "enemies", "first_action": 6}
    reward, done, step_info = wrapped.step([1] * 5)
    assert "battle_won" in step_info and isinstance(reward, float)
    assert wrapped.get_stats()["battles_game"] == 0
    assert wrapped.map_type == "stalkers_and_zealots"  # SMAC attributes pass through


def test_missing_smac_names_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "smac", None)  # import smac -> ImportError
    with pytest.raises(ConfigError, match="git\\+https://github.com/oxwhirl/smac.git"):
        sc2_env.load_smac()
    assert main.main(["--env-config=sc2", "with", "env_args.map_name=3m"]) == 2
    err = capsys.readouterr().err
    assert "needs SMAC" in err and "install_sc2.sh" in err and "StarCraft II" in err


def test_smac3_is_recognised(monkeypatch):
    monkeypatch.setitem(sys.modules, "smac", types.ModuleType("smac"))  # SMAC3 has no smac.env
    monkeypatch.setitem(sys.modules, "smac.env", None)
    with pytest.raises(ConfigError, match="SMAC3"):
        sc2_env.load_smac()


def test_missing_starcraft_names_sc2path(monkeypatch, tmp_path):
    monkeypatch.setenv("SC2PATH", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="StarCraft II was not found at .*nowhere"):
        sc2_env.check_starcraft()


def test_real_smac_when_installed(tmp_path):
    try:
        sc2_env.load_smac()
        sc2_env.check_starcraft()
    except ConfigError as e:
        pytest.skip(f"SMAC and StarCraft II are not installed here: {str(e)[:80]}")
    argv = [
        "--config=qmix",
        "--env-config=sc2",
        "with",
        "env_args.map_name=3m",
        "t_max=200",
        "test_interval=100",
        "test_nepisode=1",
        "batch_size=2",
        f"local_results_path={tmp_path}",
    ]
    assert main.main(argv) == 0
