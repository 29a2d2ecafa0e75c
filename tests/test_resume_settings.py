"""A run resumed or evaluated from a checkpoint takes the checkpoint's settings, stays the same
experiment, and every run ends with a block saying what it reached and where its files are."""

import glob
import os

import pytest

import main
from helpers import read, run_main, sacred_runs
from utils.errors import ConfigError


def _saved_run(tmp_path, alg="qmix", extra=()):
    """A short run saving every 100 steps (tests every 100) -> its models folder."""
    argv = ["save_model=True", "save_model_interval=100", *extra]
    assert run_main(tmp_path, alg, extra=argv) == 0
    (root,) = glob.glob(os.path.join(str(tmp_path), "models", "*"))
    return root


def _no_env_built(monkeypatch):
    import run

    def refuse(*args, **kwargs):
        raise AssertionError("the run was assembled")

    monkeypatch.setattr(run, "build", refuse)


def test_a_resume_naming_only_the_checkpoint_keeps_saving_testing_and_its_folder(tmp_path, monkeypatch):
    # The first run saves checkpoints and tests every 100 steps (not the defaults); the resumed
    # run repeats neither, nor --config, --env-config or the results folder, and runs elsewhere.
    root = _saved_run(tmp_path)
    first = sacred_runs(tmp_path)[0]
    monkeypatch.chdir(tmp_path)
    assert main.main(["with", f"checkpoint_path={root}", "load_step=200", "t_max=600"]) == 0
    first_run, resumed = sacred_runs(tmp_path)
    assert first_run == first and os.path.dirname(resumed) == os.path.dirname(first)  # beside it
    config = read(resumed, "config.json")
    assert config["save_model"] and config["save_model_interval"] == 100 and config["test_interval"] == 100
    tests = read(resumed, "metrics.json")["test_return_mean"]["steps"]
    assert [t // 100 for t in tests if t > 200] == [3, 4, 5, 6]  # the original schedule
    # its own models folder holds the final model
    (token,) = set(os.listdir(os.path.join(tmp_path, "models"))) - {os.path.basename(root)}
    steps = [int(d) for d in os.listdir(os.path.join(tmp_path, "models", token))]
    assert max(steps) >= 600
    info = read(resumed, "info.json")["resumed_from"]
    assert "config_changed" not in info and info["t_env"] == 200


def test_a_sweep_runs_resume_stays_in_its_experiment(tmp_path):
    root = _saved_run(tmp_path, extra=["experiment=swept", "sweep_key=abc"])
    assert main.main(["with", f"checkpoint_path={root}", "t_max=400"]) == 0
    first, resumed = sorted(
        glob.glob(os.path.join(str(tmp_path), "sacred", "swept", "*", "*", "*", "[0-9]*"))
    )
    assert resumed.startswith(os.path.join(str(tmp_path), "sacred", "swept", "mpe", "simple_spread_v3"))
    assert read(resumed, "config.json")["sweep_key"] == "abc"
    from sweep_archive import records

    found = {path: key for path, key, _ in records(os.path.join(str(tmp_path), "sacred", "swept"))}
    assert found == {first: "abc", resumed: "abc"}


def test_a_change_to_the_experiment_is_refused_before_anything_is_built(tmp_path, monkeypatch, capsys):
    root = _saved_run(tmp_path)
    _no_env_built(monkeypatch)
    n = len(sacred_runs(tmp_path))
    assert main.main(["with", f"checkpoint_path={root}", "lr=0.01", "t_max=500"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: a resumed run keeps the settings") and "lr=0.01 (saved: 0.0005)" in err
    assert "resume_override=True" in err
    assert len(sacred_runs(tmp_path)) == n  # no record: nothing started
    # a key given twice is judged by its last value against the saved one
    assert main.main(["with", f"checkpoint_path={root}", "lr=0.01", "lr=0.02", "t_max=500"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "lr=0.02 (saved: 0.0005)" in err and "lr=0.01" not in err and err.count("lr=") == 1
    # repeating a saved value is no change
    monkeypatch.undo()
    argv = ["--config=qmix", "--env-config=mpe", "with", f"checkpoint_path={root}", "lr=0.01", "lr=0.0005"]
    assert main.main([*argv, "t_max=400"]) == 0  # changed and set back: no change


def test_resume_override_goes_on_with_the_change_and_records_it(tmp_path):
    root = _saved_run(tmp_path)
    assert main.main(["with", f"checkpoint_path={root}", "lr=0.01", "t_max=400", "resume_override=True"]) == 0
    resumed = sacred_runs(tmp_path)[-1]
    assert read(resumed, "config.json")["lr"] == 0.01
    assert read(resumed, "info.json")["resumed_from"]["config_changed"] == {"lr": [0.0005, 0.01]}


def test_evaluate_needs_only_the_checkpoint_and_is_marked_as_an_evaluation(tmp_path):
    root = _saved_run(tmp_path)
    assert main.main(["with", f"checkpoint_path={root}", "evaluate=True", "test_nepisode=3"]) == 0
    training, evaluation = sacred_runs(tmp_path)
    assert read(training, "run.json")["kind"] == "training"
    run = read(evaluation, "run.json")
    assert run["kind"] == "evaluation" and run["status"] == "COMPLETED"
    assert run["result"]["metric"] == "test_return_mean" and run["result"]["at"] == 325
    metrics = read(evaluation, "metrics.json")
    assert metrics["test_return_mean"]["steps"] == [325] and "loss" not in metrics
    assert "evaluation completed at t_env 325" in read(evaluation, "cout.txt")


@pytest.mark.parametrize("flag", ["--config=vdn", "--env-config=skirmish"])
def test_evaluate_with_another_config_is_refused_before_the_env_exists(tmp_path, monkeypatch, capsys, flag):
    root = _saved_run(tmp_path)
    _no_env_built(monkeypatch)
    assert main.main([flag, "with", f"checkpoint_path={root}", "evaluate=True"]) == 2
    err = capsys.readouterr().err
    name = flag.split("=")[0]
    assert f"{flag} does not match the checkpoint's {name}=" in err and f"leave {name} out" in err
    assert len(sacred_runs(tmp_path)) == 1


def test_plot_leaves_evaluations_out_of_training_curves(tmp_path, capsys):
    import plot
    from utils.results import load_runs

    root = _saved_run(tmp_path)
    assert main.main(["with", f"checkpoint_path={root}", "evaluate=True", "test_nepisode=2"]) == 0
    training, evaluation = sacred_runs(tmp_path)
    df = load_runs([str(tmp_path)], metrics=["test_return_mean"])
    assert set(df["run_dir"]) == {training} and df.attrs["skipped"] == {"EVALUATION": 1}
    both = load_runs([str(tmp_path)], metrics=["test_return_mean"], evaluations=True)
    assert set(both["run_dir"]) == {training, evaluation}
    out = str(tmp_path / "fig")
    assert plot.main([str(tmp_path / "sacred"), "--out", out]) == 0
    assert "left out: 1 EVALUATION" in capsys.readouterr().err
    with open(out + ".md") as f:
        assert f.read().count("| simple_spread_v3 |") == 1  # one group, not an extra t_max one


def test_the_closing_block_gives_the_last_test_and_the_folders(tmp_path):
    # MPE's episodes are 25 steps: the loop tests at 400 and plays one more episode to 425
    assert run_main(tmp_path, extra=["save_model=True", "save_model_interval=100", "t_max=400"]) == 0
    record = sacred_runs(tmp_path)[0]
    cout = read(record, "cout.txt")
    block = cout[cout.index("run completed at t_env 425") :]
    assert "test_return_mean" in block
    assert "at t_env 400 (the last test, 25 env steps before the end); best " in block
    assert f"record: {record}" in block and "models: " in block and "(newest t_env 425)" in block
    assert "Result:" not in cout and "Completed after" not in cout
    assert cout.count("saved checkpoint") == len(set(cout.split("saved checkpoint")[1:]))  # none twice
    result = read(record, "run.json")["result"]
    assert result["at"] == 400 and not result["stale"] and result["steps_per_s"] > 0
    tests = read(record, "metrics.json")["test_return_mean"]
    assert result["best"] == max(tests["values"]) and result["value"] == tests["values"][-1]


def test_a_figure_older_than_the_last_training_steps_says_so(tmp_path):
    # t_max below test_interval: the only test is the untrained one at the start.
    assert run_main(tmp_path, extra=["test_interval=1000", "log_interval=1000"]) == 0
    record = sacred_runs(tmp_path)[0]
    result = read(record, "run.json")["result"]
    assert result["at"] == 25 and result["stale"] and result["t_env"] == 325
    assert "(no test since t_env 25: 300 env steps of training after it)" in read(record, "cout.txt")


def test_an_interrupted_run_ends_with_the_same_block(tmp_path, monkeypatch, capsys):
    import run

    save = run.save_model

    def save_then_stop(args, runner, *rest, **kwargs):
        save(args, runner, *rest, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "save_model", save_then_stop)
    assert run_main(tmp_path, extra=["save_model=True", "save_model_interval=200"]) == 130
    record = sacred_runs(tmp_path)[0]
    cout = read(record, "cout.txt")
    assert "run interrupted at t_env 200" in cout and f"record: {record}" in cout
    assert "models: " in cout and "(newest t_env 200)" in cout
    assert "no test since" not in cout.split("run interrupted")[1].splitlines()[1]  # tested at 200


def test_the_block_from_hand_made_stats():
    from utils.summary import end_block

    stats = {"test_return_mean": [(0, -9.0), (100, -3.0), (200, -3.0), (300, -5.0)], "loss": [(300, 1.0)]}
    lines, result = end_block("completed", stats, 340, t_start=100, seconds=2.0, record="r")
    assert result["value"] == -5.0 and result["at"] == 300 and result["stale"]  # no schedule given
    assert result["best"] == -3.0 and result["best_at"] == 100  # the earliest of equal bests
    assert result["steps_per_s"] == 120.0
    assert "no test since t_env 300: 40 env steps of training after it" in lines[1]
    # with the schedule: no test due since 300, and 200 steps of training before it
    lines, result = end_block("completed", stats, 340, t_start=100, test_interval=100)
    assert not result["stale"] and "(the last test, 40 env steps before the end)" in lines[1]
    assert end_block("completed", stats, 400, t_start=100, test_interval=100)[1]["stale"]  # 400 was due
    assert end_block("completed", stats, 340, t_start=250, test_interval=100)[1]["stale"]  # resumed at 250
    won = dict(stats, test_battle_won_mean=[(300, 0.5)])
    assert end_block("completed", won, 300)[1]["metric"] == "test_battle_won_mean"
    assert end_block("failed", {"loss": [(1, 1.0)]}, 5)[0][1] == "  no test phase was run"


def test_a_saved_setting_this_version_lacks_is_refused_not_dropped(tmp_path, capsys):
    from config import resumed_config
    from config_keys import load_defaults
    from utils.keys import DERIVED_KEYS

    defaults = load_defaults()
    saved = {**defaults, "alg_config": "qmix", "env_config": "mpe", "n_agents": 3, "record": "x"}
    resumed_config(str(tmp_path), dict(saved), None, None, [], defaults)  # run-time keys: no error
    saved["mixing_warmth"] = 0.7  # a setting no key of this version holds
    with pytest.raises(ConfigError, match=r"no setting for: mixing_warmth=0.7; add resume_override=True"):
        resumed_config(str(tmp_path), dict(saved), None, None, [], defaults)
    over = resumed_config(str(tmp_path), dict(saved), None, None, [("resume_override", True)], defaults)
    assert "mixing_warmth" not in over
    assert "dropped mixing_warmth=0.7" in capsys.readouterr().err
    assert "n_agents" in DERIVED_KEYS


@pytest.mark.parametrize("alg", ["qmix", "maddpg", "differ_qmix"])
def test_a_checkpoints_saved_keys_are_settings_or_run_time_keys(tmp_path, alg):
    # Every key a run adds to its config as it starts must be listed in DERIVED_KEYS, or every
    # resume of its checkpoints would be refused.
    import json

    from config_keys import load_defaults
    from utils.keys import DERIVED_KEYS

    root = _saved_run(tmp_path, alg)
    with open(glob.glob(os.path.join(root, "*", "meta.json"))[0]) as f:
        saved = json.load(f)["config"]
    extra = set(saved) - set(load_defaults())
    extra -= {"alg_config", "env_config"}  # the files it was made from, read by resumed_config
    assert extra and extra <= set(DERIVED_KEYS), extra - set(DERIVED_KEYS)
