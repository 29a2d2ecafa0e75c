"""Command line -> merged, validated config.

Merge order (later wins): config/default.yaml <- config/envs/<env>.yaml <- config/algs/<alg>.yaml
<- `with key=value` overrides. Every problem raises ConfigError with one line that names the
bad value and the valid choices.
"""
import copy
import os
import sys

import yaml

from utils.errors import ConfigError
from utils.registry import unknown_name_message

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(ROOT, "config")
DEFAULT_ALG = "qmix"
DEFAULT_ENV = "mpe"
USAGE = ("usage: python src/main.py --config=<algorithm> --env-config=<environment> "
         "[with key=value ...]")
# env_args keys that take any value the environment accepts (checked by the env itself).
OPEN_SECTIONS = {"env_args"}


def available(kind):
    folder = os.path.join(CONFIG_DIR, kind)
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))


def load_yaml(path):
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise ConfigError(f"{os.path.relpath(path, ROOT)} is not valid YAML: "
                          f"{str(e).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{os.path.relpath(path, ROOT)} must hold a mapping of keys to values")
    return data


def load_named(kind, name, flag):
    if name not in available(kind):
        raise ConfigError(unknown_name_message(f"{flag} name", name, available(kind)))
    return load_yaml(os.path.join(CONFIG_DIR, kind, f"{name}.yaml"))


def recursive_update(base, new):
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            recursive_update(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


def parse_argv(argv):
    """-> (alg name, env name, [(dotted key, raw value), ...])."""
    alg, env, overrides = None, None, []
    i, in_with = 0, False
    while i < len(argv):
        arg = argv[i]
        if in_with:
            if "=" not in arg:
                raise ConfigError(f"override '{arg}' must look like key=value")
            key, value = arg.split("=", 1)
            overrides.append((key.strip(), value))
        elif arg == "with":
            in_with = True
        elif arg.startswith("--config") or arg.startswith("--env-config"):
            flag, _, value = arg.partition("=")
            if not value:
                if i + 1 >= len(argv):
                    raise ConfigError(f"{flag} needs a name. {USAGE}")
                i += 1
                value = argv[i]
            if flag == "--config":
                alg = value
            elif flag == "--env-config":
                env = value
            else:
                raise ConfigError(unknown_name_message("option", flag, ["--config", "--env-config"]))
        elif "=" in arg:  # Sacred-style without the 'with' keyword is a common slip
            raise ConfigError(f"put overrides after 'with': ... with {arg}")
        else:
            raise ConfigError(unknown_name_message("argument", arg, ["--config", "--env-config", "with"]))
        i += 1
    return alg or DEFAULT_ALG, env or DEFAULT_ENV, overrides


def parse_value(raw):
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str) and value in ("None", "none"):
        return None
    return value


def type_name(v):
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list",
            dict: "mapping"}.get(type(v), type(v).__name__)


