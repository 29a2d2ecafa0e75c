"""main.py end to end: Sacred records, checkpoints, resume, evaluate, determinism."""

import glob
import os

import pytest

from config import available
from helpers import METRICS, assert_trains, brief_training_argv, read, run_main, sacred_runs


@pytest.mark.slow
@pytest.mark.parametrize("alg", available("algs"))
def test_every_algorithm_config_trains(tmp_path, alg):
    # Every file in config/algs/, without a list to keep up to date: a short run on MPE that
    # completes, logs a finite loss and changes the agent network. Configs with parallel or
    # vector runners play 2 envs at a time (on-policy learners train on multiples of it), in at
    # most 2 minibatches of the 2 episodes.
    from config import CONFIG_DIR, load_yaml
    from modules.agents import REGISTRY as agent_REGISTRY

    cfg = load_yaml(os.path.join(CONFIG_DIR, "algs", f"{alg}.yaml"))
    extra = ["batch_size_run=2"] if cfg.get("runner") in ("parallel", "vector") else []
    if cfg.get("num_mini_batch", 1) > 2:
        extra.append("num_mini_batch=2")
    argv = brief_training_argv(alg, "transformer_n_layers=1", *extra)
    from modules.mixers import REGISTRY as mixer_REGISTRY

    mixer = mixer_REGISTRY[cfg["mixer"]] if cfg.get("mixer") else None
    smac_like = getattr(mixer, "needs_agent_state", False)  # StarCraft-like envs only
    if smac_like or getattr(agent_REGISTRY[cfg.get("agent", "rnn")], "needs_entities", False):
        argv = [a for a in argv if not a.startswith("env_args.max_cycles")]
        argv[1:1] = ["--env-config=skirmish"]
        argv = [a for a in argv if a != "--env-config=mpe"] + ["env_args.map_name=3m"]
    assert_trains(tmp_path, argv)


@pytest.mark.parametrize("alg", ["qmix", "vdn", "iql"])
@pytest.mark.parametrize("runner", ["episode", "parallel"])
def test_short_runs_write_sacred_record(tmp_path, alg, runner):
    extra = ["runner=parallel", "batch_size_run=2"] if runner == "parallel" else []
    assert run_main(tmp_path, alg, extra=extra) == 0
    runs = sacred_runs(tmp_path)
    assert len(runs) == 1
    assert runs[0].startswith(os.path.join(str(tmp_path), "sacred", "mpe", "simple_spread_v3", alg))
    for f in ("config.json", "run.json", "metrics.json", "cout.txt"):
        assert os.path.isfile(os.path.join(runs[0], f)), f
    assert read(runs[0], "run.json")["status"] == "COMPLETED"
    metrics = read(runs[0], "metrics.json")
    assert set(metrics) >= METRICS, METRICS - set(metrics)
    assert read(runs[0], "config.json")["runner"] == runner
    assert "t_env" in read(runs[0], "cout.txt")


def test_individual_rewards_log_per_agent_returns(tmp_path):
    extra = ["common_reward=False", "env_args.scenario=simple_adversary_v3"]
    assert run_main(tmp_path, "iql", extra=extra) == 0
    metrics = read(sacred_runs(tmp_path)[0], "metrics.json")
    for i in range(3):
        assert f"agent{i}_return_mean" in metrics and f"test_agent{i}_return_mean" in metrics


def test_same_seed_same_metrics(tmp_path):
    for _ in range(2):
        assert run_main(tmp_path, "qmix", extra=["runner=parallel", "batch_size_run=2"], seed=5) == 0
    assert run_main(tmp_path, "qmix", extra=["runner=parallel", "batch_size_run=2"], seed=6) == 0
    a, b, c = (read(r, "metrics.json") for r in sacred_runs(tmp_path))
    values = lambda m: {k: v["values"] for k, v in m.items()}  # noqa: E731
    assert values(a) == values(b)
    assert values(a)["loss"] != values(c)["loss"]


