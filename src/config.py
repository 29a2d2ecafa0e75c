"""Command line -> merged, validated config.

Merge order (later wins): config/default.yaml <- config/envs/<env>.yaml <- config/algs/<alg>.yaml
<- `with key=value` overrides. Every problem raises ConfigError with one line that names the
bad value and the valid choices.
"""

import copy
import importlib.util
import json
import math
import operator
import os
import re
import sys

import yaml

from utils.errors import ConfigError, first_line
from utils.registry import unknown_name_message
from utils.values import coerce, type_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(ROOT, "config")
DEFAULT_ALG = "qmix"
DEFAULT_ENV = "mpe"
USAGE = "usage: python src/main.py --config=<algorithm> --env-config=<environment> [with key=value ...]"
# env_args keys that take any value the environment accepts (checked by the env itself).
OPEN_SECTIONS = {"env_args", "team_checkpoints"}


def available(kind):
    folder = os.path.join(CONFIG_DIR, kind)
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))


def yaml_error(path, e):
    """One line naming the file, the line and what is wrong."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    what = getattr(e, "problem", None) or first_line(e)
    return f"{path} is not valid YAML{where}: {what}"


def load_yaml(path):
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise ConfigError(yaml_error(os.path.relpath(path, ROOT), e)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{os.path.relpath(path, ROOT)} must hold a mapping of keys to values")
    return data


def config_path(kind, name, flag):
    """The YAML file --config / --env-config names: one in config/<kind>/, or a path to a file."""
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        if not os.path.isfile(name):
            stem = os.path.splitext(os.path.basename(name))[0]
            hint = (
                f"; did you mean {flag}={stem} (config/{kind}/{stem}.yaml)?"
                if stem in available(kind)
                else ""
            )
            raise ConfigError(f"{flag}={name}: no such file{hint}")
        return os.path.abspath(name)
    if name not in available(kind):
        raise ConfigError(unknown_name_message(f"{flag} name", name, available(kind), f"config/{kind}/"))
    return os.path.join(CONFIG_DIR, kind, f"{name}.yaml")


def load_named(kind, name, flag):
    return load_yaml(config_path(kind, name, flag))


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
        elif arg.startswith("--"):
            flag, _, value = arg.partition("=")
            if flag not in ("--config", "--env-config"):
                raise ConfigError(unknown_name_message("option", flag, ["--config", "--env-config"]))
            if not value:
                if i + 1 >= len(argv):
                    raise ConfigError(f"{flag} needs a name. {USAGE}")
                i += 1
                value = argv[i]
            if flag == "--config":
                alg = value
            else:
                env = value
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


def set_key(config, defaults, key, value):
    """Set a dotted key to a value, converted to the type of its default; an unknown key, or a
    value of the wrong type, is refused."""
    parts = key.split(".")
    node, basis_node = config, defaults
    for depth, part in enumerate(parts[:-1]):
        if not isinstance(node.get(part), dict):
            prefix = ".".join(parts[: depth + 1])
            if part in node:
                raise ConfigError(
                    f"config key '{key}': {prefix} is a value ({node[part]!r}), not a "
                    f"section of keys; set it with {prefix}=<value>"
                )
            raise ConfigError(unknown_key_message(prefix, _all_keys(config)))
        node = node[part]
        basis_node = basis_node.get(part) if isinstance(basis_node, dict) else None
    leaf = parts[-1]
    if leaf not in node:
        if parts[0] in OPEN_SECTIONS and len(parts) > 1:
            node[leaf] = value  # an env argument; the env checks it
            return
        raise ConfigError(unknown_key_message(key, _all_keys(config)))
    # The type comes from default.yaml where it sets the key, else from the env/alg file.
    basis = basis_node[leaf] if isinstance(basis_node, dict) and leaf in basis_node else node[leaf]
    if value is None and isinstance(basis, str):  # none names a choice (value_norm=none), not null
        value = "none"
    node[leaf] = coerce(key, value, basis)


def merge_file(config, defaults, data, path):
    """Merge one env or algorithm YAML file into config, every key checked as a `with` override
    is; keys of PyMARL, EPyMARL, PyMARL2 and PyMARL3 are read as ours (peer_keys.py), each with a
    note. Problems name the file."""
    from peer_keys import translate

    where = os.path.relpath(path, ROOT) if path.startswith(ROOT) else path
    data, notes, refused = translate(data, set(defaults), context=config)
    if refused:
        raise ConfigError(f"{where}: {next(iter(refused.values()))}")
    for note in notes:
        print(f"note: {where}: {note}", file=sys.stderr)
    for key, value in data.items():
        try:
            if key in OPEN_SECTIONS:
                if not isinstance(value, dict):
                    raise ConfigError(f"{key} must be a mapping of keys to values, got {value!r}")
                recursive_update(config[key], value)
            else:
                set_key(config, defaults, key, value)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None


def translate_overrides(overrides, defaults):
    """[(key, raw)] -> [(key, value)], `with` keys of the PyMARL family (rnn_hidden_dim=128) read
    as ours, each with a note."""
    from peer_keys import RENAMED, translate

    out = []
    for key, raw in overrides:
        value = parse_value(raw)
        if key not in RENAMED:
            out.append((key, value))
            continue
        data, notes, refused = translate({key: value}, set(defaults))
        if refused:
            raise ConfigError(next(iter(refused.values())))
        for note in notes:
            print(f"note: with {key}={raw}: {note}", file=sys.stderr)
        out += list(data.items())
    return out


def unknown_key_message(key, keys):
    from utils.registry import closest_few

    guesses = closest_few(key, keys)
    hint = f"did you mean {', '.join(guesses)}? " if guesses else ""
    return f"unknown config key '{key}'; {hint}(config/default.yaml lists every key)"


def _all_keys(config, prefix=""):
    keys = []
    for k, v in config.items():
        keys.append(prefix + k)
        if isinstance(v, dict):
            keys.extend(_all_keys(v, prefix + k + "."))
    return keys


def load_defaults():
    """default.yaml: every key with its default."""
    return load_yaml(os.path.join(CONFIG_DIR, "default.yaml"))


def section_keys(sections):
    """The top-level keys of default.yaml under the given `# --- <section> ---` headings."""
    keys, current = [], None
    with open(os.path.join(CONFIG_DIR, "default.yaml")) as f:
        for line in f:
            heading = re.match(r"# --- (.+) ---\s*$", line)
            if heading:
                current = heading.group(1)
            elif current in sections and re.match(r"\w+:", line):
                keys.append(line.split(":", 1)[0])
    return keys


def load_config(argv):
    """Parse the command line and return the merged, validated config dict."""
    alg_name, env_name, overrides = parse_argv(argv)
    defaults = load_defaults()
    env_path = config_path("envs", env_name, "--env-config")
    alg_path = config_path("algs", alg_name, "--config")
    env_cfg, alg_cfg = load_yaml(env_path), load_yaml(alg_path)
    config = copy.deepcopy(defaults)
    for cfg, path in ((env_cfg, env_path), (alg_cfg, alg_path)):
        merge_file(config, defaults, cfg, path)
    overrides = translate_overrides(overrides, defaults)
    if env_cfg.get("runner") == "vector" and alg_cfg.get("runner") == "parallel":
        # an env that batches its copies natively (VMAS) keeps its one-process runner over an
        # algorithm's worker processes; runner=parallel on the command line still wins
        config["runner"] = "vector"
        if not any(key == "runner" for key, _ in overrides):
            print(
                f"note: --env-config={env_name} steps its envs as one batch: runner=vector instead of "
                f"{alg_name}.yaml's runner=parallel (all copies in one process)",
                file=sys.stderr,
            )
    for key, value in overrides:
        set_key(config, defaults, key, value)
    config["alg_config"] = alg_name
    config["env_config"] = env_name
    return validate(config, defaults)


class KeySpec:
    """The type and range (or choices) declared in braces at the start of a key's comment in
    default.yaml: `{int >= 1}`, `{float in (0, 1]}`, `{float > 0 or null}`, `{one of: hard, soft}`."""

    PATTERN = re.compile(
        r"(int|float)(?:\s*(>=|>|<=|<)\s*(\S+)|\s+in\s*([\[(])\s*([^,]+),\s*"
        r"([^\])]+?)\s*([\])]))?"
    )

    def __init__(self, text):
        self.text = text.strip()
        body = self.text
        self.nullable = body.endswith(" or null")
        if self.nullable:
            body = body[: -len(" or null")].strip()
        self.kind, self.choices, self.bounds = None, None, []
        if body.startswith("one of:"):
            self.choices = [yaml.safe_load(c.strip()) for c in body[len("one of:") :].split(",")]
            return
        m = self.PATTERN.fullmatch(body)
        if m is None:
            raise ValueError(f"cannot read the key spec {{{text}}}")
        self.kind = m.group(1)
        if m.group(2):
            self.bounds = [(m.group(2), float(m.group(3)))]
        elif m.group(4):
            self.bounds = [
                (">=" if m.group(4) == "[" else ">", float(m.group(5))),
                ("<=" if m.group(7) == "]" else "<", float(m.group(6))),
            ]

    def check(self, key, value, default):
        """-> the value, converted to the declared type; ConfigError if it is not allowed."""
        if value is None and self.nullable:
            return None
        if self.choices is not None:
            if value not in self.choices:
                raise ConfigError(unknown_name_message(key, value, self.choices))
            return value
        basis = 0 if self.kind == "int" else 0.0
        try:
            value = coerce(key, value, basis)
        except ConfigError:
            raise ConfigError(
                f"{key}={value!r} has the wrong type: expected {self.text} "
                f"(default {default!r}), got {type_name(value)}"
            ) from None
        if math.isnan(value) or not all(COMPARE[op](value, bound) for op, bound in self.bounds):
            raise ConfigError(f"{key}={value!r} is out of range: expected {self.text} (default {default!r})")
        return value


COMPARE = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
SPEC_LINE = re.compile(r"^(\w+):[^#]*#\s*\{([^}]*)\}")


def key_specs(path=None):
    """{key: KeySpec} for every key of default.yaml whose comment declares one."""
    path = path or os.path.join(CONFIG_DIR, "default.yaml")
    specs = {}
    with open(path) as f:
        for line in f:
            m = SPEC_LINE.match(line)
            if m:
                specs[m.group(1)] = KeySpec(m.group(2))
    return specs


def take_checkpoint_seed(config, folder):
    """Going on with a run and no seed given: the run's own seeds, not a drawn one, which would
    make the resumed run another run's continuation (and its resume not exact)."""
    with open(os.path.join(folder, "meta.json")) as f:
        saved = json.load(f).get("config") or {}
    if isinstance(saved.get("seed"), int):
        config["seed"] = saved["seed"]
        env_seed = (saved.get("env_args") or {}).get("seed")
        if config["env_args"].get("seed") is None and isinstance(env_seed, int):
            config["env_args"]["seed"] = env_seed


