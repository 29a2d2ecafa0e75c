"""Command line -> merged, validated config.

Merge order (later wins): config/default.yaml <- config/envs/<env>.yaml <- config/algs/<alg>.yaml
<- `with key=value` overrides. Every problem raises ConfigError with one line that names the
bad value and the valid choices.
"""

import copy
import json
import os
import sys

import yaml

from config_keys import CONFIG_DIR, ROOT, key_specs, load_defaults, load_yaml, section_keys, yaml_error
from utils.errors import ConfigError
from utils.keys import DERIVED_KEYS, current_names
from utils.registry import unknown_name_message
from utils.values import coerce
from validation import project_path, results_base, validate

# what other modules take from here
__all__ = ["CONFIG_DIR", "ROOT", "load_yaml", "project_path", "results_base", "section_keys", "yaml_error"]

DEFAULT_ALG = "qmix"
DEFAULT_ENV = "mpe"
USAGE = "usage: python src/main.py --config=<algorithm> --env-config=<environment> [with key=value ...]"
# env_args keys that take any value the environment accepts (checked by the env itself).
OPEN_SECTIONS = {"env_args", "team_checkpoints"}


def available(kind):
    folder = os.path.join(CONFIG_DIR, kind)
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))


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
        from peer_keys import CONFIG_NAMES

        ours = CONFIG_NAMES[kind].get(name)
        if ours is None:
            raise ConfigError(unknown_name_message(f"{flag} name", name, available(kind), f"config/{kind}/"))
        print(f"note: {flag}={name} -> {flag}={ours} ({CONFIG_NAMES['whose'][name]})", file=sys.stderr)
        name = ours
    return os.path.join(CONFIG_DIR, kind, f"{name}.yaml")


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
    return alg, env, overrides  # None where the command line names none


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
    # The type comes from the key's default where it has one, else from the env/alg file.
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
    show_notes(where, notes, shipped=path.startswith(CONFIG_DIR + os.sep))
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


EXPLAIN_SHIPPED = False  # this file's command line lists a shipped file's notes one by one


def show_notes(where, notes, shipped):
    """A note per peer key read as ours; one line for a file of this project (its keys were
    checked when it was written), whose notes `python src/config.py --config=NAME` lists."""
    if shipped and len(notes) > 1 and not EXPLAIN_SHIPPED:
        name = os.path.splitext(os.path.basename(where))[0]
        flag = "--env-config" if os.path.basename(os.path.dirname(where)) == "envs" else "--config"
        print(
            f"note: {where} keeps its authors' key names: {len(notes)} read as ours "
            f"(`python src/config.py {flag}={name}` lists them)",
            file=sys.stderr,
        )
        return
    for note in notes:
        print(f"note: {where}: {note}", file=sys.stderr)


def translate_overrides(overrides, defaults):
    """[(key, raw)] -> [(key, value)], `with` keys and registry names of the PyMARL family
    (rnn_hidden_dim=128, agent=n_rnn) read as ours, each with a note."""
    from peer_keys import RENAMED, VALUE_NAMES, translate

    out = []
    for key, raw in overrides:
        value = parse_value(raw)
        if key not in RENAMED and not (isinstance(value, str) and value in VALUE_NAMES.get(key, {})):
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
    return f"unknown config key '{key}'; {hint}(docs/configuration.md lists every key)"


def _all_keys(config, prefix=""):
    keys = []
    for k, v in config.items():
        keys.append(prefix + k)
        if isinstance(v, dict):
            keys.extend(_all_keys(v, prefix + k + "."))
    return keys


