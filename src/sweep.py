"""Run a grid of configurations x seeds, each as its own Sacred run.

    python src/sweep.py SWEEP.yaml [--dry-run] [--only KEY=VALUE] [--backend local|ray] [--workers N]
        [--ray-address A]
    python src/sweep.py --config qmix --env-config mpe --seeds 1,2,3 [key=value ...]
    python src/sweep.py SWEEP.yaml --env-config sc2     # the same sweep on another env config

A sweep file:

    experiment: qmix_vs_differ        # Sacred runs go to <results>/sacred/<experiment>/...
    config: qmix                      # base --config (a grid may vary `config` too)
    env_config: mpe                   # base --env-config (a grid may vary `env_config` too)
    overrides: {t_max: 200000}        # fixed `with` overrides
    grid:                             # every combination of these
      learner: [q_learner, q_divide_learner]
      env_args.scenario: [simple_spread_v3]
    seeds: [1, 2]
    backend: local                    # local (process pool) or ray
    workers: 0                        # local: parallel runs (0 = one per core)
    ray_address: null                 # ray: a running cluster's address; null starts a local runtime
    results: results                  # local_results_path of every run
    checkpoint_interval: auto         # env steps between checkpoints (auto: a tenth of t_max; 0: none)
    checkpoint_buffer: true           # checkpoints keep the replay buffer (the newest one only)
    archive: null                     # a folder (e.g. bench/runs/<experiment>) to keep completed records in
    archive_checkpoints: false        # the archive also keeps each completed run's final checkpoint

Every run gets experiment=<experiment> and a sweep_key naming its configuration; re-running the
sweep skips runs whose key already has a COMPLETED Sacred record. A run that was stopped
(INTERRUPTED, or DIED with its process) goes on from its newest checkpoint, with its replay
buffer, and carries the metrics logged so far into its new record; --restart starts such runs
over instead. A run whose record is RUNNING in another process is left to it. A failed run is
recorded and the others go on (run again, it starts over); the exit code is 1 if any failed.

With `archive`, the small files of each completed record (run.json, config.json, metrics.json,
info.json; no checkpoints, no cout.txt) are copied there, one folder per configuration, and the
sweep counts the runs found there as completed. A stopped run keeps its newest checkpoint
(without buffer.th; with the buffer's log, from which most runs play it again)
and its record in <archive>/unfinished/, and a sweep on a machine
that lacks them puts them back and goes on from there. Commit that folder, and a sweep spread over
machines or fresh checkouts skips what is done and goes on with what is not; plot.py reads it
like any results folder.
"""

import argparse
import concurrent.futures
import functools
import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yaml  # noqa: E402

from components.replay_log import LOG  # noqa: E402
from config import DEFAULT_ALG, DEFAULT_ENV, ROOT, load_config, seed_env, yaml_error  # noqa: E402
from sweep_archive import (  # noqa: E402
    archive_completed,
    archive_unfinished,
    archived_unfinished,
    record_keys,
    restore_unfinished,
    results_dir,
    resume_point,
    saved_runs,
)
from utils.checkpoint import BUFFER  # noqa: E402
from utils.errors import ConfigError  # noqa: E402
from utils.values import config_changes, describe_changes, plain  # noqa: E402

MAIN = os.path.join(ROOT, "src", "main.py")
SPEC_KEYS = {
    "experiment",
    "config",
    "env_config",
    "overrides",
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
}


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
    return spec


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


def command(run, spec):
    results = spec.get("results", "results")
    resume = run.get("resume")
    return [
        sys.executable,
        MAIN,
        f"--config={run['config']}",
        f"--env-config={run['env_config']}",
        "with",
        *(f"{k}={yaml_value(v)}" for k, v in run["overrides"].items()),
        *run.get("checkpointing", ()),
        *([f"checkpoint_path={resume['folder']}"] if resume else []),
        f"seed={run['seed']}",
        f"experiment={spec['experiment']}",
        f"sweep_key={run['key']}",
        f"local_results_path={results}",
    ]


