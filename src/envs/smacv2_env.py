"""The real SMACv2 behind our env contract (--env-config=sc2v2).

SMACv2 is imported only when this env is chosen. It is installed from its git repository and
needs StarCraft II with the SMACv2 maps (32x32_flat). env_args are the same as skirmish_v2's
(SMACv2's keywords plus `scenario`), so a run switches between the two with --env-config alone.
"""

import os
import warnings

import numpy as np

from envs.multiagentenv import smac_step_fields, step_field_specs
from envs.sc2_env import (
    GameEnv,
    check_starcraft,
    check_timeout,
    import_game_package,
    sc2_path,
    set_timeout,
    wrapped_entities,
)
from envs.skirmish import distributions as dist
from envs.skirmish.args import check_reward_options, expand, plain
from utils.errors import ConfigError

INSTALL = (
    "install it with `bash install_sc2.sh` (StarCraft II 4.10 into $SC2PATH, the SMACv2 maps, and "
    "`pip install git+https://github.com/oxwhirl/smacv2.git`); see docs/starcraft.md (SMACv2). "
    "--env-config=skirmish_v2 runs the same scenarios without StarCraft II"
)
FRAMEWORK_KEYS = {
    "common_reward",
    "reward_scalarisation",
    "sim_options",
    "attack_jitter",
    "builtin_agents",
    "sc2_timeout",
}


def load_smacv2():
    """-> smacv2.env.StarCraftCapabilityEnvWrapper, or ConfigError naming what is missing."""
    module = import_game_package("smacv2.env", "--env-config=sc2v2 needs SMACv2, which", INSTALL)
    return module.StarCraftCapabilityEnvWrapper


def check_maps():
    check_starcraft(INSTALL)
    flat = os.path.join(sc2_path(), "Maps", "SMAC_Maps", "32x32_flat.SC2Map")
    if not os.path.isfile(flat):
        raise ConfigError(
            f"{flat} is missing: the SMAC v1 maps do not have it; unpack SMACv2's SMAC_Maps.zip "
            f"(the `maps` release of oxwhirl/smacv2) into {os.path.dirname(flat)}: {INSTALL}"
        )


def validate_env_args(env_args):
    check_timeout(env_args)
    check_reward_options(env_args)
    args = expand({k: v for k, v in env_args.items() if k not in ("sc2_timeout", "reward_kills_deaths")})
    cap = args.get("capability_config") or {}
    if args.get("obs_instead_of_state"):
        raise ConfigError("env_args.obs_instead_of_state=True is not supported by SMACv2; set it to False")
    missing = [k for k in ("n_units", "n_enemies", "team_gen") if k not in cap]
    if missing:
        raise ConfigError(
            f"sc2v2 needs env_args.scenario (e.g. protoss_5_vs_5) or a capability_config with "
            f"{', '.join(missing)}"
        )
    if args.get("map_name") in dist.MAP_RACE:
        dist.validate(cap, dist.MAP_RACE[args["map_name"]])
    if not args.get("common_reward", True):
        raise ConfigError("SMACv2 gives one team reward: set common_reward=True")
    load_smacv2()
    check_maps()


class SMACv2Env(GameEnv):
    """Delegates to SMACv2's StarCraftCapabilityEnvWrapper (and to its inner StarCraft2Env for
    what the wrapper does not forward); adds per-agent termination, the entity layout, and
    guards for two wrapper bugs (reset may return None; get_stats divides by zero)."""

    install = INSTALL

    def __init__(self, **env_args):
        wrapper = load_smacv2()
        set_timeout(env_args)
        # plain, deep-copied: SMACv2's wrapper edits capability_config
        args = expand({k: v for k, v in env_args.items() if k not in ("sc2_timeout", "reward_kills_deaths")})
        if args.get("sim_options"):
            warnings.warn("env_args.sim_options only affect skirmish_v2; sc2v2 ignores them", stacklevel=2)
        self.env = wrapper(**{k: v for k, v in plain(args).items() if k not in FRAMEWORK_KEYS})
        self.use_kills_deaths_reward(env_args, self.env.__dict__.get("env", self.env))

    def __getattr__(self, name):
        if name == "env":  # not yet set: avoid recursing during construction
            raise AttributeError(name)
        try:
            return getattr(self.env, name)
        except AttributeError:
            inner = self.env.__dict__.get("env")
            if inner is None:
                raise
            return getattr(inner, name)

    def reset(self):
        out = self._guard(self.env.reset)  # the first reset starts the game
        if out is None:  # SMACv2's retry after a failed unit spawn returns nothing
            return self.get_obs(), self.get_state()
        return out

    def step(self, actions):
        return self._guard(self.env.step, np.asarray(actions).tolist())

    def get_stats(self):
        try:
            return self.env.get_stats()
        except ZeroDivisionError:  # before the first battle
            inner = self.env.__dict__.get("env", self.env)
            return {
                "battles_won": getattr(inner, "battles_won", 0),
                "battles_game": getattr(inner, "battles_game", 0),
                "battles_draw": getattr(inner, "timeouts", 0),
                "win_rate": 0.0,
                "timeouts": getattr(inner, "timeouts", 0),
                "restarts": getattr(inner, "force_restarts", 0),
            }

    def get_indi_terminated(self):
        """1 for each agent whose unit has no health left (SMAC's own death test)."""
        return [int(self.get_unit_by_id(i).health == 0) for i in range(self.n_agents)]

    step_fields = ("visible", "pos")

    def get_step_fields(self, names):
        return smac_step_fields(self, names)

    def get_env_info(self):
        info = dict(self.env.get_env_info())
        info["step_fields"] = step_field_specs(self.step_fields, self.n_agents)
        info.setdefault("n_enemies", self.n_enemies)
        if not getattr(self, "obs_timestep_number", False):
            info.update(wrapped_entities(self))
        return info

    def close(self):
        env, self.__dict__["env"] = self.__dict__.get("env"), None
        if env is not None:
            env.close()
