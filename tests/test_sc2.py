"""The SMAC wrapper, against a stand-in class with SMAC's method signatures (the real SMAC needs
StarCraft II, which these machines do not have; the last test runs it wherever it is installed)."""

import sys
import types

import pytest

import main
from envs import sc2_env
from helpers import hide_package, real_smac_check
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
    assert info["action_entities"] == {"group": "enemies", "first_action": 6, "healers": []}
    wrapped.env.map_type = "MMM"  # SMAC sorts agents by unit type: the MMM maps' Medivac is last
    assert wrapped.get_env_info()["action_entities"]["healers"] == [1]


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
    hide_package(monkeypatch, "smac")  # import smac -> ImportError, where SMAC is installed too
    with pytest.raises(ConfigError, match="git\\+https://github.com/oxwhirl/smac.git"):
        sc2_env.load_smac()
    assert main.main(["--env-config=sc2", "with", "env_args.map_name=3m"]) == 2
    err = capsys.readouterr().err
    assert "needs SMAC" in err and "install_sc2.sh" in err and "StarCraft II" in err


def test_simulator_options_are_refused_by_name_before_smac_loads(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "smac", None)  # the refusal comes first, SMAC or not
    argv = ["--env-config=sc2", "with", "env_args.map_name=3m", "env_args.placement=random"]
    assert main.main(argv) == 2
    err = capsys.readouterr().err
    assert "env_args placement" in err and "--env-config=skirmish" in err and "needs SMAC" not in err
    with pytest.raises(ConfigError, match="attack_jitter, builtin_agents"):
        sc2_env.validate_env_args({"map_name": "3m", "builtin_agents": True, "attack_jitter": False})


def test_smac3_is_told_by_its_files_not_by_a_failed_import(monkeypatch):
    monkeypatch.setattr(sc2_env.importlib.metadata, "packages_distributions", lambda: {"smac": ["smac"]})
    smac3 = ["smac/__init__.py", "smac/facade/hyperparameter_optimization_facade.py"]
    challenge = ["smac/__init__.py", "smac/env/starcraft2/starcraft2.py"]
    monkeypatch.setattr(sc2_env.importlib.metadata, "files", lambda name: smac3)
    assert sc2_env.smac_distribution() == "smac3"
    with pytest.raises(ConfigError, match="SMAC3"):
        sc2_env.load_smac()
    # the real SMAC whose import fails (a dependency missing) is not taken for SMAC3
    monkeypatch.setattr(sc2_env.importlib.metadata, "files", lambda name: challenge)
    assert sc2_env.smac_distribution() == "smac"
    broken = types.ModuleType("smac")
    monkeypatch.setitem(sys.modules, "smac", broken)
    monkeypatch.setitem(sys.modules, "smac.env", None)
    monkeypatch.setitem(sys.modules, "pysc2", None)
    with pytest.raises(ConfigError) as e:
        sc2_env.load_smac()
    assert "SMAC3" not in str(e.value)
    monkeypatch.setattr(sc2_env.importlib.metadata, "packages_distributions", lambda: {})
    assert sc2_env.smac_distribution() is None


