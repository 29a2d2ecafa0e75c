"""Skirmish's constructor arguments: SMAC's own, the simulator's, and their validation."""

from envs.skirmish.maps import MAPS
from utils.errors import ConfigError
from utils.registry import unknown_name_message
from utils.values import coerce

SMAC_DEFAULTS = dict(
    map_name="8m",
    step_mul=8,
    move_amount=2,
    difficulty="7",
    game_version=None,
    seed=None,
    continuing_episode=False,
    obs_all_health=True,
    obs_own_health=True,
    obs_last_action=False,
    obs_pathing_grid=False,
    obs_terrain_height=False,
    obs_instead_of_state=False,
    obs_timestep_number=False,
    state_last_action=True,
    state_timestep_number=False,
    reward_sparse=False,
    reward_only_positive=True,
    reward_death_value=10,
    reward_win=200,
    reward_defeat=0,
    reward_negative_scale=0.5,
    reward_scale=True,
    reward_scale_rate=20,
    replay_dir="",
    replay_prefix="",
    window_size_x=1920,
    window_size_y=1200,
    heuristic_ai=False,
    heuristic_rest=False,
    debug=False,
)
# simulator options beyond SMAC's signature
# attack_jitter: SC2's random cooldown variation (False: deterministic);
# builtin_agents: the agents play SC2's default unit behaviour too, mirroring the enemies' order
# (mirror matches and calibration; the actions passed to step are then ignored)
# obs_starcraft: False observes only the time step (SMACv2's switch for open-loop policies; needs
# obs_timestep_number=True)
SIM_DEFAULTS = dict(attack_jitter=True, builtin_agents=False, obs_starcraft=True)
DIFFICULTIES = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "A"]  # SMAC's (stored only here)
WRAPPER_KEYS = {"common_reward", "reward_scalarisation"}


def validate_env_args(env_args):
    name = env_args.get("map_name", SMAC_DEFAULTS["map_name"])
    if name not in MAPS:
        raise ConfigError(
            unknown_name_message("env_args.map_name", name, sorted(MAPS), where="config/envs/skirmish.yaml")
        )
    for k in env_args:
        if k not in SMAC_DEFAULTS and k not in SIM_DEFAULTS and k not in WRAPPER_KEYS:
            raise ConfigError(
                unknown_name_message(
                    "env_args key for skirmish", k, sorted({**SMAC_DEFAULTS, **SIM_DEFAULTS})
                )
            )
    if not env_args.get("obs_starcraft", True) and not env_args.get("obs_timestep_number", False):
        raise ConfigError(
            "env_args.obs_starcraft=False leaves only the time step: set obs_timestep_number=True"
        )
    step_mul = env_args.get("step_mul", SMAC_DEFAULTS["step_mul"])
    if isinstance(step_mul, bool) or not isinstance(step_mul, int) or step_mul < 1:
        raise ConfigError(f"env_args.step_mul={step_mul!r} must be a positive integer (game loops per step)")
    for k in SIM_DEFAULTS:
        if k in env_args and (not isinstance(env_args[k], (bool, int)) or env_args[k] not in (0, 1)):
            raise ConfigError(f"env_args.{k}={env_args[k]!r} must be True or False")
    # the rest take the type of SMAC's default (numbers: int or float), and some a range
    for k, default in SMAC_DEFAULTS.items():
        if k not in env_args or default is None or k == "step_mul":
            continue
        basis = default if isinstance(default, (bool, str)) else 0.0
        coerce(f"env_args.{k}", env_args[k], basis)
    for k, low in (("move_amount", 0), ("reward_scale_rate", 0), ("window_size_x", 0), ("window_size_y", 0)):
        if k in env_args and not float(env_args[k]) > low:
            raise ConfigError(f"env_args.{k}={env_args[k]!r} must be positive")
    if float(env_args.get("reward_negative_scale", 0.5)) < 0:
        raise ConfigError(
            f"env_args.reward_negative_scale={env_args['reward_negative_scale']!r} must not be negative"
        )
    if str(env_args.get("difficulty", "7")) not in DIFFICULTIES:
        raise ConfigError(unknown_name_message("env_args.difficulty", env_args["difficulty"], DIFFICULTIES))
    seed = env_args.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ConfigError(f"env_args.seed={seed!r} must be a non-negative integer or null")
    if not env_args.get("common_reward", True):
        raise ConfigError("skirmish gives one team reward (as SMAC does): set common_reward=True")
