"""The real SMAC (StarCraft Multi-Agent Challenge) behind our env contract.

SMAC is imported only when this env is chosen. It is installed from its git repository (the PyPI
package named `smac` is SMAC3, a hyperparameter optimiser) and needs the StarCraft II binary.
"""

import importlib
import os

import numpy as np

from envs.multiagentenv import smac_entities
from utils.errors import ConfigError

INSTALL = (
    "install it with `bash install_sc2.sh` (StarCraft II 4.10 into $SC2PATH, the SMAC maps, "
    "and `pip install git+https://github.com/oxwhirl/smac.git`); see the README's StarCraft "
    "section. --env-config=skirmish runs the same maps without StarCraft II"
)
WRAPPER_KEYS = {"common_reward", "reward_scalarisation"}


def load_smac():
    """-> smac.env.StarCraft2Env, or ConfigError naming what is missing."""
    try:
        module = importlib.import_module("smac.env")
    except ImportError:
        try:
            importlib.import_module("smac")
        except ImportError:
            raise ConfigError(f"--env-config=sc2 needs SMAC, which is not installed: {INSTALL}") from None
        raise ConfigError(
            "the installed package `smac` is SMAC3 (a hyperparameter optimiser), not "
            "the StarCraft Multi-Agent Challenge: `pip uninstall smac`, then "
            f"{INSTALL}"
        ) from None
    return module.StarCraft2Env


def sc2_path():
    return os.environ.get("SC2PATH") or os.path.expanduser("~/StarCraftII")


def check_starcraft():
    path = sc2_path()
    if not os.path.isdir(os.path.join(path, "Versions")):
        raise ConfigError(f"StarCraft II was not found at {path} (set SC2PATH to its folder): {INSTALL}")
    maps = os.path.join(path, "Maps", "SMAC_Maps")
    if not os.path.isdir(maps):
        raise ConfigError(f"the SMAC maps are missing from {maps}: {INSTALL}")


def validate_env_args(env_args):
    load_smac()
    check_starcraft()
    if not env_args.get("common_reward", True):
        raise ConfigError("SMAC gives one team reward: set common_reward=True")


class StarCraft2Env:
    """Delegates to SMAC's StarCraft2Env (every method and attribute not defined here passes
    through); adds per-agent termination and the entity layout. It meets the MultiAgentEnv
    contract through SMAC's own methods, so it does not inherit the contract's stubs."""

    def __init__(self, **env_args):
        env_class = load_smac()
        self.env = env_class(**{k: v for k, v in env_args.items() if k not in WRAPPER_KEYS})

    def __getattr__(self, name):
        if name == "env":  # not yet set: avoid recursing during construction
            raise AttributeError(name)
        return getattr(self.env, name)

    def step(self, actions):
        return self.env.step(np.asarray(actions).tolist())

    def get_indi_terminated(self):
        """1 for each agent whose unit has no health left (SMAC's own death test)."""
        return [int(self.env.get_unit_by_id(i).health == 0) for i in range(self.n_agents)]

    def get_env_info(self):
        info = dict(self.env.get_env_info())
        env = self.env
        if getattr(env, "obs_timestep_number", False):  # SMAC's observations are one longer than it says
            info["obs_shape"] += 1
        else:
            info.update(wrapped_entities(env))
        return info


def wrapped_entities(env):
    """The entity layout of a SMAC (or SMACv2) env, from its own size helpers."""
    return smac_entities(
        env.get_obs_move_feats_size(),
        env.get_obs_enemy_feats_size(),
        env.get_obs_ally_feats_size(),
        env.get_obs_own_feats_size(),
        env.n_actions_no_attack,
    )