def load_config(argv):
    """Parse the command line and return the merged, validated config dict. With checkpoint_path,
    the checkpoint's own settings are the base (resumed_config)."""
    alg_name, env_name, overrides = parse_argv(argv)
    defaults = load_defaults()
    overrides = translate_overrides(overrides, defaults)
    saved = checkpoint_settings(overrides)
    if saved is not None:
        config = resumed_config(*saved, alg_name, env_name, overrides, defaults)
        return validate(complete(config, defaults), defaults)
    alg_name, env_name = alg_name or DEFAULT_ALG, env_name or DEFAULT_ENV
    env_path = config_path("envs", env_name, "--env-config")
    alg_path = config_path("algs", alg_name, "--config")
    env_cfg, alg_cfg = load_yaml(env_path), load_yaml(alg_path)
    config = copy.deepcopy(defaults)
    for cfg, path in ((env_cfg, env_path), (alg_cfg, alg_path)):
        merge_file(config, defaults, cfg, path)
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
    return validate(complete(config, defaults), defaults)


def complete(config, defaults):
    """The changes a merged config gets before it is validated: values converted to their declared
    types, what a setting implies for another (said in a note), the run's own seed when it goes on
    from a checkpoint, the env's reward settings, test episodes in whole runner batches. -> config."""
    for key, spec in key_specs().items():
        if key in config:
            config[key] = spec.check(key, config[key], defaults.get(key))
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
    path = config["checkpoint_path"]
    if path and os.path.isdir(path) and config["seed"] is None and not config["evaluate"]:
        from utils.checkpoint import check_checkpoint

        take_checkpoint_seed(config, check_checkpoint(path, config["load_step"]))
    # The env gets the run-level reward settings.
    config["env_args"]["common_reward"] = config["common_reward"]
    config["env_args"]["reward_scalarisation"] = config["reward_scalarisation"]
    # Test episodes come in whole runner batches.
    n = config["batch_size_run"]
    config["test_nepisode"] = max(n, (config["test_nepisode"] // n) * n)
    return config


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


# What a run going on from a checkpoint (or evaluating it) does not take from the checkpoint: what
# says which checkpoint and what to do with it, and the machine it runs on.
NOT_INHERITED = {
    "checkpoint_path", "load_step", "evaluate", "team_checkpoints", "resume_override", "device",
    "torch_threads", "env_workers",
}  # fmt: skip
# What an evaluation may change besides (config_changes' RESUMABLE): it trains nothing, so how many
# episodes it plays, on which env seeds and in which runner is its own.
EVALUATION_FREE = {
    "test_nepisode", "batch_size_run", "runner", "seed", "env_args.seed", "save_replay",
    "env_args.replay_dir",
}  # fmt: skip


def checkpoint_settings(overrides):
    """-> (step folder, its saved config) where the command line goes on from or evaluates a
    checkpoint that kept its config, else None (no checkpoint_path, cross-play, or a checkpoint
    saved before configs were kept, which is read as the command line says)."""
    given = dict(overrides)
    path = given.get("checkpoint_path")
    if not path or "team_checkpoints" in given or any(k.startswith("team_checkpoints.") for k in given):
        return None
    if not isinstance(path, str) or not os.path.isdir(path):
        raise ConfigError(f"checkpoint_path={path!r} is not a folder")
    from utils.checkpoint import check_checkpoint

    folder = check_checkpoint(path, coerce("load_step", given.get("load_step", 0), 0))
    with open(os.path.join(folder, "meta.json")) as f:
        saved = json.load(f).get("config")
    if not isinstance(saved, dict) or not saved.get("alg_config") or not saved.get("env_config"):
        print(
            f"note: {folder}/meta.json keeps no settings (an older checkpoint): the run is set up "
            "from --config, --env-config and the command line",
            file=sys.stderr,
        )
        return None
    return folder, saved


def _config_stem(name):
    return os.path.splitext(os.path.basename(str(name)))[0]


def _get(config, key):
    node = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return "(not set)"
        node = node[part]
    return node


def _free(key, free):
    return key in free or bool(free.intersection(key.split(".")))


def resumed_config(folder, saved, alg_name, env_name, overrides, defaults):
    """The config of a run that goes on from (or evaluates) the checkpoint in `folder`: the
    settings it was saved with, the machine's own keys from the command line or their defaults,
    and command-line values only for keys that do not change the experiment (t_max, logging,
    saving...; for an evaluation also its episodes and seeds). Any other change is refused in one
    line unless resume_override=True. A --config or --env-config other than the saved one is
    refused (its networks would not fit the checkpoint's)."""
    from utils.values import RESUMABLE

    given = dict(overrides)
    evaluate = coerce("evaluate", given.get("evaluate", False), False)
    what = "an evaluation" if evaluate else "a resumed run"
    for flag, name, kept in (
        ("--config", alg_name, saved["alg_config"]),
        ("--env-config", env_name, saved["env_config"]),
    ):
        if name is not None and _config_stem(name) != _config_stem(kept):
            raise ConfigError(
                f"{flag}={name} does not match the checkpoint's {flag}={kept} ({folder}); leave "
                f"{flag} out: {what} takes the checkpoint's own settings"
            )
    config = copy.deepcopy(defaults)
    saved, renamed = current_names(saved)
    for former, current in renamed:
        print(f"note: {folder}/meta.json: {former} read as {current} (its current name)", file=sys.stderr)
    for key, value in saved.items():
        if key in defaults and key not in NOT_INHERITED:
            config[key] = copy.deepcopy(value)
    known = set(defaults) | set(DERIVED_KEYS) | {"alg_config", "env_config"}  # the last two: below
    lost = [f"{k}={v!r}" for k, v in saved.items() if k not in known]
    if config["env_args"].get("device") is not None and config["env_args"]["device"] == saved.get("device"):
        config["env_args"]["device"] = None  # it followed the run's device: it follows this one's
    config["alg_config"], config["env_config"] = saved["alg_config"], saved["env_config"]
    if evaluate:  # test episodes on seeds of their own, not the training run's first episodes
        config["seed"] = config["env_args"]["seed"] = None
    # The record goes beside the original run's, where the checkpoint lies now (it may have moved).
    models = os.path.dirname(os.path.dirname(os.path.abspath(folder)))
    if os.path.basename(models) == "models":
        config["local_results_path"] = os.path.dirname(models)
    override = coerce("resume_override", given.get("resume_override", False), False)
    free = RESUMABLE | (EVALUATION_FREE if evaluate else set())
    saved_config = copy.deepcopy(config)
    for key, value in overrides:
        set_key(config, defaults, key, value)
    changed, refused = [], []
    for key in dict.fromkeys(key for key, _ in overrides):  # a key given twice: its last value
        before, after = _get(saved_config, key), _get(config, key)
        if after == before or key in NOT_INHERITED:
            continue
        changed.append(f"{key} {before!r} -> {after!r}")
        if not _free(key, free):
            refused.append(f"{key}={after!r} (saved: {before!r})")
    if lost and not override:  # saved settings no key of this version holds: not dropped silently
        raise ConfigError(
            f"{what} keeps the settings its checkpoint was saved with ({folder}/meta.json), and this "
            f"version has no setting for: {', '.join(lost)}; add resume_override=True to go on "
            "without them"
        )
    if lost:
        changed.append(f"dropped {', '.join(lost)}")
    if refused and not override:
        raise ConfigError(
            f"{what} keeps the settings its checkpoint was saved with ({folder}/meta.json), and "
            f"these would change the experiment: {'; '.join(refused)}; leave them out, or add "
            "resume_override=True to go on with a changed experiment"
        )
    doing = "evaluating" if evaluate else "going on from"
    print(
        f"note: {doing} {folder} with the settings it was saved with (--config="
        f"{saved['alg_config']} --env-config={saved['env_config']})"
        + (f"; changed here: {', '.join(changed)}" if changed else ""),
        file=sys.stderr,
    )
    return config


if __name__ == "__main__":
    # python src/config.py --config=NAME [--env-config=NAME]: what each peer key of the files became
    import contextlib

    from utils.processes import exit_quietly_on_closed_pipe

    EXPLAIN_SHIPPED = True

    def explain():
        try:
            with contextlib.redirect_stderr(sys.stdout):  # the notes are this command's output
                load_config(sys.argv[1:])
        except ConfigError as e:
            return f"error: {e}"

    sys.exit(exit_quietly_on_closed_pipe(explain))
