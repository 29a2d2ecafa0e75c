import logging
import os
import sys
import time
from collections import defaultdict

import numpy as np

from utils.values import plain_config


class _CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time, so Sacred's capture (cout.txt) sees it."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


def get_console_logger():
    logger = logging.getLogger("marl")
    if not logger.handlers:
        handler = _CurrentStderrHandler()
        handler.setFormatter(logging.Formatter("[%(levelname)s %(asctime)s] %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


class Logger:
    """Sends every stat to the console summary, Sacred's metrics.json, TensorBoard and W&B."""

    def __init__(self, console_logger):
        self.console_logger = console_logger
        self.stats = defaultdict(list)
        self.sacred_run = None
        self.tb_writer = None
        self.wandb_run = None
        self._wandb_row = {}  # stats of one t_env, sent to W&B as one row
        self._shown = {}  # key -> how many of its values the console summaries had seen

    def setup_sacred(self, sacred_run):
        self.sacred_run = sacred_run

    def check_records(self):
        """Raise the first error an observer met writing the record (a full disk): the run
        stops instead of training on with nothing recorded."""
        for obs in getattr(self.sacred_run, "observers", ()):
            error = getattr(obs, "write_error", None)
            if error is not None:
                raise error

    def setup_tb(self, directory):
        from torch.utils.tensorboard import SummaryWriter

        self.tb_writer = SummaryWriter(log_dir=directory)

    def setup_wandb(self, args, directory):
        import wandb

        os.makedirs(directory, exist_ok=True)
        config = plain_config(args)
        self.wandb_run = wandb.init(
            project=args.wandb_project,
            entity=args.wandb_entity,
            mode=args.wandb_mode,
            dir=directory,
            name=args.unique_token,
            group=args.experiment or f"{args.name}_{args.env}",
            config=config,
            # Sacred captures the console and the record holds the host; W&B needs neither.
            settings=wandb.Settings(console="off", x_disable_stats=True, silent=True),
        )
        # Stats arrive at env steps, not once per call: plot every key against t_env.
        self.wandb_run.define_metric("t_env")
        self.wandb_run.define_metric("*", step_metric="t_env")

    def _flush_wandb(self):
        if self.wandb_run is not None and self._wandb_row:
            self.wandb_run.log(self._wandb_row)
            self._wandb_row = {}

    def log_stat(self, key, value, t):
        value = float(value)
        self.stats[key].append((t, value))
        if self.sacred_run is not None:
            self.sacred_run.log_scalar(key, value, t)
        if self.tb_writer is not None:
            self.tb_writer.add_scalar(key, value, t)
        if self.wandb_run is not None:
            if self._wandb_row.get("t_env", t) != t:
                self._flush_wandb()
            self._wandb_row.update({key: value, "t_env": t})

    def print_recent_stats(self, header=""):
        """The header, then each stat logged since the last summary (a stat not logged since is
        left out rather than shown with an old value): the mean of its last 5 values, or its last
        value for epsilon and test stats."""
        lines = [header] if header else []
        row = []
        for k in sorted(k for k in self.stats if k != "episode"):
            if len(self.stats[k]) == self._shown.get(k, 0):
                continue
            self._shown[k] = len(self.stats[k])
            window = 1 if k == "epsilon" or k.startswith("test_") else 5
            vals = [v for _, v in self.stats[k][-window:]]
            row.append(f"{k}: {np.mean(vals):.4f}")
        for i in range(0, len(row), 4):
            lines.append("  " + " | ".join(row[i : i + 4]))
        self.console_logger.info("\n".join(lines))

    def close(self, failed=False):
        if self.tb_writer is not None:
            self.tb_writer.close()
        if self.wandb_run is not None:
            self._flush_wandb()
            self.wandb_run.finish(exit_code=1 if failed else 0)  # a failed run shows as failed
            self.wandb_run = None


class Progress:
    """Elapsed time, training steps per second and time left, for the console."""

    def __init__(self, t_max, t_start=0):
        self.t_max = t_max
        self.start_time = time.time()
        self.t_start = t_start

    def line(self, t_env, episode):
        elapsed = time.time() - self.start_time
        rate = (t_env - self.t_start) / elapsed if elapsed > 0 else 0.0
        left = (self.t_max - t_env) / rate if rate > 0 else float("inf")
        return (
            f"t_env {t_env} / {self.t_max} | episode {episode} | elapsed {fmt_time(elapsed)} | "
            f"{rate:.0f} steps/s | left {fmt_time(left)}"
        )


def fmt_time(seconds):
    if seconds == float("inf") or seconds != seconds:
        return "-"
    seconds = max(int(seconds), 0)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"