def game_folder(root, binary=True, maps=True):
    (root / "Versions" / "Base75689").mkdir(parents=True)
    if binary:
        (root / "Versions" / "Base75689" / "SC2_x64").write_text("")
    if maps:
        (root / "Maps" / "SMAC_Maps").mkdir(parents=True)
    return root


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p / "nowhere", r"StarCraft II was not found: .*nowhere does not exist"),
        (lambda p: p, r"holds no StarCraft II \(no Versions/ folder"),
        (lambda p: game_folder(p, binary=False), r"holds no game binary"),
        (lambda p: game_folder(p, maps=False), r"SMAC maps are missing"),
    ],
)
def test_every_way_the_game_can_be_missing_is_one_line_and_exit_2(
    monkeypatch, tmp_path, capsys, make, message
):
    monkeypatch.setenv("SC2PATH", str(make(tmp_path)))
    monkeypatch.setattr(sc2_env, "load_smac", lambda: FakeSMAC)
    with pytest.raises(ConfigError, match=message):
        sc2_env.check_starcraft()
    assert main.main(["--env-config=sc2", "with", "env_args.map_name=3m"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0] and "install_sc2.sh" in err[0], err


def test_a_game_that_does_not_start_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    class LaunchError(Exception):
        pass

    LaunchError.__module__ = "pysc2.lib.sc_process"  # as PySC2's SC2LaunchError

    class NoGame(FakeSMAC):
        def reset(self):
            raise LaunchError("No SC2 binary found")

        def close(self):
            pass

        def get_obs(self):
            return []

    monkeypatch.setenv("SC2PATH", str(game_folder(tmp_path)))
    monkeypatch.setattr(sc2_env, "load_smac", lambda: NoGame)
    env = sc2_env.StarCraft2Env(map_name="3m")
    with pytest.raises(ConfigError, match="did not start .*No SC2 binary found"):
        env.reset()


def test_duplicate_maps_are_named_as_such_not_as_a_game_that_did_not_start():
    class DuplicateMapError(Exception):
        pass

    DuplicateMapError.__module__ = "pysc2.maps.lib"  # as PySC2's
    error = sc2_env.launch_error(DuplicateMapError("Duplicate map found: 3m"))
    assert "did not start" not in str(error)
    assert "SMAC and SMACv2 were both imported in this process" in str(error)
    assert "Duplicate map found: 3m" in str(error) and "separate processes" in str(error)


def test_protobuf_runtime_is_chosen_only_where_needed_and_not_chosen(monkeypatch):
    monkeypatch.delenv("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", raising=False)
    monkeypatch.setattr(sc2_env.importlib.metadata, "version", lambda name: "3.20.3")
    sc2_env.protobuf_runtime()
    assert "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION" not in sc2_env.os.environ
    monkeypatch.setattr(sc2_env.importlib.metadata, "version", lambda name: "7.36.2")
    sc2_env.protobuf_runtime()
    assert sc2_env.os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] == "python"
    monkeypatch.setenv("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "upb")  # the user's choice stays
    sc2_env.protobuf_runtime()
    assert sc2_env.os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] == "upb"


def test_a_protobuf_mismatch_is_named(monkeypatch):
    def descriptors(name):
        raise TypeError("Descriptors cannot be created directly.\nIf this call came from a _pb2.py file ...")

    monkeypatch.setenv("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "upb")
    monkeypatch.setattr(sc2_env.importlib, "import_module", descriptors)
    monkeypatch.setattr(sc2_env, "loaded_protobuf_runtime", lambda: "upb")
    with pytest.raises(ConfigError, match="PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=upb: unset it"):
        sc2_env.import_game_package("smac.env", "SMAC", sc2_env.INSTALL)
    # imported earlier in the process with another runtime than the one now chosen: no setting of
    # the variable helps this process, and the error says so instead of "set it to python"
    monkeypatch.setenv("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
    with pytest.raises(ConfigError, match="imported in this process with its upb runtime") as e:
        sc2_env.import_game_package("smac.env", "SMAC", sc2_env.INSTALL)
    assert "fresh process" in str(e.value) and "unset it" not in str(e.value)


def test_the_loaded_protobuf_runtime_is_read_from_protobuf_itself():
    import google.protobuf  # noqa: F401  (the suite's earlier imports may have loaded it already)
    from google.protobuf.internal import api_implementation

    assert sc2_env.loaded_protobuf_runtime() == api_implementation.Type()
    assert sc2_env.loaded_protobuf_runtime() in {"upb", "python", "cpp"}


def test_real_smac_when_installed(tmp_path):
    if sc2_env.smac_distribution() != "smac":
        pytest.skip("SMAC is not installed here (bash install_sc2.sh)")
    try:
        sc2_env.check_starcraft()
    except ConfigError as e:  # the game, not SMAC: tests/test_sc2_standin.py runs without it
        pytest.skip(f"StarCraft II is not installed here: {str(e)[:80]}")
    real_smac_check("run_smac", str(tmp_path))


def test_env_info_equals_the_real_smacs_on_every_map():
    # the constructors start no game: where SMAC is installed, this runs without one
    if sc2_env.smac_distribution() != "smac":
        pytest.skip("SMAC is not installed here (bash install_sc2.sh --packages-only)")
    real_smac_check("env_info_smac")
