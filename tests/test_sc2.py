"""The SMAC wrapper, against a stand-in class with SMAC's method signatures (the real SMAC needs
StarCraft II, which these machines do not have; the last test runs it wherever it is installed)."""

import sys
import types

import pytest

import main
from envs import sc2_env
from utils.errors import ConfigError


class FakeSMAC:
    """NOT SMAC and not our simulator: a recorder with the StarCraft2Env members the wrapper uses,
    returning numbers no real map has, so the test sees what the wrapper does with them."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.n_agents, self.n_actions_no_attack = 2, 6
        self.obs_timestep_number = kwargs.get("obs_timestep_number", False)
        self.map_type = "fake_type"
        self.health = [45.0, 0.0]
        self.actions = []

    def get_env_info(self):
        return {"n_agents": 2, "n_actions": 9, "obs_shape": 61, "state_shape": 33, "episode_limit": 17}

    def get_obs_move_feats_size(self):
        return 4

    def get_obs_enemy_feats_size(self):
        return 3, 11

    def get_obs_ally_feats_size(self):
        return 1, 12

    def get_obs_own_feats_size(self):
        return 2

    def get_unit_by_id(self, i):
        return types.SimpleNamespace(health=self.health[i])

    def step(self, actions):
        self.actions.append(actions)
        return 1.5, False, {"battle_won": False}


@pytest.fixture
def wrapped(monkeypatch):
    monkeypatch.setattr(sc2_env, "load_smac", lambda: FakeSMAC)
    return sc2_env.StarCraft2Env(map_name="3m", seed=4, common_reward=True, reward_scalarisation="sum")


def test_constructor_gets_smac_arguments_only(wrapped):
    assert wrapped.env.kwargs == {"map_name": "3m", "seed": 4}  # the run-level reward keys stay out


def test_indi_terminated_follows_unit_health(wrapped):
    assert wrapped.get_indi_terminated() == [0, 1]
    wrapped.env.health[1] = 3.0
    assert wrapped.get_indi_terminated() == [0, 0]


def test_env_info_adds_the_entity_layout_from_smac_sizes(wrapped):
    info = wrapped.get_env_info()
    assert (info["n_agents"], info["n_actions"], info["obs_shape"], info["state_shape"]) == (2, 9, 61, 33)
    assert [(e["name"], e["count"], e["dim"]) for e in info["obs_entities"]] == [
        ("move", 1, 4),
        ("enemies", 3, 11),
        ("allies", 1, 12),
        ("own", 1, 2),
    ]
    assert info["action_entities"] == {"group": "enemies", "first_action": 6}


def test_no_entity_layout_when_the_timestep_is_appended(monkeypatch):
    monkeypatch.setattr(sc2_env, "load_smac", lambda: FakeSMAC)
    env = sc2_env.StarCraft2Env(map_name="3m", obs_timestep_number=True)
    info = env.get_env_info()
    assert "obs_entities" not in info
    assert info["obs_shape"] == 62  # SMAC appends the time to observations one longer than it says


def test_step_passes_a_list_and_attributes_pass_through(wrapped):
    import numpy as np

    reward, done, info = wrapped.step(np.array([1, 7]))
    assert wrapped.env.actions == [[1, 7]] and type(wrapped.env.actions[0]) is list  # SMAC indexes a list
    assert all(type(a) is int for a in wrapped.env.actions[0])
    assert (reward, done, info) == (1.5, False, {"battle_won": False})
    assert wrapped.map_type == "fake_type"  # SMAC attributes pass through


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
