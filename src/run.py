"""A run from Sacred: seeds, logging, the parts from assembly.build, and the training loop."""

import gc
import os
import random
import signal
import time
from types import SimpleNamespace

import numpy as np
import torch

from assembly import build, env_info_summary, resolve_device
from components.episode_buffer import EpisodeBatch
from resume import RunState, resume, save_model
from utils.checkpoint import find_checkpoint, load_checkpoint
from utils.logger import Logger, Progress, get_console_logger
from utils.processes import Interrupted, interrupt_received, raise_if_interrupted, save_and_stop_requested
from utils.summary import end_block


def set_seeds(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run(_run, config, console=None):
    """Entry point from Sacred: `config` is the merged config dict."""
    console = console or get_console_logger()
    args = SimpleNamespace(**config)
    args.env_args = dict(config["env_args"])
    args.device = resolve_device(config["device"])
    if "device" in args.env_args and args.env_args["device"] is None:  # envs that simulate on a device
        args.env_args["device"] = args.device
    set_seeds(args.seed)
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)

    logger = Logger(console)
    if _run is not None:
        logger.setup_sacred(_run)
    run_id = _run._id if _run is not None and _run._id is not None else "norun"
    # Where this run's record lies, relative to the results folder: checkpoints keep it so that a
    # run resumed from them can carry the curve so far into its own record.
    args.record = ""
    for obs in getattr(_run, "observers", ()):
        if getattr(obs, "dir", None):
            args.record = os.path.relpath(obs.dir, args.local_results_path)
    args.unique_token = run_token(args, run_id)
    if args.use_tensorboard:
        logger.setup_tb(os.path.join(args.local_results_path, "tb_logs", args.unique_token))
    failed = True
    ending = {"runner": None}  # what the closing block reads, filled in as the run goes
    try:
        if args.use_wandb:
            logger.setup_wandb(args, args.local_results_path)
        run_sequential(args, logger, ending)
        failed = False
        return report_end(args, logger, ending, "completed")
    except BaseException as e:
        signum = interrupt_received()
        interrupted = isinstance(e, KeyboardInterrupt) or signum is not None
        try:
            report_end(args, logger, ending, "interrupted" if interrupted else "failed")
        except Exception:  # the block must not hide why the run stopped
            pass
        # Sacred reads the captured console output only while its capture is open, and it is
        # closed by the time a failed or interrupted run writes its last record: read it now.
        if _run is not None and hasattr(_run, "_get_captured_output"):
            _run._get_captured_output()
        if signum is not None and not isinstance(e, KeyboardInterrupt):
            # Python turns an interrupt inside some imports into another error (a RuntimeError
            # from a dataclass's __set_name__ in torch's lazy imports): the run was interrupted.
            raise Interrupted(signum) from e
        raise
    finally:
        logger.close(failed=failed)


def report_end(args, logger, ending, status):
    """Print the closing block (utils/summary.py) -> the result Sacred keeps in run.json."""
    runner = ending["runner"]
    t_env = runner.t_env if runner is not None else 0
    record = os.path.join(args.local_results_path, args.record) if args.record else None
    models = os.path.join(args.local_results_path, "models", args.unique_token)
    saved = sorted(int(d) for d in os.listdir(models) if d.isdigit()) if os.path.isdir(models) else []
    lines, result = end_block(
        status,
        logger.stats,
        t_env,
        ending.get("t_start"),
        time.time() - ending.get("started", time.time()),
        record,
        f"{models} (newest t_env {saved[-1]})" if saved else None,
        kind="evaluation" if args.evaluate else "run",
        test_interval=args.test_interval,
    )
    logger.console_logger.info("\n".join(lines))
    return result


