"""Run a grid of configurations x seeds, each as its own Sacred run.

    python src/sweep.py SWEEP.yaml [--dry-run] [--only KEY=VALUE] [--backend local|ray] [--workers N]
        [--ray-address A]
    python src/sweep.py --config qmix --env-config mpe --seeds 1,2,3 [key=value ...]
    python src/sweep.py SWEEP.yaml --env-config sc2     # the same sweep on another env config
    python src/sweep.py SWEEP.yaml env_args.map_name=MMM2   # ... with these overrides instead

A sweep file:

    experiment: qmix_vs_differ        # Sacred runs go to <results>/sacred/<experiment>/...
    config: qmix                      # base --config (a grid may vary `config` too)
    env_config: mpe                   # base --env-config (a grid may vary `env_config` too)
    overrides: {t_max: 200000}        # fixed `with` overrides
    launch: {env_workers: 0}          # overrides of how runs go, not what they train (threads,
                                      #   env processes, logging): not part of a run's key
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
import os
import signal
import sys

from config import load_config
from sweep_archive import (
    archive_completed,
    archive_unfinished,
)
from sweeping.backends import INTERRUPTED_CODES, exit_reason, run_local, run_ray
from sweeping.plan import (
    checkpointing,
    command,
    drop_buffers,
    log_path,
    plan,
    report,
    taken,
)
from sweeping.spec import describe, expand, load_spec, selected, spec_from_args
from utils.errors import ConfigError
from utils.processes import SAVE_AND_STOP, exit_quietly_on_closed_pipe

# what the tests and bench/ take from here besides main
__all__ = [
    "checkpointing",
    "command",
    "exit_reason",
    "expand",
    "load_spec",
    "run_local",
    "spec_from_args",
    "taken",
]


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
    p.add_argument(
        "overrides",
        nargs="*",
        help="key=value overrides for every run (with a file: replacing or adding to its overrides)",
    )
    return p.parse_intermixed_args(argv)  # overrides may follow options too


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
            if rc in INTERRUPTED_CODES:  # Ctrl-C, SIGTERM, SIGUSR1
                stopped += 1
                how = "saved and stopped" if rc == 128 + SAVE_AND_STOP else "interrupted"
                print(f"{how} {describe(run)} -> {log}", flush=True)
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


def _archive_stopped(spec):
    n = archive_unfinished(spec)
    if n:
        print(f"kept the newest checkpoint of {n} stopped runs in {spec['archive']}/unfinished", flush=True)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(exit_quietly_on_closed_pipe(main))
