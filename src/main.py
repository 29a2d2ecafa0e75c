"""python src/main.py --config=<algorithm> --env-config=<environment> [with key=value ...]"""

import datetime
import json
import os
import random
import signal
import sys
import warnings

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
# Sacred 0.8.7 imports pkg_resources, whose deprecation warning says nothing to our users.
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

from config import USAGE, load_config, results_base, seed_env  # noqa: E402
from utils.errors import ConfigError  # noqa: E402
from utils.files import disk_full_message, is_disk_full  # noqa: E402
from utils.logger import get_console_logger  # noqa: E402
from utils.processes import (  # noqa: E402
    SAVE_AND_STOP,
    forget_interrupts,
    raise_interrupt,
    request_save_and_stop,
    signal_on_parent_death,
)


def results_folder(config):
    env_args = config["env_args"]
    key = str(env_args.get("key") or "").rpartition(":")[2]  # a Gymnasium id without its module
    task = env_args.get("map_name") or key or env_args.get("scenario") or "default"
    base = results_base(config)
    parts = [config["experiment"]] if config.get("experiment") else []
    return base, os.path.join(base, "sacred", *parts, config["env"], str(task), config["name"])


def build_experiment(config, console):
    from sacred import SETTINGS, Experiment
    from sacred.utils import apply_backspaces_and_linefeeds

    import run as run_module
    from utils.records import RecordObserver

    SETTINGS.CONFIG.READ_ONLY_CONFIG = False
    SETTINGS.CAPTURE_MODE = "sys"
    ex = Experiment(config["name"], save_git_info=False)
    ex.logger = console
    ex.captured_out_filter = apply_backspaces_and_linefeeds
    ex.add_config(config)
    _, sacred_dir = results_folder(config)
    ex.observers.append(RecordObserver(sacred_dir))

    @ex.main
    def sacred_main(_run, _config):
        return run_module.run(_run, dict(_config), console)

    return ex


def _not_sacred_abort(record):
    # Sacred logs "Aborted after ..." on an interrupt (main says it once, with the record's path),
    # and "Result: ..." and "Completed after ..." after the run's closing block, which says both.
    return not str(record.msg).startswith(("Aborted after", "Result:", "Completed after"))


def die_with_parent():
    """Under a sweep (MARL_PARENT_PID set): a SIGTERM when the sweep dies, however it dies, so the
    run ends INTERRUPTED instead of running on as an orphan."""
    parent = os.environ.get("MARL_PARENT_PID")
    if not parent:
        return
    # The sweep stops its runs with SIGINT. A run of a Ray worker may inherit SIGINT ignored (the
    # local backend starts its runs listening); each run has its own session, so no terminal
    # Ctrl-C can reach it, and listening again is safe.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if not signal_on_parent_death(signal.SIGTERM, int(parent)):
        os.kill(os.getpid(), signal.SIGTERM)  # the sweep died before the request took effect


def main(argv):
    die_with_parent()
    console = get_console_logger()
    for handler in console.handlers:
        handler.addFilter(_not_sacred_abort)
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    try:
        config = load_config(argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if config["seed"] is None:
        config["seed"] = random.SystemRandom().randrange(2**31)
    seed_env(config)
    base, _ = results_folder(config)
    config["local_results_path"] = base

    ex = build_experiment(config, console)
    forget_interrupts()
    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, raise_interrupt),
        SAVE_AND_STOP: signal.signal(SAVE_AND_STOP, request_save_and_stop),
    }
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # an ignored SIGINT stays so
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, raise_interrupt)
    try:
        ex.run()
    except ConfigError as e:  # found only once the env exists (e.g. its action space)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        settle_interrupted(ex)
        signum = getattr(e, "signum", signal.SIGINT)
        how = "stopped" if signum == SAVE_AND_STOP else "interrupted"
        print(
            f"{how} by {signal.Signals(signum).name}; the run's record is marked "
            f"INTERRUPTED: {sacred_record(ex)}",
            file=sys.stderr,
        )
        return 128 + signum
    except OSError as e:
        if not is_disk_full(e):
            raise
        print(
            f"error: {disk_full_message(e)}; the run stopped (its record keeps what was written "
            f"before: {sacred_record(ex)})",
            file=sys.stderr,
        )
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def now_utc():
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)  # Sacred's naive UTC


def settle_interrupted(ex):
    """Mark the record INTERRUPTED where Sacred left it RUNNING: an exception inside Sacred's
    handling of the interrupt (a second signal did this once in 50 killed sweeps, until repeats
    were ignored) ends it without Sacred's final event."""
    for observer in ex.observers:
        entry, folder = getattr(observer, "run_entry", None), getattr(observer, "dir", None)
        if not entry or not folder:
            continue
        try:
            with open(os.path.join(folder, "run.json")) as f:
                on_disk = json.load(f).get("status")
        except (OSError, ValueError):
            on_disk = None
        if "RUNNING" in (on_disk, entry.get("status")):
            observer.interrupted_event(interrupt_time=now_utc(), status="INTERRUPTED")


def sacred_record(ex):
    folder = getattr(ex.observers[0], "dir", None) if ex.observers else None
    return folder or "none was written"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