def checkpointing(config, run, spec):
    """The overrides that make a run save what it needs to go on after an interruption. Not part
    of the run's key: saving changes nothing in the training."""
    interval = spec.get("checkpoint_interval", "auto")
    if interval == "auto":
        interval = max(1, int(config["t_max"]) // 10)
    if not isinstance(interval, int) or isinstance(interval, bool) or interval < 0:
        raise ConfigError(f"checkpoint_interval must be auto or an int >= 0, got {interval!r}")
    extra = []
    if not config["save_model"] and interval > 0:
        extra += ["save_model=True", f"save_model_interval={interval}"]
    if "save_buffer" not in run["overrides"]:  # the sweep's overrides and grid point
        extra.append(f"save_buffer={bool(spec.get('checkpoint_buffer', True))}")
    return extra


def resume_folder(run, spec):
    folder = run["resume"].get("folder")
    if folder is None:  # only in the archive (a dry run): its kept checkpoint
        folder = os.path.join(archived_unfinished(spec)[run["key"]]["folder"], "checkpoint")
    return folder


def resume_buffer(run, spec):
    """-> how the resumed run gets its replay buffer back, or None (an on-policy learner)."""
    folder = resume_folder(run, spec)
    try:
        with open(os.path.join(folder, "meta.json")) as f:
            learner = (json.load(f).get("config") or {}).get("learner")
        from learners import REGISTRY as learners

        if learners[learner].on_policy:
            return None
    except (OSError, ValueError, KeyError, ConfigError):
        return None
    if os.path.isfile(os.path.join(folder, BUFFER)):
        return "its buffer from buffer.th"
    if os.path.isfile(os.path.join(folder, LOG)):
        return f"its buffer played again from {LOG}"
    return "no buffer kept: it refills, and the run is not the uninterrupted one"


def resume_changes(run, spec):
    """-> the settings the run would now get that differ from those its checkpoint has."""
    folder = resume_folder(run, spec)
    try:
        with open(os.path.join(folder, "meta.json")) as f:
            saved = json.load(f).get("config")
        current = load_config(command({**run, "resume": None}, spec)[2:])
    except (OSError, ValueError, ConfigError):
        return {}
    if not isinstance(saved, dict):
        return {}
    seed_env(current)  # as main does
    return config_changes(saved, plain(current))


def drop_buffers(spec, key):
    """A completed run's checkpoints need no replay buffer (nor its log) any more: free the disk."""
    for entry in saved_runs(spec).get(key, []):
        for name in (BUFFER, LOG):
            path = os.path.join(entry["folder"], name)
            if os.path.isfile(path):
                os.remove(path)


def log_path(run, spec):
    base = results_dir(spec)
    folder = os.path.join(base, "logs", "sweeps", spec["experiment"])
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{run['config']}_seed{run['seed']}_{run['key']}.log")


def run_env():
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # runs share the cores
    # main.py ends the run (as INTERRUPTED) when this process dies, however it dies; set there,
    # not in a preexec_fn, which is unsafe in this threaded process
    env["MARL_PARENT_PID"] = str(os.getpid())
    return env


class LocalRuns:
    """The local backend's runs, each a subprocess in its own session: Ctrl-C reaches the sweep
    only, and the sweep passes one SIGINT to each running run and starts no more."""

    def __init__(self):
        self.lock = threading.Lock()
        self.procs = set()
        self.stopping = False

    def run(self, cmd, log, check=None):
        """-> exit code, None when the sweep was stopped before this run started, or the reason
        check() gives for not starting it (a str)."""
        why = check() if check else None
        if why:
            return why
        with self.lock:
            if self.stopping:
                return None
            with open(log, "w") as f:
                p = subprocess.Popen(
                    cmd,
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    env=run_env(),
                    cwd=ROOT,
                    start_new_session=True,
                )
            self.procs.add(p)
        try:
            return p.wait()
        finally:
            with self.lock:
                self.procs.discard(p)

    def stop(self, sig=signal.SIGINT):
        with self.lock:
            self.stopping = True
            for p in self.procs:
                if p.poll() is None:
                    p.send_signal(sig)


def run_local(jobs, workers, check=None):
    """Runs the jobs, `workers` at a time; yields ((run, log), exit code or None or a str: see
    LocalRuns.run). check(run), just before a run starts, may give a reason not to start it."""
    runs = LocalRuns()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    futures = {
        pool.submit(runs.run, cmd, log, functools.partial(check, run) if check else None): (run, log)
        for run, cmd, log in jobs
    }
    pending = set(futures)
    interrupted = False
    try:
        while pending:
            try:
                done, pending = concurrent.futures.wait(pending, return_when="FIRST_COMPLETED")
            except KeyboardInterrupt:
                # A second Ctrl-C while the runs wind down sends SIGTERM (also recorded as
                # INTERRUPTED) to any that are still going.
                runs.stop(signal.SIGTERM if interrupted else signal.SIGINT)
                interrupted = True
                continue
            for fut in done:
                yield futures[fut], fut.result()
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    if interrupted:
        raise KeyboardInterrupt


def run_ray(jobs, address):
    try:
        import ray
    except ImportError:
        raise ConfigError("backend=ray needs Ray: pip install 'ray>=2.40'") from None
    ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)

    def ray_run(cmd, log, cwd):
        # Defined here so Ray ships it by value: workers need not import this module. Runs on a
        # cluster need the repository at the same path on every node.
        import os as _os
        import signal as _signal
        import subprocess as _subprocess

        env = dict(_os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        env["MARL_PARENT_PID"] = str(_os.getpid())  # as locally: the run ends if its Ray worker dies
        _os.makedirs(_os.path.dirname(log), exist_ok=True)
        with open(log, "w") as f:
            p = _subprocess.Popen(cmd, stdout=f, stderr=_subprocess.STDOUT, env=env, cwd=cwd)
            try:
                return p.wait()
            except KeyboardInterrupt:  # ray.cancel: the run ends INTERRUPTED, not killed
                p.send_signal(_signal.SIGINT)
                return p.wait()

    remote = ray.remote(num_cpus=1)(ray_run)
    interrupted = False
    try:
        refs = {remote.remote(cmd, log, ROOT): (run, log) for run, cmd, log in jobs}
        pending = list(refs)
        while pending:
            try:
                ready, pending = ray.wait(pending, num_returns=1)
            except KeyboardInterrupt:
                interrupted = True
                for ref in pending:
                    ray.cancel(ref)  # queued: never start; running: interrupted (above)
                continue
            for ref in ready:
                try:
                    rc = ray.get(ref)
                except (ray.exceptions.TaskCancelledError, ray.exceptions.RayTaskError):
                    rc = None if interrupted else 1
                yield refs[ref], rc
    finally:
        ray.shutdown()
    if interrupted:
        raise KeyboardInterrupt


def keys(runs):
    return {r["key"] for r in runs}


def describe(run):
    parts = [f"--config={run['config']}", f"--env-config={run['env_config']}"]
    parts += [f"{k}={v}" for k, v in run["grid"].items() if k not in ("config", "env_config")]
    return " ".join(parts + [f"seed={run['seed']}"])


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2],
    )
    p.add_argument("file", nargs="?", help="sweep YAML file")
    p.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    p.add_argument(
        "--restart", action="store_true", help="start stopped runs over, not from their checkpoints"
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="start only the runs whose KEY (a grid or override key, seed, config or env_config) "
        "equals VALUE (repeatable; the others are held back, e.g. while a simulator change that "
        "concerns them is pending)",
    )
    p.add_argument("--backend", choices=["local", "ray"], help="overrides the file's backend")
    p.add_argument("--workers", type=int, help="local backend: parallel runs (0 = one per core)")
    p.add_argument("--ray-address", help="ray backend: cluster address (default: a local runtime)")
    p.add_argument("--config", help="without a file: the --config of every run")
    p.add_argument(
        "--env-config",
        help="the --env-config of every run; with a file, replaces the file's (e.g. sc2 for a skirmish "
        "sweep), its records going to <experiment>_<env-config> and <archive>_<env-config>",
    )
    p.add_argument("--seeds", help="without a file: comma-separated seeds, e.g. 1,2,3")
    p.add_argument("--experiment", help="without a file: experiment name (default: <config>_<env>)")
    p.add_argument("overrides", nargs="*", help="without a file: key=value overrides for every run")
    return p.parse_args(argv)


