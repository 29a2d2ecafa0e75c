"""Saving a run and going on from a checkpoint: its learner, replay buffer (or the log to play it
again), random states and counters, and the metrics its run had logged, so that a resumed run
repeats the uninterrupted one."""

import json
import os
import time

from components.replay_log import LOG, read_log, save_log
from config_keys import load_defaults
from runners.replay import rebuild
from utils.checkpoint import load_buffer, load_run_state, save_checkpoint
from utils.logger import get_console_logger
from utils.seeding import process_rng_state, set_process_rng_state
from utils.values import config_changes, describe_changes, plain_config


class RunState:
    """What exact resume needs of a run besides its networks, optimisers and counters, gathered
    through the buffer's and runner's public methods, so that neither knows about resume: the
    random state each held episode's env began from, per buffer slot, which the buffer's log
    keeps so that a resumed run can play the episodes again (components/replay_log.py). Taken
    only where the runner's episodes can be played again one by one (replayable_episodes)."""

    def __init__(self, buffer, runner):
        self.replayable = buffer is not None and getattr(runner, "replayable_episodes", False)
        self.env_rng = [None] * buffer.buffer_size if self.replayable else []
        self._coming = None  # the states the coming training episodes' envs begin from

    def before_training_episodes(self, runner) -> None:
        self._coming = runner.env_rng_states() if self.replayable else None

    def stored(self, slots) -> None:
        """The episodes just played went to the buffer's `slots`, in the batch's order."""
        if self.replayable:
            for slot, state in zip(slots, self._coming, strict=True):
                self.env_rng[slot] = state
        self._coming = None

    def restore(self, states) -> None:
        """The states of the first len(states) slots, from a checkpoint's log."""
        if self.replayable:
            self.env_rng[: len(states)] = states


def resume(args, logger, buffer, folder, meta, runner, run_state=None):
    """Go on from a checkpoint: its replay buffer if it saved one, the metrics its run had
    logged up to the checkpoint copied into this run's record, so that the record holds the
    whole curve, and the random states and counters it kept, so that the run goes on as the
    uninterrupted run would have. -> (whether the metrics were carried, the env steps collected
    since the last update)."""
    console = logger.console_logger
    t_env = meta["t_env"]
    run_state = run_state if run_state is not None else RunState(buffer, runner)
    restored, rebuilt = restore_buffer(args, console, buffer, folder, meta, runner, run_state)
    info = {"checkpoint": os.path.abspath(folder), "t_env": t_env, "buffer_restored": restored}
    if rebuilt is not None:
        info["buffer_rebuilt"] = rebuilt  # played again from its log (False: the log did not fit)
    saved = meta.get("config")
    changes = config_changes(saved, plain_config(args), load_defaults()) if saved else {}
    if changes:
        console.warning(
            f"settings differ from those the checkpoint was saved with, so this run's curve mixes "
            f"the two: {describe_changes(changes)}"
        )
        info["config_changed"] = {k: [a, b] for k, (a, b) in changes.items()}
    carried = carry_metrics(logger, folder, meta, info)
    # Last: nothing may draw from the process's streams between here and the training loop.
    differs = ["settings changed"] if changes else []
    if buffer is not None and not restored:
        differs.append("no replay buffer")
    # With other settings the saved states may not fit (other envs, per-agent returns): not used.
    pending = 0 if changes else restore_run_state(runner, folder, differs)
    info["exact"] = not differs
    if differs:
        info["differs_because"] = differs
        console.warning(
            "from here this run will not repeat the uninterrupted run exactly: " + "; ".join(differs)
        )
    if logger.sacred_run is not None:
        logger.sacred_run.info["resumed_from"] = info
    return carried, pending


