"""The real SMAC (StarCraft Multi-Agent Challenge) behind our env contract.

SMAC is imported only when this env is chosen. It is installed from its git repository (the PyPI
package named `smac` is SMAC3, a hyperparameter optimiser) and needs the StarCraft II binary.
"""

import glob
import importlib
import importlib.metadata
import os
import sys
import types

import numpy as np

from envs.multiagentenv import smac_entities, smac_step_fields, step_field_specs
from envs.skirmish.args import SIM_CHOICES, SIM_DEFAULTS, check_reward_options
from utils.errors import ConfigError

INSTALL = (
    "install it with `bash install_sc2.sh` (StarCraft II 4.10 into $SC2PATH, the SMAC maps, "
    "and `pip install git+https://github.com/oxwhirl/smac.git`); see docs/starcraft.md. "
    "--env-config=skirmish runs the same maps without StarCraft II"
)
WRAPPER_KEYS = {"common_reward", "reward_scalarisation", "sc2_timeout", "reward_kills_deaths"}


def protobuf_runtime():
    """PySC2's and s2clientprotocol's generated protobuf files predate protobuf 4, whose default
    runtime refuses them ("Descriptors cannot be created directly"); protobuf's pure-Python
    runtime reads them. Chosen before anything imports protobuf, unless the user chose."""
    if "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION" in os.environ:
        return
    try:
        major = int(importlib.metadata.version("protobuf").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return
    if major >= 4:
        os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"


def loaded_protobuf_runtime():
    """The runtime protobuf was imported with in this process ("upb", "python", "cpp"), or None
    where it has not been imported."""
    if "google.protobuf" not in sys.modules:
        return None
    from google.protobuf.internal import api_implementation

    return api_implementation.Type()


def smac_distribution():
    """What provides the `smac` module: "smac" (the StarCraft Multi-Agent Challenge), "smac3"
    (PyPI's smac, a hyperparameter optimiser) or None, told by the distribution's files."""
    kind = None
    for name in importlib.metadata.packages_distributions().get("smac", []):
        files = [str(f) for f in (importlib.metadata.files(name) or [])]
        kind = "smac" if any(f.endswith("smac/env/starcraft2/starcraft2.py") for f in files) else "smac3"
    return kind


def import_game_package(module, what, install):
    """Import SMAC's or SMACv2's env module; every way it can fail is a ConfigError naming what
    to do."""
    protobuf_runtime()
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing = getattr(e, "name", None) or ""
        if missing.split(".")[0] == module.split(".")[0]:
            raise ConfigError(f"{what} is not installed: {install}") from None
        raise ConfigError(f"{what} is installed but does not import ({e}): {install}") from None
    except TypeError as e:
        if "Descriptors cannot be created directly" not in str(e):
            raise
        runtime = os.environ.get("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION")
        loaded = loaded_protobuf_runtime()
        if loaded is not None and loaded != runtime:
            # protobuf fixes its runtime when first imported: something in this process imported
            # it before the wrapper chose (a notebook's tensorboard or wandb, an earlier run)
            raise ConfigError(
                f"protobuf {importlib.metadata.version('protobuf')} was imported in this process "
                f"with its {loaded} runtime before the sc2 wrappers chose one, and that runtime "
                "cannot load StarCraft II's protocol files: start a fresh process, or set "
                "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python before anything imports protobuf"
            ) from None
        raise ConfigError(
            f"protobuf {importlib.metadata.version('protobuf')} cannot load StarCraft II's protocol "
            f"files with PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION={runtime}: unset it (the sc2 "
            "wrappers then choose python) or set it to python"
        ) from None


def load_smac():
    """-> smac.env.StarCraft2Env, or ConfigError naming what is missing."""
    if smac_distribution() == "smac3":
        raise ConfigError(
            "the installed package `smac` is SMAC3 (a hyperparameter optimiser), not "
            f"the StarCraft Multi-Agent Challenge: `pip uninstall smac`, then {INSTALL}"
        )
    return import_game_package("smac.env", "--env-config=sc2 needs SMAC, which", INSTALL).StarCraft2Env


def sc2_path():
    return os.environ.get("SC2PATH") or os.path.expanduser("~/StarCraftII")


def check_starcraft(install=INSTALL):
    """The game at SC2PATH: its folder, a game binary under Versions/, and the SMAC maps."""
    path = sc2_path()
    if not os.path.isdir(path):
        raise ConfigError(
            f"StarCraft II was not found: {path} does not exist (set SC2PATH to its folder); {install}"
        )
    versions = os.path.join(path, "Versions")
    if not os.path.isdir(versions):
        raise ConfigError(f"{path} holds no StarCraft II (no Versions/ folder; set SC2PATH): {install}")
    binaries = [
        b
        for name in ("SC2_x64", "SC2_x64.exe", "SC2.app")
        for b in glob.glob(os.path.join(versions, "Base*", name))
    ]
    if not binaries:
        raise ConfigError(
            f"{versions} holds no game binary (Base*/SC2_x64): the game's install is incomplete; {install}"
        )
    maps = os.path.join(path, "Maps", "SMAC_Maps")
    if not os.path.isdir(maps):
        raise ConfigError(f"the SMAC maps are missing from {maps}: {install}")


def launch_error(e, install=INSTALL):
    """A ConfigError for a game that would not start (PySC2's launch and connection errors)."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if type(e).__name__ == "DuplicateMapError":  # not the game: both packages' maps in one process
        return ConfigError(
            f"SMAC and SMACv2 were both imported in this process, and PySC2 refuses their maps of the "
            f"same name ({first}): run sc2 and sc2v2 in separate processes"
        )
    return ConfigError(f"StarCraft II at {sc2_path()} did not start ({type(e).__name__}: {first}): {install}")


def is_launch_error(e):
    return type(e).__module__.startswith(("pysc2", "websocket", "portpicker")) or isinstance(
        e, (ConnectionError, TimeoutError)
    )


def check_timeout(env_args):
    value = env_args.get("sc2_timeout")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"env_args.sc2_timeout={value!r} must be a whole number of seconds >= 1, or null")


def set_timeout(env_args):
    """PySC2 waits sc2_timeout seconds for the game to start and to answer each request (its flag
    --sc2_timeout, 360 by default): a game that never answers then ends the run in that time."""
    value = env_args.get("sc2_timeout")
    if value is not None:
        from absl import flags

        flags.FLAGS.sc2_timeout = int(value)


def simulator_only_keys(env_args):
    """Refuse skirmish's own options (StarCraft II has no such settings), before anything loads."""
    extra = sorted(k for k in env_args if k in SIM_DEFAULTS or k in SIM_CHOICES)
    if extra:
        raise ConfigError(
            f"env_args {', '.join(extra)}: options of the built-in simulator (--env-config=skirmish), "
            "which StarCraft II does not have; leave them out with --env-config=sc2"
        )


def validate_env_args(env_args):
    simulator_only_keys(env_args)
    check_reward_options(env_args)
    check_timeout(env_args)
    load_smac()
    check_starcraft()
    if not env_args.get("common_reward", True):
        raise ConfigError("SMAC gives one team reward: set common_reward=True")


class GameEnv:
    """What the sc2 and sc2v2 wrappers share: the game's random state stays inside StarCraft II,
    and a game that stops answering (SMAC relaunches it inside reset and step) ends the run with
    the one-line launch error."""

    install = INSTALL

    def get_rng_state(self):
        return None  # StarCraft II draws inside the game: a resumed run plays other episodes

    def set_rng_state(self, state):
        raise NotImplementedError("StarCraft II's random state cannot be restored")

    def use_kills_deaths_reward(self, env_args, game):
        """env_args.reward_kills_deaths: the game env's battle reward becomes ICES's (their SMAC
        edits only reward_battle; win, defeat and scaling stay SMAC's own)."""
        if env_args.get("reward_kills_deaths"):
            game.reward_battle = types.MethodType(kills_deaths_battle, game)

    def _guard(self, call, *args):
        try:
            return call(*args)
        except Exception as e:
            if is_launch_error(e):
                raise launch_error(e, self.install) from None
            raise


def kills_deaths_battle(env):
    """ICES's battle reward on a SMAC StarCraft2Env: +reward_death_value an enemy killed, minus
    reward_death_value * reward_negative_scale an ally lost, damage not counted; the death
    trackers are kept as SMAC's own reward_battle keeps them."""
    if env.reward_sparse:
        return 0
    reward = 0.0
    for trackers, units, value in (
        (env.death_tracker_ally, env.agents, -env.reward_death_value * env.reward_negative_scale),
        (env.death_tracker_enemy, env.enemies, env.reward_death_value),
    ):
        for i, unit in units.items():
            if not trackers[i] and unit.health == 0:
                trackers[i] = 1
                reward += value
    return reward


class StarCraft2Env(GameEnv):
    """Delegates to SMAC's StarCraft2Env (every method and attribute not defined here passes
    through); adds per-agent termination and the entity layout. It meets the MultiAgentEnv
    contract through SMAC's own methods, so it does not inherit the contract's stubs."""

    def __init__(self, **env_args):
        env_class = load_smac()
        set_timeout(env_args)
        self.env = env_class(**{k: v for k, v in env_args.items() if k not in WRAPPER_KEYS})
        self.use_kills_deaths_reward(env_args, self.env)

    def __getattr__(self, name):
        if name == "env":  # not yet set: avoid recursing during construction
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self):
        return self._guard(self.env.reset)  # the first reset starts the game

    def step(self, actions):
        return self._guard(self.env.step, np.asarray(actions).tolist())

    def get_indi_terminated(self):
        """1 for each agent whose unit has no health left (SMAC's own death test)."""
        return [int(self.env.get_unit_by_id(i).health == 0) for i in range(self.n_agents)]

    step_fields = ("visible", "pos")

    def get_step_fields(self, names):
        return smac_step_fields(self, names)

    def get_env_info(self):
        info = dict(self.env.get_env_info())
        info["step_fields"] = step_field_specs(self.step_fields, self.n_agents)
        env = self.env
        if getattr(env, "obs_timestep_number", False):  # SMAC's observations are one longer than it says
            info["obs_shape"] += 1
        else:
            info.update(wrapped_entities(env))
        return info


def wrapped_entities(env):
    """The entity layout of a SMAC (or SMACv2) env, from its own size helpers. On SMAC's MMM maps
    the Medivac, whose attack slots heal, is the last agent (SMAC sorts the agents by unit type,
    and its MMM type ids put the Medivac last); SMACv2's drawn teams move it, so none is named."""
    healers = [env.n_agents - 1] if getattr(env, "map_type", None) == "MMM" else []
    return smac_entities(
        env.get_obs_move_feats_size(),
        env.get_obs_enemy_feats_size(),
        env.get_obs_ally_feats_size(),
        env.get_obs_own_feats_size(),
        env.n_actions_no_attack,
        healers,
    )
