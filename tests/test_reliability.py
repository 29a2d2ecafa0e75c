"""Faults and bad input: a full disk, killed processes, Ctrl-C, damaged checkpoints, progress on
a slow machine."""

import errno
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import main
from config import load_config
from helpers import QUICK, read, run_main, sacred_runs
from utils.errors import ConfigError

SRC = os.path.dirname(main.__file__)


def enospc(path=None):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


class HalfWriter:
    """A file whose writes store half the data, then fail as on a full disk."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        self.f.write(bytes(data)[: len(data) // 2])
        self.f.flush()
        raise enospc(getattr(self.f, "name", None))

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


# --- a full disk ---------------------------------------------------------------------------


def make_observer(tmp_path):
    import datetime

    from utils.records import RecordObserver

    obs = RecordObserver(str(tmp_path))
    now = datetime.datetime.utcnow()
    obs.started_event(
        {"name": "x", "sources": [], "base_dir": str(tmp_path)},
        "main",
        {"hostname": socket.gethostname()},
        now,
        {"seed": 1},
        {},
        None,
    )
    return obs, now


def test_failed_writes_never_truncate_the_record(tmp_path, monkeypatch):
    import utils.files
    import utils.records

    obs, now = make_observer(tmp_path)
    obs.log_metrics({"loss": {"values": [1.0], "steps": [10], "timestamps": [now]}}, {})
    obs.cout = "line one\n"
    obs.save_cout()
    metrics = (tmp_path / "1" / "metrics.json").read_text()
    run = (tmp_path / "1" / "run.json").read_text()

    real_fdopen, real_open = os.fdopen, open
    monkeypatch.setattr(utils.files.os, "fdopen", lambda *a, **k: HalfWriter(real_fdopen(*a, **k)))
    monkeypatch.setattr(utils.records, "open", lambda *a, **k: HalfWriter(real_open(*a, **k)), raising=False)
    with pytest.raises(OSError) as e:
        obs.log_metrics({"loss": {"values": [2.0], "steps": [20], "timestamps": [now]}}, {})
    assert e.value.errno == errno.ENOSPC
    obs.cout = "line one\nline two, longer than the first\n"
    with pytest.raises(OSError):
        obs.save_cout()
    with pytest.raises(OSError):
        obs.heartbeat_event({}, obs.cout, now, None)
    obs.failed_event(now, ["trace"])  # final events report nothing and raise nothing

    # Every file holds what it held before the disk filled, nothing half-written, no temporaries.
    assert (tmp_path / "1" / "metrics.json").read_text() == metrics
    assert (tmp_path / "1" / "run.json").read_text() == run
    assert (tmp_path / "1" / "cout.txt").read_text() == "line one\n"
    assert sorted(os.listdir(tmp_path / "1")) == ["config.json", "cout.txt", "metrics.json", "run.json"]
    assert obs.write_error.errno == errno.ENOSPC

    # Space again: the metrics kept in memory are all written, the first measurement included.
    monkeypatch.undo()
    obs.log_metrics({}, {})
    saved = json.loads((tmp_path / "1" / "metrics.json").read_text())
    assert saved["loss"]["values"] == [1.0, 2.0] and saved["loss"]["steps"] == [10, 20]


def test_full_disk_during_a_checkpoint_stops_the_run_with_one_line(tmp_path, monkeypatch, capsys):
    import utils.checkpoint

    real_open = open
    calls = {"n": 0}

    def open_failing_second_save(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        if str(path).endswith("learner.th"):
            calls["n"] += 1
            if calls["n"] == 2:
                return HalfWriter(f)
        return f

    monkeypatch.setattr(utils.checkpoint, "open", open_failing_second_save, raising=False)
    assert run_main(tmp_path, "qmix", extra=["save_model=True", "save_model_interval=100"]) == 1
    err = capsys.readouterr().err
    assert "error: no space left on the device holding" in err and "learner.th" in err
    assert "Traceback" not in err
    run = sacred_runs(tmp_path)[-1]
    assert read(run, "run.json")["status"] == "FAILED"
    assert "test_return_mean" in read(run, "metrics.json")  # what was recorded survives
    assert "training for" in read(run, "cout.txt")
    models = glob.glob(os.path.join(str(tmp_path), "models", "*"))[0]
    assert sorted(os.listdir(models)) == ["100"]  # the first save; the failed one left nothing


def test_full_disk_while_saving_the_replay_buffer_names_the_file(tmp_path, monkeypatch, capsys):
    # The buffer is streamed to its file (no copy in memory), through torch's zip writer, which
    # turns the OSError into "enforce fail ... unexpected pos": the message must still say why.
    import utils.checkpoint

    real_open = open

    class FullAfter(HalfWriter):  # room for the first few kB: the failing write is torch's own
        def write(self, data):
            if self.f.tell() + len(data) > 4096:
                raise enospc(self.f.name)
            return self.f.write(data)

    def open_failing_buffer(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        return FullAfter(f) if str(path).endswith("buffer.th") else f

    monkeypatch.setattr(utils.checkpoint, "open", open_failing_buffer, raising=False)
    extra = ["save_model=True", "save_model_interval=100", "save_buffer=True"]
    assert run_main(tmp_path, "qmix", extra=extra) == 1
    err = capsys.readouterr().err
    assert "error: no space left on the device holding" in err and "buffer.th" in err, err
    assert "Traceback" not in err and "enforce fail" not in err
    assert read(sacred_runs(tmp_path)[-1], "run.json")["status"] == "FAILED"
    models = glob.glob(os.path.join(str(tmp_path), "models", "*"))[0]
    assert os.listdir(models) == []  # the failed save left nothing half-written


def test_checkpoints_clean_stale_partial_folders_and_follow_the_umask(tmp_path):
    import torch

    from utils.checkpoint import save_checkpoint
    from utils.files import current_umask

    stale = tmp_path / ".500.abcd1234"
    stale.mkdir()
    (stale / "learner.th").write_bytes(b"half")

    class Learner:
        def state_dict(self):
            return {"w": torch.zeros(2)}

    folder = save_checkpoint(str(tmp_path), 600, Learner(), {})
    assert sorted(os.listdir(tmp_path)) == ["600"]
    assert os.stat(folder).st_mode & 0o777 == 0o777 & ~current_umask()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_during_a_checkpoint_save_interrupts_and_keeps_the_last_one(
    tmp_path, monkeypatch, signum
):
    """A handler that raises inside torch.save's zip writer had its KeyboardInterrupt turned into
    a RuntimeError, and a sweep's stopped run was recorded as failed."""
    import torch

    from utils import checkpoint

    class Learner:
        def state_dict(self):
            return {"w": torch.zeros(2)}

    buffer = Learner()
    buffer.state_dict = lambda: {f"x{i}": torch.randn(1000) for i in range(50)}
    checkpoint.save_checkpoint(str(tmp_path), 100, Learner(), {}, buffer=buffer)
    writes, original = [], checkpoint._Writer.write

    def signalled(self, data):
        writes.append(len(data))
        if len(writes) == 3:
            os.kill(os.getpid(), signum)  # its handler runs before this write returns
        return original(self, data)

    monkeypatch.setattr(checkpoint._Writer, "write", signalled)
    # a run's handlers (the tests may run in a script's background, with SIGINT ignored)
    handlers = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: main.raise_interrupt}
    main.forget_interrupts()  # as main does before it installs them
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            checkpoint.save_checkpoint(str(tmp_path), 200, Learner(), {}, buffer=buffer)
        assert {sig: signal.getsignal(sig) for sig in handlers} == handlers  # handlers given back
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert getattr(e.value, "signum", signal.SIGINT) == signum
    assert len(writes) == 3  # the save stopped there, not at the end of the buffer
    assert sorted(os.listdir(tmp_path)) == ["100"]  # the last checkpoint, whole; nothing partial
    assert sorted(os.listdir(tmp_path / "100")) == ["buffer.th", "learner.th", "meta.json"]


