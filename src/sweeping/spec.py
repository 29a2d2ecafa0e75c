"""A sweep file: its keys, loading it, and its grid of configs x seeds as runs."""

import hashlib
import itertools
import json
import os

import yaml

from config import DEFAULT_ALG, DEFAULT_ENV, yaml_error
from utils.errors import ConfigError
from utils.values import BOOKKEEPING

# `launch` keys: how a run goes, never what it trains (its processes, threads, logging), so not
# part of a run's key and free to change while a sweep goes on. The sweep sets the others itself.
LAUNCH_KEYS = BOOKKEEPING - {
    "checkpoint_path", "load_step", "resume_override", "evaluate", "local_results_path",
    "experiment", "sweep_key", "save_model", "save_model_interval", "save_buffer",
}  # fmt: skip

SPEC_KEYS = {
    "experiment",
    "config",
    "env_config",
    "overrides",
    "launch",
    "grid",
    "seeds",
    "backend",
    "workers",
    "ray_address",
    "results",
    "checkpoint_interval",
    "checkpoint_buffer",
    "archive",
    "archive_checkpoints",
}  # and command_line_overrides, set from key=value after a sweep file (never read from one)


def load_spec(path):
    try:
        with open(path) as f:
            spec = yaml.safe_load(f) or {}
    except OSError as e:
        raise ConfigError(f"cannot read sweep file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(yaml_error(path, e)) from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{path} must hold a mapping")
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown sweep key(s) {', '.join(unknown)} in {path}; valid keys: {', '.join(sorted(SPEC_KEYS))}"
        )
    if not spec.get("experiment"):
        raise ConfigError(f"{path}: set `experiment` (the name its runs are grouped under)")
    check_launch(spec, path)
    return spec


def check_launch(spec, path):
    launch = spec.get("launch") or {}
    if not isinstance(launch, dict):
        raise ConfigError(f"`launch` in {path} must map keys to values, got {launch!r}")
    wrong = sorted(set(launch) - LAUNCH_KEYS)
    if wrong:
        raise ConfigError(
            f"`launch` in {path} cannot set {', '.join(wrong)}: it holds only keys that change how runs "
            f"go, not what they train, which are not part of a run's key ({', '.join(sorted(LAUNCH_KEYS))}); "
            f"put the others under `overrides`"
        )
    both = sorted(set(launch) & (set(spec.get("overrides") or {}) | set(spec.get("grid") or {})))
    if both:
        raise ConfigError(f"{path} sets {', '.join(both)} under `launch` and under `overrides` or `grid`")


def yaml_value(v):
    # `with` values are parsed as YAML: write them back the same way
    return v if isinstance(v, str) else json.dumps(v)


def expand(spec):
    """-> [run dict(config, env_config, overrides {key: value}, seed, key)] in a fixed order."""
    grid = spec.get("grid") or {}
    for k, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"grid value of '{k}' must be a non-empty list, got {values!r}")
    seeds = spec.get("seeds") or [1]
    runs = []
    keys = list(grid)
    # Seed-major: a sweep stopped part way (or spread over days) has every configuration at its
    # first seeds rather than all seeds of its first configurations.
    for seed, combo in itertools.product(seeds, list(itertools.product(*(grid[k] for k in keys)))):
        point = dict(zip(keys, combo, strict=True))
        config = point.pop("config", spec.get("config", DEFAULT_ALG))
        env_config = point.pop("env_config", spec.get("env_config", DEFAULT_ENV))
        overrides = {**(spec.get("overrides") or {}), **point}
        ident = json.dumps([config, env_config, sorted(overrides.items()), seed], default=str)
        key = hashlib.sha1(ident.encode()).hexdigest()[:12]
        runs.append(
            {
                "config": config,
                "env_config": env_config,
                "overrides": overrides,
                "grid": dict(zip(keys, combo, strict=True)),
                "seed": seed,
                "key": key,
            }
        )
    return runs