def seed_env(config):
    """env_args.seed takes the run seed where it is not set (parallel workers add their index)."""
    if config["env_args"].get("seed") is None:
        config["env_args"]["seed"] = config["seed"]


def project_path(path):
    """A relative path is taken from the project root, wherever the command runs."""
    return path if os.path.isabs(path) else os.path.join(ROOT, path)


def results_base(config):
    return project_path(config["local_results_path"])


def check_results_path(config):
    """Refuse a results folder that is a file or cannot be written, before anything starts."""
    import tempfile

    base = results_base(config)
    probe = base
    while not os.path.exists(probe):  # the nearest existing folder is where writing starts
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        where = "is a file" if probe == base else f"lies under a file ({probe})"
        raise ConfigError(f"local_results_path={config['local_results_path']!r} {where}; give a folder")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        raise ConfigError(
            f"local_results_path={config['local_results_path']!r} cannot be written ({probe}: {e.strerror})"
        ) from None


def check_capabilities(config, learners, macs, mixers):
    """The chosen components against what each declares it supports and needs (learners/base.py,
    controllers), then the learner's own checks."""
    name = config["learner"]
    learner, mac = learners[name], macs[config["mac"]]
    if learner.mixer == "required" and config["mixer"] is None:
        raise ConfigError(
            f"learner={name} needs a mixer ({' or '.join(f'mixer={m}' for m in sorted(mixers))}), "
            "got mixer=None"
        )
    if learner.mixer == "none" and config["mixer"] is not None:
        raise ConfigError(f"learner={name} uses no mixer; set mixer=None (got mixer={config['mixer']})")
    if config["mixer"] is not None and not config["common_reward"]:
        raise ConfigError(
            f"mixer={config['mixer']} mixes agents' values into one team value and "
            "needs common_reward=True; use mixer=None (IQL) for individual rewards"
        )
    if config["mac"] not in learner.macs:
        raise ConfigError(f"learner={name} trains mac={' or '.join(learner.macs)}, not mac={config['mac']}")
    if config["policy_ensemble"] > 1 and not mac.policy_ensembles:
        able = [m for m, c in sorted(macs.items()) if c.policy_ensembles]
        raise ConfigError(
            f"policy_ensemble={config['policy_ensemble']} needs a controller with "
            f"policy ensembles (mac={' or '.join(able)}), not mac={config['mac']}; "
            "use policy_ensemble=1"
        )
    if config["env_args"].get("continuous_actions") and "continuous" not in learner.action_spaces:
        raise ConfigError(
            f"learner={name} learns {' and '.join(learner.action_spaces)} actions; "
            "env_args.continuous_actions=True needs a continuous-action learner"
        )
    learner.validate(config)
    check_step_fields(config, learner)