def spec_from_args(a):
    if a.file and "=" in a.file and not os.path.exists(a.file):  # an override, not a file
        a.overrides.insert(0, a.file)
        a.file = None
    if a.file:
        if a.config or a.seeds:
            raise ConfigError("give either a sweep file or --config/--seeds, not both")
        if a.overrides:
            raise ConfigError(f"key=value overrides go in the sweep file, got {a.overrides}")
        spec = load_spec(a.file)
        if a.env_config:
            retarget(spec, a.env_config, a.file)
        return spec
    if not a.config:
        raise ConfigError(
            "give a sweep file, or --config (and --env-config, --seeds) for seeds of one configuration"
        )
    overrides = {}
    for o in a.overrides:
        if "=" not in o:
            raise ConfigError(f"override '{o}' must look like key=value")
        k, v = o.split("=", 1)
        overrides[k] = yaml.safe_load(v)
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


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        spec, runs = load(a)
        wanted = selected(runs, a.only)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    done, busy, todo = plan(spec, runs, a)
    todo = [r for r in todo if r["key"] in wanted]
    report(spec, runs, done, busy, wanted)
    if a.dry_run or not todo:
        return 0
    return execute(spec, todo, a)


def load(a):
    """-> (spec, runs) from the command line; a bad grid is refused before anything starts."""
    spec = spec_from_args(a)
    # where results go is the sweep's business (it looks there for finished runs)
    overrides = dict(spec.get("overrides") or {})
    spec["results"] = str(overrides.pop("local_results_path", spec.get("results", "results")))
    spec["overrides"] = overrides
    runs = expand(spec)
    for run in runs:
        run["checkpointing"] = checkpointing(load_config(command(run, spec)[2:]), run, spec)
    return spec, runs


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


