"""The SMACv2 wrapper (--env-config=sc2v2) against a stand-in module with the members of SMACv2's
StarCraftCapabilityEnvWrapper that the wrapper uses (the real one needs StarCraft II)."""

import importlib.util
import sys
import types

import pytest

import main
from envs import smacv2_env
from helpers import hide_package, real_smac_check
from utils.errors import ConfigError


class FakeInner:
    """Stands for SMACv2's inner StarCraft2Env: members the outer wrapper does not forward."""

    def __init__(self):
        self.health = [30.0, 0.0, 12.0]
        self.battles_won = self.battles_game = self.timeouts = self.force_restarts = 0

    def get_unit_by_id(self, i):
        return types.SimpleNamespace(health=self.health[i])


class FakeWrapper:
    """NOT SMACv2: a recorder that behaves like its wrapper where ours must cope (it edits the
    capability_config it is given, its retry path of reset returns None, get_stats divides by
    the number of battles)."""

    instances = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        cap = kwargs["capability_config"]
        for key, sub in cap.items():  # as SMACv2 does, in the caller's dict
            if isinstance(sub, dict):
                sub.update(env_key=key, n_units=cap["n_units"], n_enemies=cap["n_enemies"])
        self.env = FakeInner()
        self.n_agents, self.n_enemies, self.n_actions_no_attack = 3, 4, 6
        self.obs_timestep_number = kwargs.get("obs_timestep_number", False)
        self.resets = 0
        self.actions = []
        FakeWrapper.instances.append(self)

    def reset(self):
        self.resets += 1
        return None if self.resets == 1 else (["o"], "s")

    def get_obs(self):
        return ["obs"]

    def get_state(self):
        return "state"

    def step(self, actions):
        self.actions.append(actions)
        return 0.5, False, {}

    def get_stats(self):
        return {"win_rate": self.env.battles_won / self.env.battles_game}

    def get_env_info(self):
        return {
            "n_agents": 3,
            "n_actions": 10,
            "obs_shape": 70,
            "state_shape": 90,
            "cap_shape": 3,
            "episode_limit": 200,
        }

    def get_obs_move_feats_size(self):
        return 4

    def get_obs_enemy_feats_size(self):
        return 4, 8

    def get_obs_ally_feats_size(self):
        return 2, 8

    def get_obs_own_feats_size(self):
        return 8


@pytest.fixture
def fake_smacv2(monkeypatch):
    pkg, env = types.ModuleType("smacv2"), types.ModuleType("smacv2.env")
    env.StarCraftCapabilityEnvWrapper = FakeWrapper
    pkg.env = env
    monkeypatch.setitem(sys.modules, "smacv2", pkg)
    monkeypatch.setitem(sys.modules, "smacv2.env", env)
    FakeWrapper.instances.clear()
    return FakeWrapper


def test_scenario_expands_and_the_callers_config_is_left_alone(fake_smacv2):
    from envs.skirmish import distributions as dist

    given = {"scenario": "terran_10_vs_11_epo", "common_reward": True, "sim_options": {}, "seed": 3}
    env = smacv2_env.SMACv2Env(**given)
    kw = env.env.kwargs
    _, cap = dist.scenario("terran_10_vs_11")
    assert kw["map_name"] == "10gen_terran" and kw["prob_obs_enemy"] == 0.0 and kw["action_mask"] is False
    assert kw["capability_config"]["team_gen"]["unit_types"] == cap["team_gen"]["unit_types"]
    assert "scenario" not in kw and "common_reward" not in kw and "sim_options" not in kw and kw["seed"] == 3
    assert given == {"scenario": "terran_10_vs_11_epo", "common_reward": True, "sim_options": {}, "seed": 3}
    # a read-only mapping (as Sacred passes config) is copied before SMACv2 edits it
    frozen = types.MappingProxyType(
        {"n_units": 5, "n_enemies": 5, "team_gen": types.MappingProxyType(dict(cap["team_gen"]))}
    )
    env = smacv2_env.SMACv2Env(map_name="10gen_terran", capability_config=dict(frozen))
    assert env.env.kwargs["capability_config"]["team_gen"]["env_key"] == "team_gen"
    assert "env_key" not in frozen["team_gen"]