def coerce(key, value, basis):
    """`value` converted to the type of `basis` (the default), or ConfigError."""
    if basis is None:
        return value
    if isinstance(basis, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(basis, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        number = _as_number(value)
        if number is not None and float(number).is_integer():
            return int(number)
    elif isinstance(basis, float):
        number = _as_number(value)
        if number is not None:
            return float(number)
    elif isinstance(basis, str):
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    elif isinstance(basis, list):
        if isinstance(value, list):
            return value
    elif isinstance(basis, dict):
        if isinstance(value, dict):
            return value
    raise ConfigError(f"{key}={value!r} has the wrong type: expected {type_name(basis)} "
                      f"(default {basis!r}), got {type_name(value)}")


def _as_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def apply_override(config, defaults, key, raw):
    parts = key.split(".")
    node, basis_node = config, defaults
    for depth, part in enumerate(parts[:-1]):
        if not isinstance(node.get(part), dict):
            raise ConfigError(unknown_name_message("config key", ".".join(parts[:depth + 1]),
                                                   _all_keys(config)))
        node = node[part]
        basis_node = basis_node.get(part) if isinstance(basis_node, dict) else None
    leaf = parts[-1]
    value = parse_value(raw)
    if leaf not in node:
        if parts[0] in OPEN_SECTIONS and len(parts) > 1:
            node[leaf] = value  # an env argument; the env checks it
            return
        raise ConfigError(unknown_name_message("config key", key, _all_keys(config)))
    # The type comes from default.yaml where it sets the key, else from the env/alg file.
    basis = basis_node[leaf] if isinstance(basis_node, dict) and leaf in basis_node else node[leaf]
    node[leaf] = coerce(key, value, basis)


def _all_keys(config, prefix=""):
    keys = []
    for k, v in config.items():
        keys.append(prefix + k)
        if isinstance(v, dict):
            keys.extend(_all_keys(v, prefix + k + "."))
    return keys


def load_config(argv):
    """Parse the command line and return the merged, validated config dict."""
    alg_name, env_name, overrides = parse_argv(argv)
    defaults = load_yaml(os.path.join(CONFIG_DIR, "default.yaml"))
    env_cfg = load_named("envs", env_name, "--env-config")
    alg_cfg = load_named("algs", alg_name, "--config")
    config = copy.deepcopy(defaults)
    for cfg in (env_cfg, alg_cfg):
        recursive_update(config, cfg)
    for key, raw in overrides:
        apply_override(config, defaults, key, raw)
    config["alg_config"] = alg_name
    config["env_config"] = env_name
    return validate(config)


def _check_choice(config, key, choices):
    value = config.get(key)
    if value not in choices:
        raise ConfigError(unknown_name_message(key, value, [c for c in choices if c is not None]))


def _check_min(config, key, minimum):
    if config[key] < minimum:
        raise ConfigError(f"{key}={config[key]!r} is too small: it must be at least {minimum}")


def validate(config):
    # Registries are imported here so that a bad name is refused before anything starts.
    from components.action_selectors import REGISTRY as sel_REGISTRY
    from controllers import REGISTRY as mac_REGISTRY
    from envs import REGISTRY as env_REGISTRY, validate_env_args
    from learners import REGISTRY as le_REGISTRY
    from modules.agents import REGISTRY as agent_REGISTRY
    from modules.critics import REGISTRY as critic_REGISTRY
    from modules.mixers import REGISTRY as mixer_REGISTRY
    from runners import REGISTRY as r_REGISTRY

    for key, registry in (("runner", r_REGISTRY), ("mac", mac_REGISTRY), ("agent", agent_REGISTRY),
                          ("learner", le_REGISTRY), ("action_selector", sel_REGISTRY),
                          ("env", env_REGISTRY), ("critic", critic_REGISTRY)):
        registry[config[key]]
    if config["mixer"] is not None:
        mixer_REGISTRY[config["mixer"]]
    _check_choice(config, "optimizer", ["adam", "rmsprop"])
    _check_choice(config, "target_update_mode", ["hard", "soft"])
    _check_choice(config, "device", ["auto", "cpu", "cuda"])
    _check_choice(config, "reward_scalarisation", ["sum", "mean"])
    _check_choice(config, "hypernet_layers", [1, 2])
    _check_choice(config, "actor_other_actions", ["buffer", "policy"])
    _check_choice(config, "continuous_actor", ["tanh", "softmax"])
    _check_choice(config, "exploration_mode", ["gaussian", "ornstein_uhlenbeck"])
    if not 0.0 < config["ou_theta"] <= 1.0:
        raise ConfigError(f"ou_theta={config['ou_theta']!r} must lie in (0, 1]")
    _check_min(config, "ou_sigma", 0)
    if config["ou_stop_episode"] is not None:
        _check_min(config, "ou_stop_episode", 0)
    from learners.selection import MODES
    _check_choice(config, "selected", list(MODES))
    for key in ("selected_ratio", "selected_ratio_start", "selected_ratio_end", "warm_up_ratio"):
        if not 0.0 <= config[key] <= 1.0:
            raise ConfigError(f"{key}={config[key]!r} must lie in [0, 1]")
    if config["selected_alpha"] <= 0 or config["selected_epsilon"] < 0:
        raise ConfigError(f"selected_alpha={config['selected_alpha']!r} must be positive and "
                          f"selected_epsilon={config['selected_epsilon']!r} not negative")
    for key, minimum in (("t_max", 0), ("batch_size", 1), ("buffer_size", 1), ("batch_size_run", 1),
                         ("test_nepisode", 1), ("test_interval", 1), ("log_interval", 1),
                         ("runner_log_interval", 1), ("learner_log_interval", 1),
                         ("target_update_interval", 1), ("hidden_dim", 1),
                         ("epsilon_anneal_time", 0), ("save_model_interval", 1), ("load_step", 0),
                         ("torch_threads", 0), ("transition_batch_size", 0), ("train_interval_steps", 0),
                         ("critic_hidden_dim", 1),
                         ("transformer_embed_dim", 1), ("transformer_n_head", 1),
                         ("transformer_n_layers", 1), ("transformer_token_dim", 1), ("start_steps", 0), ("act_noise_anneal_time", 0),
                         ("policy_ensemble", 1)):
        _check_min(config, key, minimum)
    from modules.agents.transformer_agent import head_count_error
    if message := head_count_error(config["transformer_embed_dim"], config["transformer_n_head"]):
        raise ConfigError(message)
    if config["transition_batch_size"] > 0:
        history = [f"{k}={config[k]!r}" for k, uses in (
            ("agent", config["agent"] != "mlp"), ("obs_last_action", config["obs_last_action"]),
            ("td_lambda", config["td_lambda"] > 0)) if uses]
        if history:  # single transitions carry no history: train on whole episodes instead
            print(f"note: {', '.join(history)} needs whole episodes; training on batch_size="
                  f"{config['batch_size']} episodes instead of transition_batch_size="
                  f"{config['transition_batch_size']} transitions", file=sys.stderr)
            config["transition_batch_size"] = 0
    if config["buffer_size"] < config["batch_size"]:
        raise ConfigError(f"buffer_size={config['buffer_size']} must be at least "
                          f"batch_size={config['batch_size']}")
    if not 0.0 <= config["td_lambda"] <= 1.0:
        raise ConfigError(f"td_lambda={config['td_lambda']!r} must lie in [0, 1]")
    if config["gumbel_temperature"] <= 0:
        raise ConfigError(f"gumbel_temperature={config['gumbel_temperature']!r} must be positive")
    if config["critic_lr"] is not None and not isinstance(config["critic_lr"], (int, float)):
        raise ConfigError(f"critic_lr={config['critic_lr']!r} must be a number or None")
    if not 0.0 <= config["tau"] <= 1.0:
        raise ConfigError(f"tau={config['tau']!r} must lie in [0, 1]")
    if config["runner"] == "episode" and config["batch_size_run"] != 1:
        raise ConfigError(f"runner=episode steps one env, but batch_size_run="
                          f"{config['batch_size_run']}; use runner=parallel or batch_size_run=1")
    if config["learner"] == "q_divide_learner" and config["mixer"] is None:
        raise ConfigError("learner=q_divide_learner decomposes the mixer's team TD error and needs "
                          "mixer=qmix or mixer=vdn (got mixer=None)")
    if config["mixer"] is not None and not config["common_reward"]:
        raise ConfigError(f"mixer={config['mixer']} mixes agents' values into one team value and "
                          "needs common_reward=True; use mixer=None (IQL) for individual rewards")
    if config["learner"] == "maddpg_learner" and config["mac"] != "maddpg_mac":
        raise ConfigError(f"learner=maddpg_learner needs mac=maddpg_mac (its actors), not "
                          f"mac={config['mac']}")
    if config["mac"] == "maddpg_mac" and config["learner"] != "maddpg_learner":
        raise ConfigError(f"mac=maddpg_mac outputs policies for learner=maddpg_learner, not "
                          f"learner={config['learner']}; use mac=basic_mac")
    if config["policy_ensemble"] > 1 and config["mac"] != "maddpg_mac":
        raise ConfigError(f"policy_ensemble={config['policy_ensemble']} draws among MADDPG actors "
                          f"and needs mac=maddpg_mac, not mac={config['mac']}; use policy_ensemble=1")
    if config["learner"] == "maddpg_learner" and config["mixer"] is not None:
        raise ConfigError(f"learner=maddpg_learner uses critics, not a mixer; set mixer=None "
                          f"(got mixer={config['mixer']})")
    if config["learner"] in ("q_learner", "q_divide_learner") \
            and config["env_args"].get("continuous_actions"):
        raise ConfigError(f"learner={config['learner']} picks among discrete actions; "
                          "env_args.continuous_actions=True needs a continuous-action learner")
    if config["evaluate"] and not config["checkpoint_path"]:
        raise ConfigError("evaluate=True needs checkpoint_path=<folder of saved models>")
    if config["checkpoint_path"] and not os.path.isdir(config["checkpoint_path"]):
        raise ConfigError(f"checkpoint_path={config['checkpoint_path']!r} is not a folder")

    # The env gets the run-level reward settings; its own arguments are checked by the env.
    config["env_args"]["common_reward"] = config["common_reward"]
    config["env_args"]["reward_scalarisation"] = config["reward_scalarisation"]
    validate_env_args(config["env"], config["env_args"])

    # Test episodes come in whole runner batches.
    n = config["batch_size_run"]
    config["test_nepisode"] = max(n, (config["test_nepisode"] // n) * n)
    return config