def plan(spec, runs, a):
    """Bring the archive up to date (not in a dry run), then sort the runs: -> (keys done, keys
    running in another process, runs to start), each run to start with its resume point."""
    if not a.dry_run:
        archived = archive_completed(spec)
        if archived:
            print(f"archived {archived} completed runs in {spec['archive']}")
        archive_unfinished(spec)
    done, busy = claimed(spec)
    todo = [r for r in runs if r["key"] not in done and r["key"] not in busy]
    elsewhere = {}  # stopped runs that only the archive holds: went on from there
    if not a.restart:
        if a.dry_run:
            elsewhere = {k: w["t_env"] for k, w in archived_unfinished(spec).items()}
        else:
            restore_unfinished(spec, keys(todo))
    saved = {} if a.restart else saved_runs(spec)
    for r in todo:
        r["resume"] = resume_point(saved.get(r["key"], []))
        if r["key"] in elsewhere and (r["resume"] is None or r["resume"]["t_env"] < elsewhere[r["key"]]):
            r["resume"] = {"t_env": elsewhere[r["key"]], "archived": True}
    return done, busy, todo


def report(spec, runs, done, busy, wanted=None):
    """One line a run: done, busy, held (by --only), resume (from where) or run."""
    print(
        f"sweep {spec['experiment']}: {len(runs)} runs, {len(done & keys(runs))} already completed"
        + (f", {len(busy & keys(runs))} running now in another process (left to it)" if busy else "")
    )
    for r in runs:
        if r["key"] in done:
            print("  done   " + describe(r))
        elif r["key"] in busy:
            print("  busy   " + describe(r))
        elif wanted is not None and r["key"] not in wanted:
            print("  held   " + describe(r))
        elif r.get("resume"):
            where = ", in the archive" if r["resume"].get("archived") else ""
            buffer = resume_buffer(r, spec)
            where += f"; {buffer}" if buffer else ""
            print(f"  resume {describe(r)} (from t_env {r['resume']['t_env']}{where})")
            changes = resume_changes(r, spec)
            if changes:
                print(
                    f"         settings changed since its checkpoint (its curve would mix the two; "
                    f"--restart starts afresh): {describe_changes(changes)}"
                )
        else:
            print("  run    " + describe(r))