def test_reset_none_steps_stats_and_deaths(fake_smacv2):
    env = smacv2_env.SMACv2Env(scenario="protoss_5_vs_5")
    assert env.reset() == (["obs"], "state")  # the wrapper's retry path returned None
    assert env.reset() == (["o"], "s")
    env.step([1, 7, 0])
    assert all(type(a) is int for a in env.env.actions[0])
    assert env.get_stats()["win_rate"] == 0.0  # SMACv2 itself divides by zero here
    assert env.get_indi_terminated() == [0, 1, 0]  # through the inner env
    info = env.get_env_info()
    assert info["cap_shape"] == 3 and info["n_enemies"] == 4
    assert info["action_entities"] == {"group": "enemies", "first_action": 6, "healers": []}
    assert [e["count"] for e in info["obs_entities"]] == [1, 4, 2, 1]
    env.env.close = lambda: None
    env.close()
    env.close()  # a second close is harmless


def test_missing_smacv2_names_what_to_install(monkeypatch, capsys):
    hide_package(monkeypatch, "smacv2")  # where SMACv2 is installed (and was imported) too
    with pytest.raises(ConfigError, match="git\\+https://github.com/oxwhirl/smacv2.git"):
        smacv2_env.load_smacv2()
    assert main.main(["--env-config=sc2v2", "with", "env_args.scenario=zerg_5_vs_5"]) == 2
    err = capsys.readouterr().err
    assert "needs SMACv2" in err and "install_sc2.sh" in err and "skirmish_v2" in err


def test_missing_v2_maps_are_named(fake_smacv2, monkeypatch, tmp_path):
    (tmp_path / "Versions" / "Base75689").mkdir(parents=True)
    (tmp_path / "Versions" / "Base75689" / "SC2_x64").write_text("")
    (tmp_path / "Maps" / "SMAC_Maps").mkdir(parents=True)
    monkeypatch.setenv("SC2PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="32x32_flat"):
        smacv2_env.validate_env_args({"scenario": "protoss_5_vs_5"})
    (tmp_path / "Versions" / "Base75689" / "SC2_x64").unlink()  # SMACv2's words, not SMAC's
    with pytest.raises(ConfigError, match="no game binary.*smacv2.*skirmish_v2"):
        smacv2_env.validate_env_args({"scenario": "protoss_5_vs_5"})
    (tmp_path / "Versions" / "Base75689" / "SC2_x64").write_text("")
    (tmp_path / "Maps" / "SMAC_Maps" / "32x32_flat.SC2Map").write_text("")
    smacv2_env.validate_env_args({"scenario": "protoss_5_vs_5"})
    with pytest.raises(ConfigError, match="obs_instead_of_state"):
        smacv2_env.validate_env_args({"scenario": "protoss_5_vs_5", "obs_instead_of_state": True})
    with pytest.raises(ConfigError, match="team_gen"):
        smacv2_env.validate_env_args(
            {"map_name": "10gen_zerg", "capability_config": {"n_units": 5, "n_enemies": 5}}
        )


def test_real_smacv2_when_installed(tmp_path):
    if importlib.util.find_spec("smacv2") is None:
        pytest.skip("SMACv2 is not installed here (bash install_sc2.sh)")
    try:
        smacv2_env.check_maps()
    except ConfigError as e:  # the game, not SMACv2: tests/test_sc2_standin.py runs without it
        pytest.skip(f"StarCraft II is not installed here: {str(e)[:80]}")
    real_smac_check("run_smacv2", str(tmp_path))


def test_env_info_equals_the_real_smacv2s_on_every_scenario():
    # the constructors start no game: where SMACv2 is installed, this runs without one
    if importlib.util.find_spec("smacv2") is None:
        pytest.skip("SMACv2 is not installed here (bash install_sc2.sh --packages-only)")
    real_smac_check("env_info_smacv2")