def test_checkpoint_resume_and_evaluate(tmp_path):
    assert run_main(tmp_path, "qmix", extra=["save_model=True", "save_model_interval=100"]) == 0
    models = glob.glob(os.path.join(str(tmp_path), "models", "*"))
    assert len(models) == 1
    steps = sorted(int(d) for d in os.listdir(models[0]) if d.isdigit())
    assert steps[0] >= 100 and steps[-1] >= 300 and len(steps) >= 3
    assert not [d for d in os.listdir(models[0]) if not d.isdigit()]  # no temporary folders left
    assert {"learner.th", "meta.json"} <= set(os.listdir(os.path.join(models[0], str(steps[-1]))))

    # Resume from the middle checkpoint: training continues from its t_env, and the new record
    # starts with the first run's metrics up to there, on the first run's test schedule.
    first = sacred_runs(tmp_path)[0]
    mid = steps[len(steps) // 2]
    assert (
        run_main(tmp_path, "qmix", extra=[f"checkpoint_path={models[0]}", f"load_step={mid}", "t_max=500"])
        == 0
    )
    resumed = sacred_runs(tmp_path)[-1]
    before, after = read(first, "metrics.json"), read(resumed, "metrics.json")
    for name in ("return_mean", "test_return_mean", "loss"):
        carried = [
            (t, v) for t, v in zip(after[name]["steps"], after[name]["values"], strict=True) if t <= mid
        ]
        assert carried and carried == [
            (t, v) for t, v in zip(before[name]["steps"], before[name]["values"], strict=True) if t <= mid
        ], name
    ts = after["return_mean"]["steps"]
    assert max(ts) >= 500 and [t for t in ts if t > mid]
    tests = after["test_return_mean"]["steps"]
    assert [t // 100 for t in tests if t > mid] == list(range(mid // 100 + 1, 6))  # no extra test at mid
    assert f"(t_env {mid})" in read(resumed, "cout.txt")
    info = read(resumed, "info.json")["resumed_from"]
    assert info["t_env"] == mid and os.path.samefile(info["record"], first) and not info["buffer_restored"]
    assert "config_changed" not in info  # t_max, checkpoint_path and load_step are not training settings
    assert "no replay buffer (it was saved with save_buffer=False)" in read(resumed, "cout.txt")

    # Evaluate only: test episodes from the latest checkpoint, no training.
    assert (
        run_main(tmp_path, "qmix", extra=[f"checkpoint_path={models[0]}", "evaluate=True", "test_nepisode=3"])
        == 0
    )
    metrics = read(sacred_runs(tmp_path)[-1], "metrics.json")
    assert "test_return_mean" in metrics and "loss" not in metrics and "return_mean" not in metrics
    assert metrics["test_return_mean"]["steps"] == [steps[-1]]


def test_resume_restores_the_replay_buffer_kept_by_the_newest_checkpoint(tmp_path):
    import torch

    extra = ["save_model=True", "save_model_interval=100", "save_buffer=True"]
    assert run_main(tmp_path, "qmix", extra=extra) == 0
    root = glob.glob(os.path.join(str(tmp_path), "models", "*"))[0]
    steps = sorted(int(d) for d in os.listdir(root) if d.isdigit())
    kept = [s for s in steps if os.path.isfile(os.path.join(root, str(s), "buffer.th"))]
    assert len(steps) >= 3 and kept == [steps[-1]]  # only the newest keeps one
    logs = [s for s in steps if os.path.isfile(os.path.join(root, str(s), "buffer_log.npz"))]
    assert logs == [steps[-1]]  # and its log
    saved = torch.load(os.path.join(root, str(steps[-1]), "buffer.th"), weights_only=True)
    n = saved["episodes_in_buffer"]
    assert n == steps[-1] // 25 and len(saved["rows"]) == n
    held = sum(len(part) for part in saved["steps"]["obs"])
    assert held == int(saved["rows"].sum()) == 26 * n  # the steps played only (25 and the last obs)

    resume = [f"checkpoint_path={root}", "t_max=400", "batch_size=8", "resume_override=True"]
    assert run_main(tmp_path, "qmix", extra=resume) == 0
    cout = read(sacred_runs(tmp_path)[-1], "cout.txt")
    assert f"replay buffer restored: {n} episodes" in cout
    # a training setting changed on the way: said, and kept in the record
    before = read(sacred_runs(tmp_path)[0], "config.json")["batch_size"]
    assert read(sacred_runs(tmp_path)[-1], "info.json")["resumed_from"]["config_changed"] == {
        "batch_size": [before, 8]
    }
    assert f"so this run's curve mixes the two: batch_size: {before} -> 8" in cout
    # batch_size 8 > the 3 episodes the resumed run plays: it would not train on an empty buffer;
    # with the 13 restored ones it trains at once.
    loss = read(sacred_runs(tmp_path)[-1], "metrics.json")["loss"]["steps"]
    assert [t for t in loss if t > steps[-1]], loss


def _stop_after_checkpoint_at(monkeypatch, t):
    """Interrupt runs right after the first checkpoint at or after env step t, as a sweep's
    SIGTERM would."""
    import run

    save = run.save_model

    def save_then_stop(args, runner, *rest, **kwargs):
        save(args, runner, *rest, **kwargs)
        if runner.t_env >= t:
            raise KeyboardInterrupt

    monkeypatch.setattr(run, "save_model", save_then_stop)
    return lambda: monkeypatch.setattr(run, "save_model", save)


def _whole_and_stopped(tmp_path, monkeypatch, alg, env, argv):
    """The run once straight through (tmp_path/whole) and once stopped after its checkpoint at
    200 steps (tmp_path/parts). -> the stopped run's models folder."""
    assert run_main(tmp_path / "whole", alg, env, extra=argv) == 0
    restore = _stop_after_checkpoint_at(monkeypatch, 200)
    assert run_main(tmp_path / "parts", alg, env, extra=argv) == 130
    restore()
    return glob.glob(os.path.join(str(tmp_path / "parts"), "models", "*"))[0]


def _curves(record):
    return {k: (v["steps"], v["values"]) for k, v in read(record, "metrics.json").items()}


@pytest.mark.parametrize(
    "alg,env,extra",
    [
        ("qmix", "mpe", ["train_interval_steps=10"]),  # updates owed across the stop
        ("differ_qmix", "mpe", ["runner=parallel", "batch_size_run=2"]),  # env streams over pipes
        ("qmix", "mpe", ["runner=vector", "batch_size_run=2"]),  # MPE's batched NumPy port
        ("mappo", "mpe", ["batch_size_run=2"]),  # on-policy: no replay buffer
        ("maddpg", "mpe", []),
        ("qmix", "skirmish_v2", ["env_args.map_name=protoss_5_vs_5"]),  # four streams per env
        ("per_qmix", "skirmish", ["env_args.map_name=3m"]),  # priorities in the buffer
        ("inspire_qmix", "skirmish", ["env_args.map_name=3m", "share_to=sight"]),  # the sharer's stream
        ("inspire_published", "skirmish", ["env_args.map_name=3m"]),  # its draws, pos in the buffer
        ("kalei_qmix", "mpe", ["batch_size_run=2", "kalei_reset_interval=50"]),  # masks, resets, history
        ("ices_qmix", "skirmish_ices", ["env_args.map_name=3m", "batch_size_run=2"]),
        ("ices_qplex", "skirmish_ices", ["env_args.map_name=3m"]),  # 2 updates a call
    ],
)
def test_a_run_stopped_and_resumed_repeats_the_uninterrupted_run(tmp_path, monkeypatch, alg, env, extra):
    # The same seed run once straight through and once stopped after a checkpoint and resumed
    # from it: every logged value is the same, at the same steps.
    argv = ["save_model=True", "save_model_interval=100", "save_buffer=True", "t_max=400", *extra]
    root = _whole_and_stopped(tmp_path, monkeypatch, alg, env, argv)
    assert run_main(tmp_path / "parts", alg, env, extra=[*argv, f"checkpoint_path={root}"]) == 0
    whole, (stopped, resumed) = sacred_runs(tmp_path / "whole")[0], sacred_runs(tmp_path / "parts")
    assert read(stopped, "run.json")["status"] == "INTERRUPTED"
    info = read(resumed, "info.json")["resumed_from"]
    assert info["exact"] and 200 <= info["t_env"] < 300, info
    assert _curves(resumed) == _curves(whole)


def test_a_run_resumed_without_env_worker_processes_repeats_the_uninterrupted_run(tmp_path, monkeypatch):
    # env_workers is how the envs are played, not what: a run begun with worker processes may go
    # on with its envs in the main process (env_workers=0) and still repeat the uninterrupted run.
    argv = ["save_model=True", "save_model_interval=100", "save_buffer=True", "t_max=400"]
    argv += ["env_args.map_name=3m", "runner=parallel", "batch_size_run=2"]
    root = _whole_and_stopped(tmp_path, monkeypatch, "ices_qmix", "skirmish_ices", [*argv, "env_workers=2"])
    extra = [*argv, "env_workers=0", f"checkpoint_path={root}"]
    assert run_main(tmp_path / "parts", "ices_qmix", "skirmish_ices", extra=extra) == 0
    whole, (_, resumed) = sacred_runs(tmp_path / "whole")[0], sacred_runs(tmp_path / "parts")
    assert read(whole, "config.json")["env_workers"] == 2 and read(resumed, "config.json")["env_workers"] == 0
    info = read(resumed, "info.json")["resumed_from"]
    assert info["exact"] and "config_changed" not in info, info
    assert _curves(resumed) == _curves(whole)


def test_sigusr1_saves_off_the_checkpoint_grid_and_the_resumed_run_repeats_the_uninterrupted_one(
    tmp_path, monkeypatch
):
    # SIGUSR1 (a cluster's warning, a sweep stopped between sessions) saves at the end of the step
    # under way, wherever that falls, and the run goes on from there as if never stopped.
    import signal

    import run

    argv = ["save_model=True", "save_model_interval=100", "save_buffer=True", "t_max=400"]
    assert run_main(tmp_path / "whole", extra=argv) == 0
    draw = run.draw_batch

    def signalled(args, buffer, t_env=0):
        if t_env >= 230 and not signalled.sent:
            signalled.sent = True
            os.kill(os.getpid(), signal.SIGUSR1)  # its handler only takes note
        return draw(args, buffer, t_env)

    signalled.sent = False
    monkeypatch.setattr(run, "draw_batch", signalled)
    assert run_main(tmp_path / "parts", extra=argv) == 128 + signal.SIGUSR1
    monkeypatch.setattr(run, "draw_batch", draw)
    root = glob.glob(os.path.join(str(tmp_path / "parts"), "models", "*"))[0]
    saved = sorted(int(d) for d in os.listdir(root))
    assert saved[:2] == [100, 200] and 230 <= saved[-1] < 300 and len(saved) == 3, saved
    stopped = sacred_runs(tmp_path / "parts")[0]
    assert read(stopped, "run.json")["status"] == "INTERRUPTED"
    assert f"SIGUSR1: saved a checkpoint at t_env {saved[-1]}; stopping" in read(stopped, "cout.txt")
    assert run_main(tmp_path / "parts", extra=[*argv, f"checkpoint_path={root}"]) == 0
    resumed = sacred_runs(tmp_path / "parts")[1]
    info = read(resumed, "info.json")["resumed_from"]
    assert info["exact"] and info["t_env"] == saved[-1], info
    assert _curves(resumed) == _curves(sacred_runs(tmp_path / "whole")[0])


@pytest.mark.parametrize(
    "alg,env,extra",
    [
        ("qmix", "mpe", []),
        ("differ_qmix", "skirmish", ["env_args.map_name=3m"]),
        ("differ_qmix", "skirmish", ["env_args.map_name=3m", "runner=parallel", "batch_size_run=2"]),
        ("maddpg", "mpe", ["env_args.continuous_actions=True"]),  # raw samples, bounded for the env
        ("qmix", "skirmish_v2", ["env_args.map_name=protoss_5_vs_5"]),
        ("per_qmix", "skirmish", ["env_args.map_name=3m"]),  # the log keeps the priorities
        ("inspire_qmix", "skirmish", ["env_args.map_name=3m", "share_to=sight"]),  # visible replayed
        ("ices_sound", "skirmish_ices", ["env_args.map_name=3m", "batch_size_run=2"]),
    ],
)
def test_a_checkpoint_without_its_buffer_plays_the_buffer_again_from_its_log(
    tmp_path, monkeypatch, alg, env, extra
):
    # As a sweep's archive or a fresh checkout has it: buffer.th gone, buffer_log.npz kept. The
    # resumed run plays the stored episodes again and goes on exactly as the uninterrupted one.
    argv = ["save_model=True", "save_model_interval=100", "save_buffer=True", "t_max=400", *extra]
    root = _whole_and_stopped(tmp_path, monkeypatch, alg, env, argv)
    newest = max(os.listdir(root), key=int)
    assert sorted(os.listdir(os.path.join(root, newest))) == [
        "buffer.th",
        "buffer_log.npz",
        "learner.th",
        "meta.json",
        "run_state.th",
    ]
    log_size = os.path.getsize(os.path.join(root, newest, "buffer_log.npz"))
    assert log_size < os.path.getsize(os.path.join(root, newest, "buffer.th")) / 5  # 1,700x on 5m_vs_6m
    os.remove(os.path.join(root, newest, "buffer.th"))
    assert run_main(tmp_path / "parts", alg, env, extra=[*argv, f"checkpoint_path={root}"]) == 0
    whole, resumed = sacred_runs(tmp_path / "whole")[0], sacred_runs(tmp_path / "parts")[-1]
    info = read(resumed, "info.json")["resumed_from"]
    assert info["exact"] and info["buffer_restored"] and info["buffer_rebuilt"], info
    assert "replay buffer rebuilt from buffer_log.npz" in read(resumed, "cout.txt")
    assert _curves(resumed) == _curves(whole)
    # the resumed run's own checkpoints keep a log again, of the same buffer as the whole run's
    import numpy as np

    (resumed_root,) = set(glob.glob(os.path.join(str(tmp_path / "parts"), "models", "*"))) - {root}
    final = os.path.join(resumed_root, max(os.listdir(resumed_root), key=int))
    whole_root = glob.glob(os.path.join(str(tmp_path / "whole"), "models", "*"))[0]
    with (
        np.load(os.path.join(final, "buffer_log.npz")) as a,
        np.load(os.path.join(whole_root, os.path.basename(final), "buffer_log.npz")) as b,
    ):
        assert bytes(a["meta"]) == bytes(b["meta"])


def test_without_save_buffer_the_newest_checkpoint_still_gives_the_buffer_back(tmp_path, monkeypatch):
    # save_buffer=False keeps no buffer.th, but the newest checkpoint keeps the log (a few MB),
    # and a run resumed from it is the uninterrupted run.
    argv = ["save_model=True", "save_model_interval=100", "t_max=400", "env_args.map_name=3m"]
    root = _whole_and_stopped(tmp_path, monkeypatch, "qmix", "skirmish", argv)
    steps = sorted(os.listdir(root), key=int)
    assert not glob.glob(os.path.join(root, "*", "buffer.th"))
    newest_log = os.path.join(root, steps[-1], "buffer_log.npz")
    assert glob.glob(os.path.join(root, "*", "buffer_log.npz")) == [newest_log]
    assert run_main(tmp_path / "parts", "qmix", "skirmish", extra=[*argv, f"checkpoint_path={root}"]) == 0
    whole, resumed = sacred_runs(tmp_path / "whole")[0], sacred_runs(tmp_path / "parts")[-1]
    info = read(resumed, "info.json")["resumed_from"]
    assert info["exact"] and info["buffer_rebuilt"], info
    assert _curves(resumed) == _curves(whole)


def test_a_log_that_does_not_replay_the_buffer_is_not_used(tmp_path, monkeypatch):
    # Other env settings under the same log (as a changed simulator would be): the episodes
    # played again differ, the digest says so, and the run goes on without a buffer.
    argv = ["save_model=True", "save_model_interval=100", "save_buffer=True", "t_max=300"]
    restore = _stop_after_checkpoint_at(monkeypatch, 100)
    assert run_main(tmp_path, "qmix", "skirmish", extra=[*argv, "env_args.map_name=3m"]) == 130
    restore()
    root = glob.glob(os.path.join(str(tmp_path), "models", "*"))[0]
    for path in glob.glob(os.path.join(root, "*", "buffer.th")):
        os.remove(path)
    other = [*argv, "env_args.map_name=3m", "env_args.reward_win=100", f"checkpoint_path={root}"]
    other.append("resume_override=True")
    assert run_main(tmp_path, "qmix", "skirmish", extra=other) == 0
    info = read(sacred_runs(tmp_path)[-1], "info.json")["resumed_from"]
    assert not info["buffer_restored"] and info["buffer_rebuilt"] is False and not info["exact"]
    cout = read(sacred_runs(tmp_path)[-1], "cout.txt")
    assert "could not be rebuilt from buffer_log.npz: the episodes played again differ" in cout
    assert "no replay buffer (it was saved with one, but buffer.th is not there" in cout


def test_a_log_that_fails_to_play_leaves_the_run_going_without_a_buffer(tmp_path, monkeypatch):
    import runners.replay

    argv = ["save_model=True", "save_model_interval=100", "save_buffer=True", "t_max=300"]
    restore = _stop_after_checkpoint_at(monkeypatch, 100)
    assert run_main(tmp_path, "qmix", extra=argv) == 130
    restore()
    root = glob.glob(os.path.join(str(tmp_path), "models", "*"))[0]
    for path in glob.glob(os.path.join(root, "*", "buffer.th")):
        os.remove(path)

    def broken(*args, **kwargs):
        raise RuntimeError("expected all tensors to be on the same device")

    monkeypatch.setattr(runners.replay._ScriptedController, "select_actions", broken)
    assert run_main(tmp_path, "qmix", extra=[*argv, f"checkpoint_path={root}"]) == 0
    info = read(sacred_runs(tmp_path)[-1], "info.json")["resumed_from"]
    assert info["buffer_rebuilt"] is False and info["differs_because"] == ["no replay buffer"]
    assert "playing it again failed: expected all tensors" in read(sacred_runs(tmp_path)[-1], "cout.txt")


def test_a_resume_that_cannot_repeat_the_run_says_why(tmp_path, monkeypatch, mock_env, capsys):
    # The mock env keeps no random state, and a checkpoint without a buffer restarts learning:
    # the record and the console say the resumed curve is not the uninterrupted run's.
    argv = ["env=mock", "save_model=True", "save_model_interval=100", "t_max=300"]
    restore = _stop_after_checkpoint_at(monkeypatch, 100)
    assert run_main(tmp_path, "qmix", extra=argv) == 130
    restore()
    root = glob.glob(os.path.join(str(tmp_path), "models", "*"))[0]
    assert run_main(tmp_path, "qmix", extra=[*argv, f"checkpoint_path={root}"]) == 0
    info = read(sacred_runs(tmp_path)[-1], "info.json")["resumed_from"]
    assert not info["exact"]
    assert info["differs_because"] == ["no replay buffer", "mock cannot save its random state"]
    assert "will not repeat the uninterrupted run exactly: no replay buffer; mock cannot" in read(
        sacred_runs(tmp_path)[-1], "cout.txt"
    )

    # A checkpoint saved before random states were kept still loads, and says so.
    step = glob.glob(os.path.join(root, "*", "run_state.th"))
    assert step
    for path in step:
        os.remove(path)
    assert run_main(tmp_path, "qmix", extra=[*argv, f"checkpoint_path={root}"]) == 0
    info = read(sacred_runs(tmp_path)[-1], "info.json")["resumed_from"]
    assert "the checkpoint keeps no random states (saved before they were kept)" in info["differs_because"]


def test_crashed_run_is_marked_failed_and_keeps_checkpoints(tmp_path, mock_env):
    with pytest.raises(RuntimeError, match="mock env failure"):
        run_main(
            tmp_path,
            "qmix",
            env="mpe",
            extra=["env=mock", "env_args.raise_at_t=260", "save_model=True", "save_model_interval=50"],
        )
    run = sacred_runs(tmp_path)[-1]
    assert read(run, "run.json")["status"] == "FAILED"
    models = glob.glob(os.path.join(str(tmp_path), "models", "*", "*"))
    assert models and all(os.path.isfile(os.path.join(m, "learner.th")) for m in models)


def test_tensorboard_files(tmp_path):
    assert run_main(tmp_path, "iql", extra=["agent=mlp", "use_tensorboard=True"]) == 0
    assert glob.glob(os.path.join(str(tmp_path), "tb_logs", "*", "events.out.tfevents.*"))


def test_buffer_too_large_for_memory_is_refused(tmp_path, capsys):
    assert run_main(tmp_path, "qmix", extra=["buffer_size=100000000"]) == 2
    err = capsys.readouterr().err
    assert "buffer_size=100000000 episodes of this env need" in err and "use buffer_size=" in err


class _CountingRunner:
    """Plays `steps` env steps per call, like a runner of batch_size_run episodes."""

    def __init__(self, steps, batch_size=1):
        self.t_env, self.steps, self.batch_size = 0, steps, batch_size

    def run(self, test_mode=False):
        if not test_mode:
            self.t_env += self.steps
        return None


class _Buffer:
    def __init__(self, ready_after):
        self.inserted, self.ready_after = 0, ready_after

    def insert_episode_batch(self, batch):
        self.inserted += 1
        return [self.inserted - 1]

    def can_sample(self, n):
        return self.inserted >= self.ready_after

    def sample(self, n, t_env=0):
        return _Sample()


class _Sample:
    device = "cpu"


class _Learner:
    aux_batches = 0

    def __init__(self):
        self.updates_at = []

    def observe(self, episode_batch):
        pass

    def train(self, batch, t_env, episode):
        self.updates_at.append(t_env)


class _Logger:
    def log_stat(self, *a):
        pass

    def print_recent_stats(self, *a):
        pass

    def check_records(self):
        pass


@pytest.mark.parametrize(
    "steps, interval, ready_after, expected, per_call",
    [
        (25, 0, 1, [25, 50, 75, 100, 125, 150, 175, 200], 1),  # one update per runner call
        (50, 0, 1, [50, 50, 100, 100, 150, 150, 200, 200], 2),  # updates_per_call=2 (ICES on GRF)
        (25, 100, 1, [100, 200], 1),  # the paper's cadence: every 100 steps
        (25, 50, 3, [100, 150, 200], 1),  # steps before the buffer is ready are dropped
        (100, 25, 1, [100] * 4 + [200] * 4, 1),  # several updates per parallel batch
    ],
)
def test_train_interval_steps_sets_the_update_cadence(steps, interval, ready_after, expected, per_call):
    from types import SimpleNamespace

    import run

    args = SimpleNamespace(
        t_max=199,
        test_interval=10**9,
        test_nepisode=1,
        save_model=False,
        log_interval=10**9,
        transition_batch_size=0,
        batch_size=4,
        train_interval_steps=interval,
        updates_per_call=per_call,
        device="cpu",
    )
    learner = _Learner()
    run._train(args, _CountingRunner(steps), _Buffer(ready_after), learner, _Logger(), 0, 0)
    assert learner.updates_at == expected


def test_buffer_larger_than_the_available_memory_is_warned_about(tmp_path, monkeypatch, caplog):
    import logging

    import assembly

    monkeypatch.setattr(assembly, "available_memory", lambda: 1024)
    with caplog.at_level(logging.WARNING, logger="marl"):
        logger = logging.getLogger("marl")
        logger.propagate = True  # let caplog see the console logger's records
        try:
            assert run_main(tmp_path, "qmix") == 0
        finally:
            logger.propagate = False
    assert any(
        "the replay buffer may take up to" in r.getMessage() and "buffer_size=" in r.getMessage()
        for r in caplog.records
    )


def test_a_summary_shows_only_values_logged_since_the_last_one():
    # at t_env 20021 a summary printed epsilon 0.8097, the value logged at 10134: stale values
    # are left out, and a second summary right after the first repeats nothing
    import logging

    from utils.logger import Logger, get_console_logger

    class Lines(logging.Handler):
        def __init__(self):
            super().__init__()
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    console = get_console_logger()
    seen = Lines()
    console.addHandler(seen)
    try:
        logger = Logger(console)
        logger.log_stat("epsilon", 0.8097, 10134)
        logger.log_stat("return_mean", -60.0, 10134)
        logger.print_recent_stats("t_env 10134")
        logger.log_stat("return_mean", -50.0, 20021)
        logger.print_recent_stats("t_env 20021")
        logger.print_recent_stats("t_env 20021, again")
    finally:
        console.removeHandler(seen)
    lines = seen.lines
    assert "epsilon: 0.8097" in lines[0] and "return_mean: -60.0000" in lines[0]
    assert "epsilon" not in lines[1] and "return_mean: -55.0000" in lines[1]  # mean of the last 5
    assert lines[2] == "t_env 20021, again"


def test_a_resume_without_a_seed_goes_on_with_the_runs_own(tmp_path):
    # A drawn seed would make the resumed run another run's continuation: the checkpoint's seeds
    # are taken unless seeds are given; evaluation still draws its own.
    from config import load_config
    from utils.errors import ConfigError

    argv = ["save_model=True", "save_model_interval=100", "env_args.seed=11"]
    assert run_main(tmp_path, "qmix", extra=argv, seed=7) == 0
    root = glob.glob(os.path.join(str(tmp_path), "models", "*"))[0]
    base = ["--config=qmix", "--env-config=mpe", "with", f"checkpoint_path={root}"]
    config = load_config(base)
    assert config["seed"] == 7 and config["env_args"]["seed"] == 11
    with pytest.raises(ConfigError, match=r"seed=3 \(saved: 7\).*resume_override=True"):
        load_config([*base, "seed=3"])  # another seed is another run
    assert load_config([*base, "seed=3", "resume_override=True"])["seed"] == 3
    evaluation = load_config([*base, "evaluate=True"])
    assert evaluation["seed"] is None and evaluation["env_args"]["seed"] is None  # main.py draws one
    assert load_config([*base, "evaluate=True", "seed=3"])["seed"] == 3


def test_a_buffer_log_that_cannot_be_written_costs_the_log_not_the_checkpoint(tmp_path, monkeypatch):
    from resume import RunState

    take = RunState.before_training_episodes

    def with_odd_state(self, runner):  # as an env whose state JSON cannot hold
        take(self, runner)
        if self._coming is not None:
            self._coming = [{"odd": object()} for _ in self._coming]

    monkeypatch.setattr(RunState, "before_training_episodes", with_odd_state)
    argv = ["save_model=True", "save_model_interval=100", "save_buffer=True"]
    assert run_main(tmp_path, "qmix", extra=argv) == 0
    root = glob.glob(os.path.join(str(tmp_path), "models", "*"))[0]
    for step in os.listdir(root):
        assert "buffer_log.npz" not in os.listdir(os.path.join(root, step))
    assert "this checkpoint keeps no buffer_log.npz" in read(sacred_runs(tmp_path)[0], "cout.txt")
