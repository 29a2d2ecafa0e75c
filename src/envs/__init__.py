"""Environments by name. Constructors import their simulators lazily."""

import importlib

from utils.registry import Registry


class _Lazy:
    """The object at a dotted path, imported on first use: an env's simulator loads only when it
    is asked for."""

    def __init__(self, path):
        self.module, _, self.name = path.rpartition(".")

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def resolve(self):
        return getattr(importlib.import_module(self.module), self.name)


# env name -> (constructor, validator of env_args)
_ENVS = {
    "mpe": ("envs.pettingzoo_env.PettingZooEnv", "envs.pettingzoo_env.validate_env_args"),
    "pettingzoo": ("envs.pettingzoo_env.PettingZooEnv", "envs.pettingzoo_env.validate_env_args"),
    "skirmish": ("envs.skirmish.env.SkirmishEnv", "envs.skirmish.args.validate_env_args"),
    "skirmish_v2": ("envs.skirmish.v2.SkirmishV2Env", "envs.skirmish.args.validate_v2_env_args"),
    "sc2": ("envs.sc2_env.StarCraft2Env", "envs.sc2_env.validate_env_args"),
    "sc2v2": ("envs.smacv2_env.SMACv2Env", "envs.smacv2_env.validate_env_args"),
    "gymma": ("envs.gymma_env.GymmaEnv", "envs.gymma_env.validate_env_args"),
    "vmas": ("envs.vmas_env.VMASEnv", "envs.vmas_env.validate_env_args"),
    "gfootball": ("envs.gfootball_env.GFootballEnv", "envs.gfootball_env.validate_env_args"),
}
REGISTRY = Registry("env", {env: _Lazy(make) for env, (make, _) in _ENVS.items()})
VALIDATORS = {env: _Lazy(check) for env, (_, check) in _ENVS.items()}


def batched(env, env_args, numpy_mpe=True):
    """A constructor of one env that steps many copies as one batch (num_envs=B; reset_batch,
    step_batch), which the vector runner builds instead of B instances, or None: VMAS always;
    MPE's simple_spread_v3 through its NumPy port (envs/mpe_batch.py, the same numbers as mpe2)
    unless numpy_mpe is False."""
    if env == "vmas":
        return REGISTRY["vmas"]
    if env in ("mpe", "pettingzoo") and numpy_mpe:
        from envs import mpe_batch

        if mpe_batch.applies(env_args):
            return mpe_batch.SimpleSpreadBatch
    return None


# Envs whose save_replay() writes something (skirmish: an animated GIF; sc2: an SC2 replay).
SAVES_REPLAYS = {"skirmish", "skirmish_v2", "sc2", "sc2v2"}


def validate_env_args(env, env_args):
    """Refuse bad env arguments before a run starts (no-op for envs without a validator)."""
    if env in VALIDATORS:
        VALIDATORS[env](env_args)


def step_fields_of(env):
    """The step fields (multiagentenv.STEP_FIELDS) env class `env` can record: all of them, or,
    where that depends on the task, the most it can (the built env says which in get_env_info)."""
    cls = REGISTRY[env].resolve()
    fields = cls.step_fields
    return tuple(fields) if isinstance(fields, (tuple, list)) else tuple(cls.possible_step_fields)


def step_fields_message(env, missing, have):
    """One line: a run needs step fields env `env` does not record."""
    why = "record_fields or the learner's settings (share_to, share_fallback)"
    return (
        f"{why} need the step field{'s' if len(missing) > 1 else ''} {', '.join(missing)}, which env "
        f"{env} does not record (it records: {', '.join(have) or 'none'})"
    )