def run_token(args, run_id):
    """The name of this run's checkpoint and TensorBoard folders. It must be unique: a sweep over
    scenarios once started two runs of one config and seed in the same second, both record 1 in
    their own folder, and they shared a checkpoint folder (one run's save removed the other's).
    Where the record lies ([experiment/]env/task) plus its id is unique in a results folder;
    without a record, the process id is."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if args.record:  # sacred/[<experiment>/]<env>/<task>/<name>/<id>
        where = "_".join(args.record.split(os.sep)[1:-2])
        return f"{args.name}_{where}_seed{args.seed}_{stamp}_{run_id}"
    return f"{args.name}_{args.env}_seed{args.seed}_{stamp}_pid{os.getpid()}"


def run_sequential(args, logger, ending=None):
    """Build the run and train it (or evaluate). ending: filled with the runner and, once
    training starts, its first t_env and start time, for the closing block."""
    ending = {} if ending is None else ending
    console = logger.console_logger
    parts = build(args, logger)
    runner, buffer, learner = parts.runner, parts.buffer, parts.learner
    run_state = RunState(buffer, runner)
    ending["runner"] = runner
    try:
        if args.team_checkpoints:  # cross-play: each team acts with its own checkpoint's controller
            evaluate_sequential(args, runner, logger)
            return {"t_env": runner.t_env}
        console.info(
            f"env {args.env} {env_info_summary(parts.env_info)}; device {args.device}; "
            f"run token {args.unique_token}"
        )
        if args.record:
            console.info(f"record: {os.path.join(args.local_results_path, args.record)}")

        episode = 0
        carried = False
        pending = 0
        if args.checkpoint_path:
            folder = find_checkpoint(args.checkpoint_path, args.load_step)
            meta = load_checkpoint(folder, learner, args.device)
            runner.t_env = meta["t_env"]
            episode = meta.get("episode", 0)
            console.info(f"loaded {folder} (t_env {runner.t_env})")
            if args.evaluate:
                evaluate_sequential(args, runner, logger)
                return {"t_env": runner.t_env}
            carried, pending = resume(args, logger, buffer, folder, meta, runner, run_state)

        ending.update(t_start=runner.t_env, started=time.time())
        train_loop(args, runner, buffer, learner, logger, episode, carried, pending, run_state)
        return {"t_env": runner.t_env}
    finally:
        runner.close_env()


def evaluate_sequential(args, runner, logger):
    for _ in range(max(1, args.test_nepisode // runner.batch_size)):
        runner.run(test_mode=True)
    if args.save_replay:
        for path in runner.save_replay():
            if path:
                logger.console_logger.info(f"saved replay {path}")
    logger.print_recent_stats(f"evaluation at t_env {runner.t_env}")


def train_loop(args, runner, buffer, learner, logger, episode, resumed=False, pending=0, run_state=None):
    t_start = runner.t_env
    if buffer is None:
        unit = f"the {args.batch_size} episodes just played (on-policy)"
    elif args.transition_batch_size:
        unit = f"{args.transition_batch_size} single transitions"
    else:
        unit = f"{args.batch_size} episodes"
    logger.console_logger.info(f"training for {args.t_max} env steps; updates on batches of {unit}")
    # The loop makes many short-lived objects and no long-lived cycles: move everything built so
    # far out of the collector's view and collect less often (a few % of wall-clock time).
    gc.collect()
    gc.freeze()
    old_threshold = gc.get_threshold()
    gc.set_threshold(50000, 50, 100)
    try:
        _train(args, runner, buffer, learner, logger, episode, t_start, resumed, pending, run_state)
    finally:
        gc.set_threshold(*old_threshold)
        gc.unfreeze()


# Console progress by the clock too, so a slow (shared) machine is never silent for long. These
# lines go to the console only: the metrics stay the same whatever the machine's speed.
FIRST_PROGRESS_S = 30
PROGRESS_EVERY_S = 60


def next_multiple(t, interval):
    return (t // interval + 1) * interval


def _train(args, runner, buffer, learner, logger, episode, t_start, resumed=False, pending=0, run_state=None):
    # Tests and summaries fall due when t_env crosses a multiple of their interval, tests first:
    # a summary then shows the test phase just run (when log_interval is a multiple of
    # test_interval, as in every shipped config). A test phase before any training, unless this
    # run goes on from a record that had its tests up to t_start (checkpoints are saved after
    # the tests due): then the schedule is the uninterrupted run's.
    run_state = run_state if run_state is not None else RunState(buffer, runner)
    next_test_t = next_multiple(t_start, args.test_interval) if resumed else t_start
    next_log_t = next_multiple(t_start, args.log_interval)
    model_save_t = t_start
    n_test_runs = max(1, args.test_nepisode // runner.batch_size)
    progress = Progress(args.t_max, t_start)
    next_progress = progress.start_time + FIRST_PROGRESS_S

    # pending: env steps collected since the last update (train_interval_steps > 0)
    while runner.t_env <= args.t_max:
        raise_if_interrupted()
        if buffer is None:
            episode += train_on_policy(args, runner, learner, episode)
        else:
            t_before = runner.t_env
            run_state.before_training_episodes(runner)
            episode_batch = runner.run(test_mode=False)
            run_state.stored(buffer.insert_episode_batch(episode_batch))
            learner.observe(episode_batch)
            if args.train_interval_steps:
                pending += runner.t_env - t_before
                n_updates, pending = divmod(pending, args.train_interval_steps)
            else:
                n_updates = args.updates_per_call
            for _ in range(n_updates):
                sample = draw_batch(args, buffer, runner.t_env)
                if sample is None:
                    break
                if sample.device != args.device:
                    sample.to(args.device)
                feedback = learner.train(sample, runner.t_env, episode)
                if feedback and hasattr(sample, "ep_ids"):  # what the learner learned (priorities)
                    buffer.learn(sample.ep_ids, feedback)
                for k in range(learner.aux_batches):
                    extra = draw_batch(args, buffer, runner.t_env)
                    if extra.device != args.device:
                        extra.to(args.device)
                    learner.train_aux(extra, runner.t_env, k)
            episode += runner.batch_size

        if runner.t_env >= next_test_t:
            next_test_t = next_multiple(runner.t_env, args.test_interval)
            for _ in range(n_test_runs):
                runner.run(test_mode=True)

        now = time.time()
        if runner.t_env >= next_log_t:
            next_log_t = next_multiple(runner.t_env, args.log_interval)
            logger.log_stat("episode", episode, runner.t_env)
            logger.print_recent_stats(progress.line(runner.t_env, episode))
            next_progress = now + PROGRESS_EVERY_S
        elif now >= next_progress:
            logger.print_recent_stats(progress.line(runner.t_env, episode))
            next_progress = now + PROGRESS_EVERY_S
        logger.check_records()

        # Last in the step, after everything it logs: a run stopped just after a save has lost
        # nothing, and its resumed run goes on with the next step.
        if args.save_model and runner.t_env - model_save_t >= args.save_model_interval:
            model_save_t = runner.t_env
            save_model(args, runner, learner, episode, buffer, pending, run_state)
        stop = save_and_stop_requested()
        if stop is not None:  # the end of a step is where a checkpoint is whole
            if args.save_model and model_save_t != runner.t_env:
                save_model(args, runner, learner, episode, buffer, pending, run_state)
            logger.console_logger.info(stopping_line(args, runner.t_env, stop))
            raise Interrupted(stop)

    if args.save_model and model_save_t != runner.t_env:  # not saved a second time at that step
        save_model(args, runner, learner, episode, buffer, pending, run_state)
    logger.print_recent_stats("finished: " + progress.line(runner.t_env, episode))


def stopping_line(args, t_env, signum):
    name = signal.Signals(signum).name
    if not args.save_model:
        return f"{name}: stopping at t_env {t_env} without a checkpoint (save_model is False)"
    return f"{name}: saved a checkpoint at t_env {t_env}; stopping (a resumed run goes on from it)"


def train_on_policy(args, runner, learner, episode):
    """Play batch_size episodes (batch_size_run at a time, no update in between, so all of them
    come from the current policy), train once on them, and drop them. -> episodes played."""
    parts = [runner.run(test_mode=False) for _ in range(args.batch_size // runner.batch_size)]
    batch = EpisodeBatch.cat(parts)
    batch = batch[:, : batch.max_t_filled()]
    if batch.device != args.device:
        batch.to(args.device)
    learner.train(batch, runner.t_env, episode)
    return batch.batch_size


def draw_batch(args, buffer, t_env=0):
    """The next training batch (single transitions or whole episodes), or None while the buffer
    holds too little."""
    if args.transition_batch_size:
        if not buffer.can_sample_transitions(args.transition_batch_size):
            return None
        return buffer.sample_transitions(
            args.transition_batch_size, None if args.time_limit_bootstrap else args.episode_limit
        )
    if not buffer.can_sample(args.batch_size):
        return None
    return buffer.sample(args.batch_size, t_env)