# --- damaged checkpoints and bad paths: refused up front --------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    results = tmp_path_factory.mktemp("ckpt")
    assert run_main(results, "qmix", extra=["save_model=True", "save_model_interval=300"]) == 0
    return glob.glob(os.path.join(str(results), "models", "*"))[0]


def copy_checkpoint(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return os.path.join(dst, max(os.listdir(dst), key=int))


@pytest.mark.parametrize(
    "damage,fragment",
    [
        ("truncate", "learner.th' is truncated or not a saved model"),
        ("garbage", "learner.th' is truncated or not a saved model"),
        ("no_meta", "has no meta.json"),
        ("bad_meta", "meta.json' cannot be read"),
    ],
)
def test_damaged_checkpoints_are_refused_before_the_run(checkpoint, tmp_path, damage, fragment):
    step = copy_checkpoint(checkpoint, str(tmp_path / "m"))
    weights, meta = os.path.join(step, "learner.th"), os.path.join(step, "meta.json")
    if damage == "truncate":
        data = Path(weights).read_bytes()
        Path(weights).write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        Path(weights).write_bytes(os.urandom(4096))
    elif damage == "no_meta":
        os.remove(meta)
    else:
        Path(meta).write_text("{not json")
    with pytest.raises(ConfigError, match=fragment):
        load_config(["with", f"checkpoint_path={tmp_path / 'm'}"])
    assert zipfile  # the check reads learner.th as the zip archive torch.save writes


def test_undamaged_checkpoint_passes_the_check(checkpoint):
    cfg = load_config(["with", f"checkpoint_path={checkpoint}", "evaluate=True"])
    assert cfg["checkpoint_path"] == checkpoint


def test_bad_results_paths_are_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="local_results_path=.* is a file; give a folder"):
        load_config(["with", f"local_results_path={f}"])
    with pytest.raises(ConfigError, match="lies under a file"):
        load_config(["with", f"local_results_path={f}/sub"])
    # /sys refuses new entries to every user, root included: a folder that cannot be written
    with pytest.raises(ConfigError, match="local_results_path='/sys/results' cannot be written"):
        load_config(["with", "local_results_path=/sys/results"])


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (
            ["with", "save_replay=True"],
            "save_replay=True: env 'mpe' cannot save replays "
            "(envs that can: sc2, sc2v2, skirmish, skirmish_v2)",
        ),
        (["--env-config=skirmish", "with", "save_replay=True"], "needs evaluate=True"),
    ],
)
def test_replays_that_would_silently_do_nothing_are_refused(argv, fragment):
    with pytest.raises(ConfigError) as e:
        load_config(argv)
    assert fragment in str(e.value)


def test_skirmish_replay_path_is_printed(tmp_path, caplog, capsys):
    assert (
        run_main(
            tmp_path,
            "qmix",
            env="skirmish",
            extra=["env_args.map_name=3m", "save_model=True", "save_model_interval=300"],
        )
        == 0
    )
    models = glob.glob(os.path.join(str(tmp_path), "models", "*"))[0]
    replays = tmp_path / "replays"
    assert (
        run_main(
            tmp_path,
            "qmix",
            env="skirmish",
            extra=[
                "env_args.map_name=3m",
                f"checkpoint_path={models}",
                "evaluate=True",
                "save_replay=True",
                f"env_args.replay_dir={replays}",
            ],
        )
        == 0
    )
    gifs = glob.glob(str(replays / "*.gif"))
    assert len(gifs) == 1
    assert f"saved replay {gifs[0]}" in read(sacred_runs(tmp_path)[-1], "cout.txt")


# --- killed processes, Ctrl-C ----------------------------------------------------------------


_started = []


@pytest.fixture(autouse=True)
def _no_leftover_runs():
    """A failing assertion must not leave a 10M-step run behind (its workers die with it)."""
    yield
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start_run(tmp_path, *extra):
    cmd = [
        sys.executable,
        os.path.join(SRC, "main.py"),
        "--config=qmix",
        "with",
        "t_max=10000000",
        f"local_results_path={tmp_path}",
        "torch_threads=1",
        *extra,
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=listen_to_ctrl_c
    )
    _started.append(proc)
    return proc