def retarget(spec, env_config, path):
    """--env-config with a sweep file: the same sweep on another environment config (the
    skirmish sweeps on the real SMAC: --env-config sc2). Its records go under their own experiment
    and archive, <name>_<env_config>, never beside the file's own runs."""
    if "env_config" in (spec.get("grid") or {}):
        raise ConfigError(f"{path} varies env_config in its grid; --env-config cannot replace it")
    if env_config == spec.get("env_config", DEFAULT_ENV):
        return
    spec["env_config"] = env_config
    spec["experiment"] = f"{spec['experiment']}_{env_config}"
    if spec.get("archive"):
        spec["archive"] = f"{str(spec['archive']).rstrip('/')}_{env_config}"


def override_file(spec, overrides, path):
    """key=value after a sweep file: the same sweep with these `with` overrides replacing or adding
    to the file's (another map: env_args.map_name=MMM2). Each run's key names its overrides, so
    these runs are told from the file's own in the results and the archive; a key the grid varies
    cannot be fixed this way."""
    varied = sorted(set(overrides) & set(spec.get("grid") or {}))
    if varied:
        raise ConfigError(f"{path} varies {', '.join(varied)} in its grid; edit the grid instead")
    if "local_results_path" in overrides:
        raise ConfigError("local_results_path is the sweep's own (its `results` key), not an override")
    launched = sorted(set(overrides) & set(spec.get("launch") or {}))
    if launched:
        raise ConfigError(f"{path} sets {', '.join(launched)} under `launch`; edit it there")
    spec["overrides"] = {**(spec.get("overrides") or {}), **overrides}
    spec["command_line_overrides"] = overrides


def spec_from_args(a):
    if a.file and "=" in a.file and not os.path.exists(a.file):  # an override, not a file
        a.overrides.insert(0, a.file)
        a.file = None
    overrides = {}
    for o in a.overrides:
        if "=" not in o:
            raise ConfigError(f"override '{o}' must look like key=value")
        k, v = o.split("=", 1)
        overrides[k] = yaml.safe_load(v)
    if a.file:
        if a.config or a.seeds:
            raise ConfigError("give either a sweep file or --config/--seeds, not both")
        spec = load_spec(a.file)
        if a.env_config:
            retarget(spec, a.env_config, a.file)
        if overrides:
            override_file(spec, overrides, a.file)
        return spec
    if not a.config:
        raise ConfigError(
            "give a sweep file, or --config (and --env-config, --seeds) for seeds of one configuration"
        )
    try:
        seeds = [int(s) for s in (a.seeds or "1").split(",")]
    except ValueError:
        raise ConfigError(f"--seeds must be comma-separated integers, got '{a.seeds}'") from None
    env = a.env_config or DEFAULT_ENV
    return {
        "experiment": a.experiment or f"{a.config}_{env}",
        "config": a.config,
        "env_config": env,
        "overrides": overrides,
        "seeds": seeds,
    }


def keys(runs):
    return {r["key"] for r in runs}


def describe(run):
    parts = [f"--config={run['config']}", f"--env-config={run['env_config']}"]
    parts += [f"{k}={v}" for k, v in run["grid"].items() if k not in ("config", "env_config")]
    return " ".join(parts + [f"seed={run['seed']}"])


def run_field(run, key):
    """A run's value of a --only key: seed, config, env_config, or a grid or override key."""
    if key in ("seed", "config", "env_config"):
        return run[key]
    return run["overrides"][key]


def selected(runs, only):
    """-> keys of the runs that every KEY=VALUE of --only matches (all runs without --only)."""
    known = {"seed", "config", "env_config"} | {k for r in runs for k in r["overrides"]}
    wanted = keys(runs)
    for item in only:
        if "=" not in item:
            raise ConfigError(f"--only '{item}' must look like KEY=VALUE")
        k, v = item.split("=", 1)
        if k not in known:
            valid = ", ".join(sorted(known))
            raise ConfigError(f"--only key '{k}' is not set by this sweep; valid keys: {valid}")
        value = yaml.safe_load(v)
        wanted &= {r["key"] for r in runs if run_field(r, k) == value or str(run_field(r, k)) == v}
    return wanted
