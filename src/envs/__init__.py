"""Environments by name. Constructors import their simulators lazily."""

from utils.registry import Registry


def _pettingzoo(**env_args):
    from envs.pettingzoo_env import PettingZooEnv

    return PettingZooEnv(**env_args)


def _validate_pettingzoo(env_args):
    from envs.pettingzoo_env import validate_env_args

    validate_env_args(env_args)


def _skirmish(**env_args):
    from envs.skirmish.env import SkirmishEnv

    return SkirmishEnv(**env_args)


def _validate_skirmish(env_args):
    from envs.skirmish.env import validate_env_args

    validate_env_args(env_args)


def _skirmish_v2(**env_args):
    from envs.skirmish.v2 import SkirmishV2Env

    return SkirmishV2Env(**env_args)


def _validate_skirmish_v2(env_args):
    from envs.skirmish.v2 import validate_env_args

    validate_env_args(env_args)


def _gymma(**env_args):
    from envs.gymma_env import GymmaEnv

    return GymmaEnv(**env_args)


def _validate_gymma(env_args):
    from envs.gymma_env import validate_env_args

    validate_env_args(env_args)


def _vmas(**env_args):
    from envs.vmas_env import VMASEnv

    return VMASEnv(**env_args)


def _validate_vmas(env_args):
    from envs.vmas_env import validate_env_args

    validate_env_args(env_args)


def _sc2(**env_args):
    from envs.sc2_env import StarCraft2Env

    return StarCraft2Env(**env_args)


def _validate_sc2(env_args):
    from envs.sc2_env import validate_env_args

    validate_env_args(env_args)


def _sc2v2(**env_args):
    from envs.smacv2_env import SMACv2Env

    return SMACv2Env(**env_args)


def _validate_sc2v2(env_args):
    from envs.smacv2_env import validate_env_args

    validate_env_args(env_args)


REGISTRY = Registry(
    "env",
    {
        "mpe": _pettingzoo,
        "pettingzoo": _pettingzoo,
        "skirmish": _skirmish,
        "skirmish_v2": _skirmish_v2,
        "sc2": _sc2,
        "sc2v2": _sc2v2,
        "gymma": _gymma,
        "vmas": _vmas,
    },
)
VALIDATORS = {
    "mpe": _validate_pettingzoo,
    "pettingzoo": _validate_pettingzoo,
    "skirmish": _validate_skirmish,
    "skirmish_v2": _validate_skirmish_v2,
    "sc2": _validate_sc2,
    "sc2v2": _validate_sc2v2,
    "gymma": _validate_gymma,
    "vmas": _validate_vmas,
}


def batched(env, env_args, numpy_mpe=True):
    """A constructor of one env that steps many copies as one batch (num_envs=B; reset_batch,
    step_batch), which the vector runner builds instead of B instances, or None: VMAS always;
    MPE's simple_spread_v3 through its NumPy port (envs/mpe_batch.py, the same numbers as mpe2)
    unless numpy_mpe is False."""
    if env == "vmas":
        return _vmas
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