def listen_to_ctrl_c():
    """As a run in a terminal's foreground has it: the tests may themselves run in the background
    of a script (as CI may), where SIGINT is ignored and a child inherits that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(predicate, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"  # a zombie has exited


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_give_one_line_and_an_interrupted_record(tmp_path, sig):
    proc = start_run(tmp_path, "runner=parallel", "batch_size_run=2", "env_workers=2")
    assert wait_for(lambda: len(children(proc.pid)) >= 2 and sacred_runs(tmp_path))
    time.sleep(1)
    workers = children(proc.pid)
    proc.send_signal(sig)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + sig
    assert "Traceback" not in err, err
    # one line besides the log (whose records' continuation lines are indented): the closing block
    # comes first, as an [INFO] record
    lines = [ln for ln in err.splitlines() if not ln.startswith(("[INFO", "  "))]
    assert lines == [
        f"interrupted by {sig.name}; the run's record is marked INTERRUPTED: {sacred_runs(tmp_path)[0]}"
    ], err
    assert "run interrupted at t_env" in err and f"  record: {sacred_runs(tmp_path)[0]}" in err
    assert read(sacred_runs(tmp_path)[0], "run.json")["status"] == "INTERRUPTED"
    assert workers and not any(alive(w) for w in workers)


def test_sigusr1_to_a_run_and_its_workers_saves_a_checkpoint_and_stops_it(tmp_path):
    # As a cluster sends it before the time limit, to every process of the job: the workers leave
    # it to the run, which saves at the end of its step and ends INTERRUPTED.
    extra = ["runner=parallel", "batch_size_run=2", "env_workers=2", "save_model=True"]
    proc = start_run(tmp_path, *extra, "save_model_interval=100000000")
    assert wait_for(lambda: len(children(proc.pid)) >= 2 and sacred_runs(tmp_path))
    time.sleep(1)
    workers = children(proc.pid)
    for pid in (proc.pid, *workers):
        os.kill(pid, signal.SIGUSR1)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + signal.SIGUSR1, err
    record = sacred_runs(tmp_path)[0]
    lines = [ln for ln in err.splitlines() if not ln.startswith(("[INFO", "  "))]
    assert lines == [f"stopped by SIGUSR1; the run's record is marked INTERRUPTED: {record}"], err
    (t_saved, models), *more = steps_saved(tmp_path)
    assert not more and t_saved > 0
    assert f"SIGUSR1: saved a checkpoint at t_env {t_saved}; stopping" in err
    assert f"run interrupted at t_env {t_saved}" in err and f"(newest t_env {t_saved})" in err, err
    assert read(record, "run.json")["status"] == "INTERRUPTED"
    assert not any(alive(w) for w in workers)


def signal_during_set_up(monkeypatch, sig, on_interrupt=None):
    """Send `sig` to this process while the run builds its scheme. on_interrupt(exc): what the
    set-up code does with the handler's exception (None: it propagates)."""
    import assembly as run_module

    original = run_module.build_scheme

    def signalled(*args, **kwargs):
        try:
            os.kill(os.getpid(), sig)
            time.sleep(1)  # the handler runs here
        except BaseException as e:
            if on_interrupt is None:
                raise
            on_interrupt(e)
        return original(*args, **kwargs)

    monkeypatch.setattr(run_module, "build_scheme", signalled)


def test_an_interrupt_turned_into_another_error_ends_the_run_interrupted(tmp_path, monkeypatch):
    # An interrupt inside some imports reaches the run as another error (RuntimeError from a
    # dataclass's __set_name__); the run was interrupted all the same.
    def converting(e):
        raise RuntimeError("Error calling __set_name__") from e

    signal_during_set_up(monkeypatch, signal.SIGTERM, converting)
    assert run_main(tmp_path, "qmix") == 128 + signal.SIGTERM
    assert read(sacred_runs(tmp_path)[0], "run.json")["status"] == "INTERRUPTED"


def test_a_record_sacred_leaves_running_is_marked_interrupted(tmp_path, monkeypatch):
    # Anything that cuts short Sacred's handling of an interrupt skips its final event; the
    # record must not stay RUNNING.
    import sacred.run

    signal_during_set_up(monkeypatch, signal.SIGTERM)
    monkeypatch.setattr(sacred.run.Run, "_emit_interrupted", lambda self, status: None)
    assert run_main(tmp_path, "qmix") == 128 + signal.SIGTERM
    record = read(sacred_runs(tmp_path)[0], "run.json")
    assert record["status"] == "INTERRUPTED" and record["stop_time"]