def restore_buffer(args, console, buffer, folder, meta, runner, run_state):
    """The checkpoint's replay buffer: loaded from buffer.th, else played again from its log;
    `run_state` gets the states its episodes' envs began from, for the next log.
    -> (restored, rebuilt: True/False when a log was played again, else None)."""
    if buffer is None:
        return False, None
    restored, rebuilt = load_buffer(folder, buffer), None
    if restored:
        console.info(f"replay buffer restored: {buffer.episodes_in_buffer} episodes")
        log = read_log(folder)
        if log is not None and log[0]["episodes_in_buffer"] == buffer.episodes_in_buffer:
            run_state.restore(log[0]["env_rng"])
    elif os.path.isfile(os.path.join(folder, LOG)):
        started = time.time()
        why = rebuild(folder, buffer, args, runner)
        restored = rebuilt = why is None
        if restored:
            run_state.restore(read_log(folder)[0]["env_rng"])
            console.info(
                f"replay buffer rebuilt from {LOG}: {buffer.episodes_in_buffer} episodes played "
                f"again in {time.time() - started:.0f} s, the same to the last bit as when saved"
            )
        else:
            console.warning(f"the replay buffer could not be rebuilt from {LOG}: {why}")
    if not restored:
        saved = (meta.get("config") or {}).get("save_buffer", False)
        why = (
            "it was saved with one, but buffer.th is not there (sweep archives and "
            "copied checkpoints leave it out)"
            if saved
            else "it was saved with save_buffer=False"
        )
        console.warning(
            f"this checkpoint has no replay buffer ({why}): training waits until the buffer "
            "refills from the restored policy, which a run that was never stopped would not "
            "have done"
        )
    return restored, rebuilt


def carry_metrics(logger, folder, meta, info):
    """Log into this run's record what the checkpoint's run had logged up to the checkpoint;
    notes it in `info`. -> whether that run's record was found."""
    console, t_env = logger.console_logger, meta["t_env"]
    record = None
    if meta.get("record"):
        # <results>/models/<run token>/<t_env>/ -> <results>/<record>
        base = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(folder))))
        record = os.path.join(base, meta["record"])
    metrics = read_metrics(record) if record else None
    if metrics is None:
        console.warning(
            f"the record of the run that saved this checkpoint was not found"
            f"{f' at {record}' if record else ''}; this run's metrics start at t_env {t_env}"
        )
        return False
    points = sorted(
        (t, name, v)
        for name, series in metrics.items()
        for t, v in zip(series["steps"], series["values"], strict=True)
        if t <= t_env
    )
    for t, name, v in points:
        logger.log_stat(name, v, t)
    info["record"] = record
    info["points_carried"] = len(points)
    console.info(f"carried {len(points)} logged values up to t_env {t_env} from {record}")
    return True


def restore_run_state(runner, folder, differs):
    """Put back the random states and counters that the checkpoint kept; adds to `differs` why
    the run will not repeat the uninterrupted one. -> the env steps collected since the last
    update (train_interval_steps)."""
    state = load_run_state(folder)
    if state is None:
        differs.append("the checkpoint keeps no random states (saved before they were kept)")
        return 0
    differs += runner.load_state_dict(state["runner"])
    set_process_rng_state(state["rng"])
    return int(state["pending"])


def read_metrics(record):
    try:
        with open(os.path.join(record, "metrics.json")) as f:
            metrics = json.load(f)
    except (OSError, ValueError):
        return None
    return metrics if isinstance(metrics, dict) else None


def save_model(args, runner, learner, episode, buffer=None, pending=0, run_state=None):
    root = os.path.join(args.local_results_path, "models", args.unique_token)
    # The config lets cross-play rebuild this run's controller on its own (team_checkpoints).
    meta = {
        "episode": episode,
        "name": args.name,
        "env": args.env,
        "record": args.record,
        "config": plain_config(args),
    }
    # What a resumed run needs to go on exactly as this one: taken after everything this step drew.
    counters = {"rng": process_rng_state(args.device), "runner": runner.state_dict(), "pending": pending}
    # The buffer's log, with or without save_buffer: a few MB that give the buffer back where
    # buffer.th is not kept (save_buffer=False, sweep archives, fresh checkouts).
    env_rng = run_state.env_rng if run_state is not None else []
    writers = {LOG: lambda path: write_buffer_log(buffer, env_rng, path)} if buffer is not None else None
    kept = buffer if args.save_buffer else None
    path = save_checkpoint(root, runner.t_env, learner, meta, kept, counters, writers)
    get_console_logger().info(f"saved checkpoint {path}")


def write_buffer_log(buffer, env_rng, path):
    """The log is a convenience beside buffer.th: a state it cannot write (an env's random state
    that is not plain values) costs the log, not the checkpoint."""
    try:
        save_log(buffer, env_rng, path)
    except (TypeError, ValueError) as e:
        if os.path.exists(path):
            os.remove(path)
        get_console_logger().warning(f"this checkpoint keeps no {LOG}: {e}")