def execute(spec, todo, a):
    """Run `todo` on the chosen backend, archiving as runs end. -> the exit code."""
    backend = a.backend or spec.get("backend", "local")
    jobs = [(r, command(r, spec), log_path(r, spec)) for r in todo]
    if backend == "ray":
        results = run_ray(jobs, a.ray_address or spec.get("ray_address"))
    elif backend == "local":
        workers = a.workers if a.workers is not None else spec.get("workers", 0)
        results = run_local(jobs, workers or os.cpu_count() or 1, check=lambda r: taken(spec, r))
    else:
        print(f"error: unknown backend '{backend}'; valid choices: local, ray", file=sys.stderr)
        return 2
    failed = completed = stopped = 0
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for (run, log), rc in results:
            if rc is None:
                continue  # never started: the sweep was stopped
            if isinstance(rc, str):
                print(f"skipped {describe(run)}: {rc}", flush=True)
                continue
            if rc in (130, 143):  # interrupted (Ctrl-C, SIGTERM): its record says INTERRUPTED
                stopped += 1
                print(f"interrupted {describe(run)} -> {log}", flush=True)
                continue
            failed += rc != 0
            completed += rc == 0
            if rc == 0:
                drop_buffers(spec, run["key"])
                archive_completed(spec)
            outcome = "done  " if rc == 0 else f"FAILED ({exit_reason(rc)})"
            print(f"{outcome} {describe(run)} -> {log}", flush=True)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _archive_stopped(spec)
        print(
            f"sweep {spec['experiment']} interrupted: {completed} completed, {stopped} "
            f"interrupted, {failed} failed, {len(todo) - completed - stopped - failed} not "
            f"started (run the sweep again to go on)",
            file=sys.stderr,
        )
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    if stopped:
        _archive_stopped(spec)
    print(
        f"sweep {spec['experiment']}: {completed} completed, {failed} failed"
        + (f", {stopped} interrupted" if stopped else "")
    )
    return 1 if failed or stopped else 0


def exit_reason(rc):
    """A failed run's exit code in words. A run killed by a signal leaves its record RUNNING
    (read back as DIED) and its newest checkpoint, from which the sweep goes on when run again."""
    if rc >= 0:
        return f"exit {rc}"
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        name = f"signal {-rc}"
    oom = -rc == signal.SIGKILL
    why = " (the kernel's out-of-memory killer, if nobody sent it: see dmesg)" if oom else ""
    return f"killed by {name}{why}; run the sweep again to go on from its newest checkpoint"


def claimed(spec):
    """-> (keys of this sweep's completed runs, keys of the runs another sweep process is running
    now: the same sweep started twice, or overlapping --only)."""
    statuses = record_keys(spec)
    done = statuses.get("COMPLETED", set())
    return done, statuses.get("RUNNING", set()) - done


def taken(spec, run):
    """Why a planned run must not start now, or None: another sweep process (one started after
    this one's plan, with an overlapping --only) completed it or is running it meanwhile."""
    done, busy = claimed(spec)
    if run["key"] in done:
        return "completed meanwhile by another process"
    if run["key"] in busy:
        return "running now in another process"
    return None


def _archive_stopped(spec):
    n = archive_unfinished(spec)
    if n:
        print(f"kept the newest checkpoint of {n} stopped runs in {spec['archive']}/unfinished", flush=True)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