def test_a_repeated_signal_does_not_cut_short_sacreds_end_of_the_run(tmp_path, monkeypatch):
    # A sweep killed with -9 can send its run the death signal twice, ms apart (once per thread of
    # the sweep the run is handed to as the sweep dies). The second must not land inside Sacred's
    # handling of the first, which would skip its interrupted event.
    import sacred.run

    signal_during_set_up(monkeypatch, signal.SIGTERM)
    stop, emitted = sacred.run.Run._stop_heartbeat, []

    def signalled_again(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # the handler runs here
        return stop(self)

    original_emit = sacred.run.Run._emit_interrupted
    monkeypatch.setattr(sacred.run.Run, "_stop_heartbeat", signalled_again)
    monkeypatch.setattr(
        sacred.run.Run,
        "_emit_interrupted",
        lambda self, status: emitted.append(status) or original_emit(self, status),
    )
    assert run_main(tmp_path, "qmix") == 128 + signal.SIGTERM
    assert emitted == ["INTERRUPTED"]  # Sacred's own end of the run, not main's repair
    assert read(sacred_runs(tmp_path)[0], "run.json")["status"] == "INTERRUPTED"


def test_a_signal_repeated_after_a_pause_interrupts_again(monkeypatch):
    # Ctrl-C pressed again later (a run stuck after the first) still raises.
    from utils import processes

    processes.forget_interrupts()
    clock = [100.0]
    monkeypatch.setattr(processes, "_clock", lambda: clock[0])
    with pytest.raises(processes.Interrupted):
        processes.raise_interrupt(signal.SIGINT, None)
    clock[0] += processes.REPEAT_S / 2
    assert processes.raise_interrupt(signal.SIGTERM, None) is None  # the same request
    clock[0] += processes.REPEAT_S
    with pytest.raises(processes.Interrupted) as e:
        processes.raise_interrupt(signal.SIGTERM, None)
    assert e.value.signum == signal.SIGTERM
    processes.forget_interrupts()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupt_swallowed_during_set_up_still_ends_the_run(tmp_path, monkeypatch, sig):
    # A signal whose exception lands in library code with a bare `except:` (or in a finaliser,
    # where Python ignores exceptions) is lost there; the run must not train on regardless.
    signal_during_set_up(monkeypatch, sig, on_interrupt=lambda e: None)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # pytest may run with it ignored
    try:
        rc = run_main(tmp_path, "qmix", extra=["t_max=3000"])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert rc == 128 + sig
    record = sacred_runs(tmp_path)[0]
    assert read(record, "run.json")["status"] == "INTERRUPTED"
    assert "episode" not in read(record, "metrics.json")  # stopped before its first training summary


def test_kill_9_leaves_no_workers_and_a_died_record(tmp_path):
    from utils.files import run_status

    proc = start_run(tmp_path, "runner=parallel", "batch_size_run=3", "env_workers=3")
    assert wait_for(lambda: len(children(proc.pid)) >= 3 and sacred_runs(tmp_path))
    workers = children(proc.pid)
    proc.kill()
    proc.wait()
    assert wait_for(lambda: not any(alive(w) for w in workers), timeout=10)
    run = read(sacred_runs(tmp_path)[0], "run.json")
    assert run["status"] == "RUNNING" and run_status(run) == "DIED"


def test_run_status_tells_dead_runs_apart():
    from utils.files import run_status

    here = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert run_status({"status": "RUNNING", "host": {"hostname": here, "pid": os.getpid()}}) == "RUNNING"
    assert run_status({"status": "RUNNING", "host": {"hostname": here, "pid": dead.pid}}) == "DIED"
    old, now = "2020-01-01T00:00:00.000000", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    assert run_status({"status": "RUNNING", "host": {"hostname": "elsewhere"}, "heartbeat": old}) == "DIED"
    assert run_status({"status": "RUNNING", "host": {"hostname": "elsewhere"}, "heartbeat": now}) == "RUNNING"
    assert run_status({"status": "COMPLETED"}) == "COMPLETED"


def start_sweep(tmp_path, experiment, seeds, preexec_fn):
    """A sweep of endless QMIX runs -> (process, folder of its first run)."""
    spec = {
        "experiment": experiment,
        "config": "qmix",
        "env_config": "mpe",
        "seeds": seeds,
        "workers": 1,
        "overrides": {"t_max": 10000000, "local_results_path": str(tmp_path)},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(spec))
    proc = subprocess.Popen(
        [sys.executable, os.path.join(SRC, "sweep.py"), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
    )
    _started.append(proc)  # its runs end with it
    first = os.path.join(str(tmp_path), "sacred", experiment, "mpe", "simple_spread_v3", "qmix", "1")
    # run.json appears once the run is inside Sacred, whose handlers record the interrupt
    assert wait_for(lambda: os.path.exists(os.path.join(first, "run.json")))
    return proc, first


def only_run_interrupted(first):
    runs = glob.glob(os.path.join(os.path.dirname(first), "[0-9]*"))
    assert len(runs) == 1 and read(runs[0], "run.json")["status"] == "INTERRUPTED"


def test_ctrl_c_stops_a_sweep(tmp_path):
    proc, first = start_sweep(tmp_path, "stop", [1, 2, 3], listen_to_ctrl_c)
    proc.send_signal(signal.SIGINT)  # one Ctrl-C
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [
        "sweep stop interrupted: 0 completed, 1 interrupted, 0 failed, "
        "2 not started (run the sweep again to go on)"
    ], err
    only_run_interrupted(first)


def test_sigusr1_stops_a_sweep_after_its_runs_save_and_it_goes_on_from_there(tmp_path):
    proc, first = start_sweep(tmp_path, "usr1", [1, 2], listen_to_ctrl_c)
    proc.send_signal(signal.SIGUSR1)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "saved and stopped --config=qmix --env-config=mpe seed=1" in out, out
    assert err.strip().splitlines() == [
        "sweep usr1 interrupted: 0 completed, 1 interrupted, 0 failed, "
        "1 not started (run the sweep again to go on)"
    ], err
    only_run_interrupted(first)
    (t_saved, _), *more = steps_saved(tmp_path)  # no checkpoint was due (a tenth of t_max)
    assert not more and t_saved > 0
    listing = subprocess.run(
        [sys.executable, os.path.join(SRC, "sweep.py"), str(tmp_path / "sweep.yaml"), "--dry-run"],
        capture_output=True,
        text=True,
    ).stdout
    assert f"  resume --config=qmix --env-config=mpe seed=1 (from t_env {t_saved}" in listing, listing
    assert "  run    --config=qmix --env-config=mpe seed=2" in listing, listing


def test_a_background_sweep_stops_its_runs_on_sigterm(tmp_path):
    # Started in the background of a script, the sweep and its runs have SIGINT ignored; the sweep
    # still stops its run with SIGINT, and the run still ends INTERRUPTED.
    ignore = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731
    proc, first = start_sweep(tmp_path, "bg", [1, 2], ignore)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "1 interrupted" in err, err
    only_run_interrupted(first)


STOP_DURING_IMPORTS = """
import json, os, signal, sys, threading, time
sys.path.insert(0, {src!r})
from sweeping.backends import INTERRUPTED_CODES, run_local

signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in the background of a script


def term(signum, frame):
    raise KeyboardInterrupt


signal.signal(signal.SIGTERM, term)  # as the sweep does
# the run: still in its imports (no handler of its own yet) when the stop comes
started = {log!r} + ".started"
run = f"open({{started!r}}, 'w').close(); import time; time.sleep(60)"
job = ({{"key": 1}}, [sys.executable, "-c", run], {log!r})


def stop_once_started():
    while not os.path.exists(started):
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)  # to the process, as a user's kill


threading.Thread(target=stop_once_started, daemon=True).start()
start, rcs = time.monotonic(), []
try:
    for _, rc in run_local([job], 1):
        rcs.append(rc)
except KeyboardInterrupt:
    pass
print(json.dumps({{"rcs": rcs, "interrupted": rcs[0] in INTERRUPTED_CODES,
                  "seconds": time.monotonic() - start,
                  "still_deaf": signal.getsignal(signal.SIGINT) is signal.SIG_IGN}}))
"""


def test_a_background_sweep_stops_a_run_still_in_its_imports(tmp_path):
    # Its runs once inherited the ignored SIGINT until main.py listened, so a stop sent during
    # their imports was lost and the run trained on.
    code = STOP_DURING_IMPORTS.format(src=SRC, log=str(tmp_path / "run.log"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    got = json.loads(out.stdout)
    assert got["rcs"] == [-signal.SIGINT] and got["interrupted"], out
    assert got["seconds"] < 30, out  # stopped, not slept out
    assert got["still_deaf"], out  # the sweep itself still ignores the terminal's Ctrl-C


def test_a_run_stopped_before_its_record_counts_as_interrupted(tmp_path, monkeypatch, capsys):
    import sweep

    spec = {"experiment": "early", "config": "qmix", "env_config": "mpe", "seeds": [1, 2], "workers": 1}
    spec["overrides"] = {**dict(o.split("=") for o in QUICK), "local_results_path": str(tmp_path)}
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(spec))

    def stopped_early(jobs, workers, check=None):
        for (run, _cmd, log), rc in zip(jobs, (-signal.SIGINT, -signal.SIGTERM), strict=True):
            yield (run, log), rc

    monkeypatch.setattr(sweep, "run_local", stopped_early)
    assert sweep.main([str(path)]) == 1
    out = capsys.readouterr().out
    assert out.count("interrupted --config=qmix") == 2 and "FAILED" not in out, out
    assert "0 completed, 0 failed, 2 interrupted" in out, out


def steps_saved(results):
    return sorted(
        (int(d), root)
        for root in glob.glob(os.path.join(str(results), "models", "*"))
        for d in os.listdir(root)
        if d.isdigit()
    )


def test_a_stopped_sweep_run_goes_on_from_its_checkpoint(tmp_path):
    spec = {
        "experiment": "resume",
        "config": "qmix",
        "env_config": "mpe",
        "seeds": [1],
        "workers": 1,
        "checkpoint_interval": 100,
        "overrides": {
            "t_max": 10000000,
            **dict(o.split("=") for o in QUICK if not o.startswith("t_max")),
            "local_results_path": str(tmp_path),
        },
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(spec))
    sweep = [sys.executable, os.path.join(SRC, "sweep.py"), str(path)]

    def run_until(n_saved):
        proc = subprocess.Popen(sweep, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _started.append(proc)
        assert wait_for(lambda: len(steps_saved(tmp_path)) >= n_saved)
        # the same sweep started again meanwhile leaves the running run to the first one
        again = subprocess.run([*sweep, "--dry-run"], capture_output=True, text=True).stdout
        assert "1 running now in another process" in again and "  busy   --config=qmix" in again, again
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130

    run_until(2)
    t_saved, first_models = steps_saved(tmp_path)[-1]
    listing = subprocess.run([*sweep, "--dry-run"], capture_output=True, text=True).stdout
    resume = f"  resume --config=qmix --env-config=mpe seed=1 (from t_env {t_saved}"
    assert f"{resume}; its buffer from buffer.th)" in listing
    restart = subprocess.run([*sweep, "--dry-run", "--restart"], capture_output=True, text=True).stdout
    assert "  run    --config=qmix --env-config=mpe seed=1" in restart

    run_until(len(steps_saved(tmp_path)) + 2)  # the resumed run saves twice
    records = glob.glob(str(tmp_path / "sacred" / "resume" / "mpe" / "*" / "qmix" / "[0-9]*"))
    first, second = sorted(records, key=lambda p: int(os.path.basename(p)))
    assert read(second, "config.json")["checkpoint_path"] == os.path.join(first_models, str(t_saved))
    resumed_from = read(second, "info.json")["resumed_from"]
    assert resumed_from["t_env"] == t_saved and resumed_from["buffer_restored"]
    cout = read(second, "cout.txt")
    assert "replay buffer restored: " in cout and f"(t_env {t_saved})" in cout
    a, b = read(first, "metrics.json")["test_return_mean"], read(second, "metrics.json")["test_return_mean"]
    upto = [t for t in a["steps"] if t <= t_saved]
    assert b["steps"][: len(upto)] == upto and b["values"][: len(upto)] == a["values"][: len(upto)]
    assert b["steps"][len(upto)] > t_saved
    # the stopped first run lives on in the second one's record: tables count the seed once
    from utils.results import load_runs

    df = load_runs(str(tmp_path / "sacred"))
    assert set(df["run_dir"]) == {second} and df.attrs["skipped"] == {"SUPERSEDED": 1}
    # and a third go starts from the second run's newest checkpoint
    t_last, last_models = steps_saved(tmp_path)[-1]
    assert last_models != first_models
    listing = subprocess.run([*sweep, "--dry-run"], capture_output=True, text=True).stdout
    assert f"(from t_env {t_last}; its buffer from buffer.th)" in listing


@pytest.mark.parametrize("command", ["sweep", "config"])
def test_a_listing_read_by_a_closed_pipe_ends_without_a_traceback(tmp_path, command):
    """`python src/sweep.py FILE --dry-run | head` and the like end as shell commands do."""
    if command == "sweep":
        spec = {"experiment": "pipe", "config": "qmix", "env_config": "mpe", "seeds": [1, 2]}
        spec["overrides"] = {"local_results_path": str(tmp_path)}
        (tmp_path / "sweep.yaml").write_text(json.dumps(spec))
        argv = [os.path.join(SRC, "sweep.py"), str(tmp_path / "sweep.yaml"), "--dry-run"]
    else:
        argv = [os.path.join(SRC, "config.py"), "--config=inspire_published", "--env-config=skirmish"]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    proc = subprocess.Popen([sys.executable, *argv], **pipes, text=True)
    proc.stdout.close()  # the reader leaves before the command has printed anything
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141 and "Traceback" not in err, err


def test_a_completed_sweep_run_keeps_checkpoints_but_no_buffer(tmp_path):
    import sweep

    spec = {"experiment": "done", "config": "qmix", "env_config": "mpe", "seeds": [1], "workers": 1}
    spec["overrides"] = {**dict(o.split("=") for o in QUICK), "local_results_path": str(tmp_path)}
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(spec))
    assert sweep.main([str(path)]) == 0
    saved = steps_saved(tmp_path)
    # checkpoint_interval auto: a tenth of t_max=300, so 30 env steps apart (every second
    # 25-step episode), and once more at the end
    assert [t for t, _ in saved] == [50, 100, 150, 200, 250, 300, 325]
    assert not glob.glob(os.path.join(str(tmp_path), "models", "*", "*", "buffer.th"))
    assert not glob.glob(os.path.join(str(tmp_path), "models", "*", "*", "buffer_log.npz"))


def test_a_run_another_process_took_after_the_plan_is_not_started(tmp_path):
    import socket

    import sweep
    from sweep_archive import sacred_dir

    spec = {"experiment": "twice", "results": str(tmp_path)}
    mine, theirs, done = ({"key": k, "config": "qmix", "seed": 1} for k in ("aaa", "bbb", "ccc"))
    for key, status in (("bbb", "RUNNING"), ("ccc", "COMPLETED")):  # records of another process
        rec = os.path.join(sacred_dir(spec), key, "1")
        os.makedirs(rec)
        host = {"hostname": socket.gethostname(), "pid": os.getpid()}  # a live process
        with open(os.path.join(rec, "run.json"), "w") as f:
            json.dump({"status": status, "host": host}, f)
        with open(os.path.join(rec, "config.json"), "w") as f:
            json.dump({"sweep_key": key}, f)
    assert sweep.taken(spec, mine) is None
    assert sweep.taken(spec, theirs) == "running now in another process"
    assert sweep.taken(spec, done) == "completed meanwhile by another process"
    marker = tmp_path / "started"
    cmd = [sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x')"]
    jobs = [(r, cmd, str(tmp_path / f"{r['key']}.log")) for r in (mine, theirs, done)]
    out = {run["key"]: rc for (run, _), rc in sweep.run_local(jobs, 1, check=lambda r: sweep.taken(spec, r))}
    assert out == {
        "aaa": 0,
        "bbb": "running now in another process",
        "ccc": "completed meanwhile by another process",
    }
    assert marker.read_text() == "x"  # only the free run started
    assert not os.path.exists(tmp_path / "bbb.log")


# --- messages and progress ---------------------------------------------------------------------


def test_plot_names_a_missing_folder(tmp_path):
    import plot

    with pytest.raises(SystemExit, match="no such folder: .*nowhere"):
        plot.main([str(tmp_path / "nowhere")])


def test_sweep_yaml_errors_name_the_line(tmp_path, capsys):
    import sweep

    path = tmp_path / "s.yaml"
    path.write_text("experiment: x\nseeds: [1, 2\nconfig: qmix\n")
    assert sweep.main([str(path), "--dry-run"]) == 2
    assert "is not valid YAML (line 3, column 7)" in capsys.readouterr().err


def test_a_sweep_file_retargeted_with_env_config_keeps_its_records_apart(tmp_path, capsys):
    import sweep

    path = tmp_path / "s.yaml"
    path.write_text(
        "experiment: differ_2s3z\nconfig: qmix\nenv_config: skirmish\narchive: bench/runs/differ_2s3z\n"
        "grid: {env_args.map_name: [2s3z]}\nseeds: [1, 2]\n"
    )
    # (sweep.load would also check every run's config, which for sc2 needs SMAC installed)
    spec = sweep.spec_from_args(sweep.parse_args([str(path), "--env-config", "sc2"]))
    assert spec["experiment"] == "differ_2s3z_sc2" and spec["archive"] == "bench/runs/differ_2s3z_sc2"
    runs = sweep.expand(spec)
    assert {r["env_config"] for r in runs} == {"sc2"}
    own = sweep.expand(sweep.load_spec(str(path)))
    assert not {r["key"] for r in runs} & {r["key"] for r in own}  # other runs, not the file's
    same = sweep.spec_from_args(sweep.parse_args([str(path), "--env-config", "skirmish"]))
    assert same["experiment"] == "differ_2s3z" and same["archive"] == "bench/runs/differ_2s3z"
    path.write_text("experiment: x\nconfig: qmix\ngrid: {env_config: [mpe, gymma]}\n")
    assert sweep.main([str(path), "--env-config", "sc2", "--dry-run"]) == 2
    assert "varies env_config in its grid" in capsys.readouterr().err


def test_overrides_after_a_sweep_file_make_other_runs_of_the_same_sweep(tmp_path, capsys):
    import sweep

    path = tmp_path / "s.yaml"
    path.write_text(
        "experiment: sharing\nenv_config: skirmish\ngrid: {config: [qmix, vdn]}\nseeds: [1, 2]\n"
        "overrides: {env_args.map_name: 2s3z, t_max: 1000}\n"
    )
    own = sweep.expand(sweep.load_spec(str(path)))
    spec = sweep.spec_from_args(sweep.parse_args([str(path), "env_args.map_name=MMM2", "lr=0.001"]))
    runs = sweep.expand(spec)
    assert [r["overrides"] for r in runs] == [{"env_args.map_name": "MMM2", "t_max": 1000, "lr": 0.001}] * 4
    assert [(r["config"], r["seed"]) for r in runs] == [(r["config"], r["seed"]) for r in own]
    assert not {r["key"] for r in runs} & {r["key"] for r in own}  # told apart from the file's runs
    mixed = sweep.parse_args([str(path), "--dry-run", "env_args.map_name=MMM2", "--seeds", "1", "lr=0.001"])
    assert mixed.dry_run and mixed.overrides == ["env_args.map_name=MMM2", "lr=0.001"]  # options between
    assert sweep.main([str(path), "config=qmix", "--dry-run"]) == 2
    assert "varies config in its grid; edit the grid instead" in capsys.readouterr().err
    assert sweep.main([str(path), "local_results_path=x", "--dry-run"]) == 2
    assert "local_results_path is the sweep's own" in capsys.readouterr().err


def test_launch_settings_reach_every_run_but_not_its_key(tmp_path, capsys):
    # `launch` changes how runs go (their env processes), so a sweep may change it part way
    # through and still find its runs done or stopped under the same keys.
    import sweep
    from sweeping.plan import command

    body = "experiment: e\nenv_config: skirmish\ngrid: {config: [qmix, vdn]}\nseeds: [1, 2]\n"
    body += "overrides: {env_args.map_name: 3m, t_max: 1000, log_interval: 500}\n"
    plain, launched = tmp_path / "plain.yaml", tmp_path / "launched.yaml"
    plain.write_text(body)
    launched.write_text(body + "launch: {env_workers: 0, torch_threads: 1}\n")
    assert sweep.main([str(launched), "--dry-run"]) == 0
    assert "every run launched with env_workers=0 torch_threads=1" in capsys.readouterr().out
    spec = sweep.load_spec(str(launched))
    runs = sweep.expand(spec)
    assert [r["key"] for r in runs] == [r["key"] for r in sweep.expand(sweep.load_spec(str(plain)))]
    argv = command(runs[0], spec)
    assert "env_workers=0" in argv and "torch_threads=1" in argv
    for extra, said in [
        ("launch: {lr: 0.001}\n", "`launch` in .* cannot set lr: it holds only keys that change how runs go"),
        ("launch: {sweep_key: x}\n", "cannot set sweep_key"),
        ("launch: {log_interval: 5}\n", "sets log_interval under `launch` and under `overrides` or `grid`"),
        ("launch: [env_workers]\n", "`launch` in .* must map keys to values"),
    ]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(body + extra)
        assert sweep.main([str(bad), "--dry-run"]) == 2
        assert re.search(said, capsys.readouterr().err), extra
    assert sweep.main([str(launched), "env_workers=2", "--dry-run"]) == 2
    assert "sets env_workers under `launch`; edit it there" in capsys.readouterr().err


SWEEP_FILES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "sweeps", "*.yaml")))


@pytest.mark.parametrize("path", SWEEP_FILES, ids=os.path.basename)
def test_every_shipped_sweep_file_names_real_configs_and_keys(path, monkeypatch, capsys):
    """A sweep file is only read when someone starts it, hours later; --dry-run checks its
    config and env-config names and every override key against config/ now."""
    import sweep

    monkeypatch.chdir(os.path.join(os.path.dirname(__file__), ".."))
    code, err = sweep.main([path, "--dry-run"]), capsys.readouterr().err
    if code == 2 and "not installed" in err:  # an optional env's package, as test_readme allows
        pytest.skip(err.strip().splitlines()[-1])
    assert code == 0, err


def test_progress_by_the_clock_and_summaries_show_the_test_just_run(tmp_path, monkeypatch):
    import run

    monkeypatch.setattr(run, "FIRST_PROGRESS_S", 0)
    monkeypatch.setattr(run, "PROGRESS_EVERY_S", 0)
    argv = [
        "--config=qmix",
        "--env-config=mpe",
        "with",
        f"local_results_path={tmp_path}",
        "seed=1",
        *QUICK,
        "t_max=400",
        "log_interval=200",
        "test_interval=100",
    ]
    assert main.main(argv) == 0
    path = sacred_runs(tmp_path)[0]
    cout = read(path, "cout.txt")
    # a progress line after every runner call, although a summary is due only every 200 steps
    assert cout.count(" steps/s | left ") >= 10
    m = read(path, "metrics.json")
    tests, summaries = m["test_return_mean"]["steps"], m["episode"]["steps"]
    assert summaries and set(summaries) <= set(tests), (summaries, tests)
    assert tests[0] <= 25 and all(b - a <= 100 + 25 for a, b in zip(tests, tests[1:], strict=False))


def test_runs_use_one_torch_thread_by_default(tmp_path):
    import torch

    assert load_config([])["torch_threads"] == 1
    torch.set_num_threads(2)
    try:
        assert run_main(tmp_path, "qmix", extra=["t_max=30"]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(1)


def test_runs_of_a_killed_sweep_end_interrupted(tmp_path):
    spec = {
        "experiment": "orphan",
        "config": "qmix",
        "env_config": "mpe",
        "seeds": [1],
        "workers": 1,
        "overrides": {"t_max": 10000000, "local_results_path": str(tmp_path)},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(spec))
    proc = subprocess.Popen(
        [sys.executable, os.path.join(SRC, "sweep.py"), str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    run = os.path.join(str(tmp_path), "sacred", "orphan", "mpe", "simple_spread_v3", "qmix", "1", "run.json")
    assert wait_for(lambda: os.path.exists(run))
    proc.kill()  # kill -9: the sweep cannot tell its runs anything
    proc.wait()

    def status():
        with open(run) as f:
            return json.load(f)["status"]

    assert wait_for(lambda: status() == "INTERRUPTED", timeout=30), status()


def test_sweep_checkpointing_keeps_the_runs_own_choices(tmp_path):
    import sweep

    spec = {"experiment": "ck", "config": "qmix", "seeds": [1], "grid": {"save_buffer": [False, True]}}
    spec["overrides"] = {"t_max": 1000, "local_results_path": str(tmp_path)}
    runs = sweep.expand(spec)
    extra = [sweep.checkpointing(load_config(sweep.command(r, spec)[2:]), r, spec) for r in runs]
    # checkpoints every tenth of t_max; a save_buffer the grid sets is the run's, not overridden
    assert extra == [["save_model=True", "save_model_interval=100"]] * 2
    assert [
        load_config(sweep.command({**r, "checkpointing": e}, spec)[2:])["save_buffer"]
        for r, e in zip(runs, extra, strict=True)
    ] == [False, True]
    spec.pop("grid")
    (run,) = sweep.expand(spec)
    assert sweep.checkpointing(load_config(sweep.command(run, spec)[2:]), run, spec)[-1] == "save_buffer=True"


def test_a_stopped_sweep_run_goes_on_from_the_archive_on_a_fresh_checkout(tmp_path):
    """Results folders stay on their machine; the archive carries a stopped run's newest
    checkpoint (no buffer) and record, so a sweep elsewhere goes on from it."""
    archive = tmp_path / "archive"

    def spec_for(machine):
        spec = {
            "experiment": "handoff",
            "config": "qmix",
            "env_config": "mpe",
            "seeds": [1],
            "workers": 1,
            "checkpoint_interval": 100,
            "archive": str(archive),
            "overrides": {
                "t_max": 10000000,
                **dict(o.split("=") for o in QUICK if not o.startswith("t_max")),
                "local_results_path": str(tmp_path / machine),
            },
        }
        path = tmp_path / f"{machine}.yaml"
        path.write_text(json.dumps(spec))
        return [sys.executable, os.path.join(SRC, "sweep.py"), str(path)]

    def run_until(sweep, results, n_saved):
        proc = subprocess.Popen(sweep, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _started.append(proc)
        assert wait_for(lambda: len(steps_saved(results)) >= n_saved)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        run_logs = glob.glob(str(results / "logs" / "sweeps" / "*" / "*.log"))
        logs = "".join(Path(f).read_text() for f in run_logs)  # why a run failed, if one did
        assert proc.returncode == 130, err + logs
        assert "kept the newest checkpoint of 1 stopped runs" in out, out + logs

    first = spec_for("first")
    run_until(first, tmp_path / "first", 2)
    (kept,) = glob.glob(str(archive / "unfinished" / "qmix_seed1_*"))
    t_saved = read(kept, "where.json")["t_env"]
    assert t_saved == steps_saved(tmp_path / "first")[-1][0]
    assert sorted(os.listdir(os.path.join(kept, "checkpoint"))) == [
        "buffer_log.npz",
        "learner.th",
        "meta.json",
        "run_state.th",
    ]  # no buffer.th: the buffer travels as its log
    assert read(os.path.join(kept, "record"), "run.json")["status"] == "INTERRUPTED"
    archived_curve = read(os.path.join(kept, "record"), "metrics.json")["test_return_mean"]

    # as if a default had changed since the checkpoint was saved: the run goes on with its own
    meta_path = os.path.join(kept, "checkpoint", "meta.json")
    meta = read(os.path.join(kept, "checkpoint"), "meta.json")
    meta["config"]["gamma"] = 0.5
    Path(meta_path).write_text(json.dumps(meta))

    second = spec_for("second")  # a fresh checkout: nothing in its results folder
    listing = subprocess.run([*second, "--dry-run"], capture_output=True, text=True).stdout
    resume = f"  resume --config=qmix --env-config=mpe seed=1 (from t_env {t_saved}, in the archive"
    assert f"{resume}; its buffer played again from buffer_log.npz)" in listing
    log = Path(kept, "checkpoint", "buffer_log.npz")
    saved_log = log.read_bytes()
    log.unlink()  # as a checkpoint from before the log, or of a run whose env gives no state
    without = subprocess.run([*second, "--dry-run"], capture_output=True, text=True).stdout
    assert f"{resume}; no buffer kept: it refills, and the run is not the uninterrupted one)" in without
    log.write_bytes(saved_log)
    assert "will be refused" not in listing
    # a value the sweep passes (batch_size=4) that the checkpoint was not saved with: said before
    # the sweep starts
    Path(meta_path).write_text(json.dumps({**meta, "config": {**meta["config"], "batch_size": 8}}))
    refused = subprocess.run([*second, "--dry-run"], capture_output=True, text=True).stdout
    assert "will be refused (--restart starts afresh): a resumed run keeps the settings" in refused
    assert "batch_size=4 (saved: 8)" in refused
    Path(meta_path).write_text(json.dumps(meta))
    assert not os.path.exists(tmp_path / "second")
    run_until(second, tmp_path / "second", 2)  # the restored step and one new save
    records = glob.glob(str(tmp_path / "second" / "sacred" / "handoff" / "mpe" / "*" / "qmix" / "[0-9]*"))
    restored, resumed = sorted(records, key=lambda p: int(os.path.basename(p)))
    assert read(restored, "run.json")["status"] == "INTERRUPTED"
    info = read(resumed, "info.json")["resumed_from"]
    assert info["t_env"] == t_saved and info["points_carried"] > 0
    assert info["buffer_restored"] and info["buffer_rebuilt"]  # played again from the archived log
    assert "config_changed" not in info and info["exact"], info
    assert read(resumed, "config.json")["gamma"] == 0.5
    curve = read(resumed, "metrics.json")["test_return_mean"]
    upto = [t for t in archived_curve["steps"] if t <= t_saved]
    assert (
        curve["steps"][: len(upto)] == upto
        and curve["values"][: len(upto)] == archived_curve["values"][: len(upto)]
    )
    # the archive now holds the further checkpoint, for the next machine
    assert read(kept, "where.json")["t_env"] == steps_saved(tmp_path / "second")[-1][0] > t_saved


def test_config_changes_name_training_settings_only():
    from utils.values import config_changes, describe_changes

    saved = {"lr": 0.1, "t_max": 100, "n_agents": 3, "env_args": {"key": "a", "seed": 1}}
    current = {"lr": 0.2, "t_max": 500, "env_args": {"key": "a", "seed": 1, "new_flag": True}}
    changes = config_changes(saved, current)
    # t_max is bookkeeping; n_agents (filled in by a run, absent from a loaded config) is not asked
    assert changes == {"lr": (0.1, 0.2), "env_args.new_flag": ("(not set)", True)}
    assert describe_changes(changes) == "env_args.new_flag: '(not set)' -> True; lr: 0.1 -> 0.2"
    assert config_changes(saved, saved) == {}


def test_an_archived_checkpoint_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    # A stopped sweep replaces a run's archived checkpoint; a copy cut short (a second signal, kill
    # -9) must keep the previous one, or a fresh checkout would start that run from zero.
    import sweep_archive

    spec = {"archive": str(tmp_path / "archive")}
    dest = tmp_path / "archive" / "unfinished" / "qmix_seed1_k"

    def fill(t_env, cut_short=False):
        def write(folder):
            os.makedirs(os.path.join(folder, "checkpoint"))
            Path(folder, "checkpoint", "learner.th").write_text(str(t_env))
            if cut_short:
                raise KeyboardInterrupt
            Path(folder, "where.json").write_text(json.dumps({"key": "k", "t_env": t_env}))

        return write

    def archived():
        where = sweep_archive.archived_unfinished(spec)["k"]
        assert Path(where["folder"], "checkpoint", "learner.th").read_text() == str(where["t_env"])
        return where["t_env"]

    sweep_archive._write_whole(str(dest), fill(100))
    assert archived() == 100
    with pytest.raises(KeyboardInterrupt):
        sweep_archive._write_whole(str(dest), fill(200, cut_short=True))
    assert archived() == 100  # the previous copy, whole
    sweep_archive._write_whole(str(dest), fill(200))
    assert archived() == 200 and sorted(os.listdir(dest.parent)) == [dest.name]  # nothing left over

    # killed between its two renames: the new copy still counts, and the next write keeps it
    renames = []
    real_rename = os.rename

    def killed_after_first(a, b):
        renames.append(a)
        if len(renames) == 2:
            raise KeyboardInterrupt
        real_rename(a, b)

    monkeypatch.setattr(sweep_archive.os, "rename", killed_after_first)
    with pytest.raises(KeyboardInterrupt):
        sweep_archive._write_whole(str(dest), fill(300))
    monkeypatch.setattr(sweep_archive.os, "rename", real_rename)
    assert not dest.exists() and archived() == 300
    with pytest.raises(KeyboardInterrupt):
        sweep_archive._write_whole(str(dest), fill(400, cut_short=True))
    assert archived() == 300 and dest.exists()


def test_runs_started_in_the_same_second_keep_their_own_checkpoints(tmp_path, monkeypatch):
    # A sweep over scenarios starts runs of one config and seed together; each is record 1 in its
    # own folder. They once shared one checkpoint folder, and one run's save removed the other's.
    import run as run_module

    monkeypatch.setattr(run_module.time, "strftime", lambda fmt, *a: "20260101-000000")
    scenarios = ["simple_spread_v3", "simple_speaker_listener_v4"]
    for scenario in scenarios:
        extra = [f"env_args.scenario={scenario}", "save_model=True", "save_model_interval=100"]
        assert run_main(tmp_path, "qmix", extra=extra) == 0
    assert [os.path.basename(r) for r in sacred_runs(tmp_path)] == ["1", "1"]
    folders = sorted(glob.glob(str(tmp_path / "models" / "*")))
    assert len(folders) == 2
    for folder in folders:
        metas = [read(step, "meta.json") for step in glob.glob(os.path.join(folder, "[0-9]*"))]
        assert len(metas) >= 3
        assert len({m["config"]["env_args"]["scenario"] for m in metas}) == 1  # one run's only


# --- which code a run ran on -----------------------------------------------------------------


def test_record_names_the_commit_and_whether_tracked_files_differ(tmp_path, monkeypatch):
    import shutil
    import subprocess

    from utils.code_version import COMMIT_VARIABLE, code_version

    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
    )
    for cmd in (["init", "-q"], ["add", "a.py"], ["commit", "-q", "-m", "one"]):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True, env=env)
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert code_version(str(repo)) == {"commit": head, "dirty": False}
    (repo / "a.py").write_text("x = 2\n")
    assert code_version(str(repo)) == {"commit": head, "dirty": True}
    # A copy without history: the commit it was made from, when the copier says so.
    copy = tmp_path / "copy"
    copy.mkdir()
    monkeypatch.setenv(COMMIT_VARIABLE, head)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert code_version(str(copy)) == {"commit": head, "dirty": None}
    monkeypatch.delenv(COMMIT_VARIABLE)
    assert code_version(str(copy)) == {"commit": None, "dirty": None}

    obs, _ = make_observer(tmp_path / "records")
    run = json.loads((tmp_path / "records" / "1" / "run.json").read_text())
    assert set(run["host"]["code"]) == {"commit", "dirty"}