def check_step_fields(config, learner):
    """record_fields names step fields that exist, and the env records every one the run needs
    (where the env's class says so; gymma and mpe say it once built, see assembly.py)."""
    from envs import step_fields_message, step_fields_of
    from envs.multiagentenv import STEP_FIELDS

    asked = config["record_fields"]
    for name in asked:
        if name not in STEP_FIELDS:
            raise ConfigError(unknown_name_message("record_fields", name, list(STEP_FIELDS)))
    wanted = set(asked) | learner.batch_fields(config)
    have = step_fields_of(config["env"]) if wanted else None
    missing = [name for name in STEP_FIELDS if name in wanted and name not in have]
    if missing:
        raise ConfigError(step_fields_message(config["env"], missing, list(have)))


def validate(config, defaults=None):
    # Registries are imported here so that a bad name is refused before anything starts.
    from components.action_selectors import REGISTRY as sel_REGISTRY
    from controllers import REGISTRY as mac_REGISTRY
    from envs import REGISTRY as env_REGISTRY
    from envs import validate_env_args
    from learners import REGISTRY as le_REGISTRY
    from modules.agents import REGISTRY as agent_REGISTRY
    from modules.critics import REGISTRY as critic_REGISTRY
    from modules.mixers import REGISTRY as mixer_REGISTRY
    from runners import REGISTRY as r_REGISTRY

    for key, registry in (
        ("runner", r_REGISTRY),
        ("mac", mac_REGISTRY),
        ("agent", agent_REGISTRY),
        ("learner", le_REGISTRY),
        ("action_selector", sel_REGISTRY),
        ("env", env_REGISTRY),
        ("critic", critic_REGISTRY),
    ):
        registry[config[key]]
    if config["mixer"] is not None:
        mixer_REGISTRY[config["mixer"]]
    defaults = defaults if defaults is not None else load_defaults()
    for key, spec in key_specs().items():
        if key in config:
            config[key] = spec.check(key, config[key], defaults.get(key))
    if config.get("use_wandb") and importlib.util.find_spec("wandb") is None:
        raise ConfigError("use_wandb=True needs the wandb package: pip install wandb")
    from modules.agents.transformer_agent import head_count_error

    if message := head_count_error(config["transformer_embed_dim"], config["transformer_n_head"]):
        raise ConfigError(message)
    if config["transition_batch_size"] > 0:
        history = [
            f"{k}={config[k]!r}"
            for k, uses in (
                ("agent", config["agent"] != "mlp"),
                ("obs_last_action", config["obs_last_action"]),
                ("td_lambda", config["td_lambda"] > 0),
            )
            if uses
        ]
        if history:  # single transitions carry no history: train on whole episodes instead
            print(
                f"note: {', '.join(history)} needs whole episodes; training on batch_size="
                f"{config['batch_size']} episodes instead of transition_batch_size="
                f"{config['transition_batch_size']} transitions",
                file=sys.stderr,
            )
            config["transition_batch_size"] = 0
    # on-policy learners train on the episodes just played and allocate no buffer
    if not le_REGISTRY[config["learner"]].on_policy and config["buffer_size"] < config["batch_size"]:
        raise ConfigError(
            f"buffer_size={config['buffer_size']} must be at least batch_size={config['batch_size']}"
        )
    if config["runner"] == "episode" and config["batch_size_run"] != 1:
        raise ConfigError(
            f"runner=episode steps one env, but batch_size_run="
            f"{config['batch_size_run']}; use runner=parallel or vector, or batch_size_run=1"
        )
    if config["env_workers"] is not None and config["env_workers"] > config["batch_size_run"]:
        raise ConfigError(
            f"env_workers={config['env_workers']} is more processes than envs "
            f"(batch_size_run={config['batch_size_run']}); use at most {config['batch_size_run']}, or null"
        )
    check_capabilities(config, le_REGISTRY, mac_REGISTRY, mixer_REGISTRY)
    if config["evaluate"] and not config["checkpoint_path"] and not config["team_checkpoints"]:
        raise ConfigError(
            "evaluate=True needs checkpoint_path=<folder of saved models> "
            "(or, for cross-play, team_checkpoints.<team>=<folder> for every team)"
        )
    if config["team_checkpoints"]:
        if not config["evaluate"]:
            raise ConfigError(
                "team_checkpoints (cross-play) needs evaluate=True: it evaluates, it does not train"
            )
        from utils.checkpoint import check_checkpoint

        for team, folder in config["team_checkpoints"].items():
            if not isinstance(folder, str) or not os.path.isdir(folder):
                raise ConfigError(f"team_checkpoints.{team}={folder!r} is not a folder")
            check_checkpoint(folder, config["load_step"])
    if config["checkpoint_path"]:
        if not os.path.isdir(config["checkpoint_path"]):
            raise ConfigError(f"checkpoint_path={config['checkpoint_path']!r} is not a folder")
        from utils.checkpoint import check_checkpoint

        folder = check_checkpoint(config["checkpoint_path"], config["load_step"])
        if config["seed"] is None and not config["evaluate"]:
            take_checkpoint_seed(config, folder)
    if config["save_replay"]:
        from envs import SAVES_REPLAYS

        if config["env"] not in SAVES_REPLAYS:
            raise ConfigError(
                f"save_replay=True: env {config['env']!r} cannot save replays "
                f"(envs that can: {', '.join(sorted(SAVES_REPLAYS))})"
            )
        if not config["evaluate"]:
            raise ConfigError(
                "save_replay=True saves a replay of the evaluation episodes and "
                "needs evaluate=True (and checkpoint_path)"
            )
    check_results_path(config)

    # The env gets the run-level reward settings; its own arguments are checked by the env.
    config["env_args"]["common_reward"] = config["common_reward"]
    config["env_args"]["reward_scalarisation"] = config["reward_scalarisation"]
    validate_env_args(config["env"], config["env_args"])

    # Test episodes come in whole runner batches.
    n = config["batch_size_run"]
    config["test_nepisode"] = max(n, (config["test_nepisode"] // n) * n)
    return config
