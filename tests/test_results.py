"""Sweeps, the Sacred log loader, plots and tables, on real small runs made here."""

import csv
import glob
import json
import os
import shutil

import numpy as np
import pytest

import plot
import sweep
import sweep_archive
from utils.results import load_runs

UNREADABLE = "skipping unreadable run"  # the swept fixture corrupts one record on purpose

TINY = {
    "t_max": 150,
    "test_interval": 50,
    "test_nepisode": 2,
    "batch_size": 2,
    "buffer_size": 10,
    "log_interval": 50,
    "runner_log_interval": 50,
    "learner_log_interval": 50,
    "env_args.max_cycles": 10,
}


def write_spec(path, results, experiment="tiny", backend="local", grid=None):
    spec = {
        "experiment": experiment,
        "env_config": "mpe",
        "seeds": [1, 2],
        "backend": backend,
        "workers": 2,
        "results": str(results),
        "overrides": TINY,
        "grid": grid or {"config": ["qmix", "vdn"]},
    }
    with open(path, "w") as f:
        json.dump(spec, f)  # JSON is YAML
    return str(path)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """Two configs x two seeds run by a local sweep, plus a corrupted and a RUNNING copy."""
    root = tmp_path_factory.mktemp("sweep")
    spec = write_spec(root / "sweep.yaml", root / "results")
    assert sweep.main([spec]) == 0
    runs = sorted(glob.glob(str(root / "results" / "sacred" / "tiny" / "*" / "*" / "*" / "[0-9]*")))
    assert len(runs) == 4
    broken = os.path.join(os.path.dirname(runs[0]), "90")
    shutil.copytree(runs[0], broken)
    with open(os.path.join(broken, "metrics.json"), "w") as f:
        f.write('{"test_return_mean": {"steps": [1, 2')  # half-written
    running = os.path.join(os.path.dirname(runs[0]), "91")
    shutil.copytree(runs[0], running)
    with open(os.path.join(running, "run.json")) as f:
        info = json.load(f)
    info["status"] = "RUNNING"
    info["host"]["pid"] = os.getpid()  # a live process: still running, not died
    with open(os.path.join(running, "run.json"), "w") as f:
        json.dump(info, f)
    return root, spec


def test_dry_run_lists_the_full_grid(tmp_path, capsys):
    spec = write_spec(
        tmp_path / "s.yaml",
        tmp_path / "r",
        grid={"config": ["qmix", "vdn"], "env_args.scenario": ["simple_spread_v3", "simple_reference_v3"]},
    )
    assert sweep.main([spec, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "8 runs, 0 already completed" in out
    lines = [line for line in out.splitlines() if line.startswith("  run ")]
    assert len(lines) == 8 and len(set(lines)) == 8
    assert not os.path.exists(tmp_path / "r")


def test_only_holds_back_the_runs_it_does_not_match(tmp_path, capsys):
    spec = write_spec(
        tmp_path / "s.yaml",
        tmp_path / "r",
        grid={"config": ["qmix", "vdn"], "env_args.scenario": ["simple_spread_v3", "simple_reference_v3"]},
    )
    argv = [spec, "--dry-run", "--only", "env_args.scenario=simple_spread_v3", "--only", "config=vdn"]
    assert sweep.main(argv) == 0
    out = capsys.readouterr().out
    run = [line for line in out.splitlines() if line.startswith("  run ")]
    held = [line for line in out.splitlines() if line.startswith("  held ")]
    assert len(held) == 6 and len(run) == 2  # two seeds of the one matching point
    assert all("--config=vdn" in line and "simple_spread_v3" in line for line in run)
    assert sweep.main([spec, "--dry-run", "--only", "seed=2"]) == 0
    run = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  run ")]
    assert len(run) == 4 and all(line.endswith("seed=2") for line in run)
    assert sweep.main([spec, "--dry-run", "--only", "scenario=x"]) == 2
    err = capsys.readouterr().err
    assert "--only key 'scenario' is not set by this sweep" in err and "env_args.scenario" in err


def test_sweep_order_is_seed_major():
    # A sweep stopped part way must have every configuration at its first seeds.
    runs = sweep.expand({"grid": {"config": ["qmix", "vdn", "iql"]}, "seeds": [1, 2]})
    assert [(r["seed"], r["config"]) for r in runs] == [
        (1, "qmix"),
        (1, "vdn"),
        (1, "iql"),
        (2, "qmix"),
        (2, "vdn"),
        (2, "iql"),
    ]
    assert len({r["key"] for r in runs}) == 6


def test_a_run_killed_by_a_signal_is_reported_as_such():
    # An out-of-memory kill shows as exit -9; the report names the signal and the way on.
    killed = sweep.exit_reason(-9)
    assert "SIGKILL" in killed and "out-of-memory" in killed and "go on" in killed
    assert "SIGSEGV" in sweep.exit_reason(-11) and "out-of-memory" not in sweep.exit_reason(-11)
    assert sweep.exit_reason(2) == "exit 2"


def test_bad_grid_is_refused_before_running(tmp_path, capsys):
    spec = write_spec(tmp_path / "s.yaml", tmp_path / "r", grid={"learner": ["q_learnr"]})
    assert sweep.main([spec]) == 2
    assert "q_learnr" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "r")


def test_second_invocation_skips_finished_runs(swept, capsys):
    root, spec = swept
    capsys.readouterr()
    assert sweep.main([spec]) == 0
    assert "4 runs, 4 already completed" in capsys.readouterr().out
    assert len(glob.glob(str(root / "results" / "sacred" / "tiny" / "*" / "*" / "*" / "[0-9]*"))) == 6


def test_loader_reads_runs_and_skips_broken_ones(swept):
    root, _ = swept
    with pytest.warns(UserWarning, match="skipping unreadable run"):
        df = load_runs([str(root / "results" / "sacred")])
    runs = df.groupby("run_dir").first()
    assert len(runs) == 5  # 4 completed + the RUNNING one; the corrupted one skipped
    assert sorted(runs["status"]) == ["COMPLETED"] * 4 + ["RUNNING"]
    assert set(runs["name"]) == {"qmix", "vdn"}
    assert set(runs["experiment"]) == {"tiny"}
    assert {"run_id", "metric", "t_env", "value", "env_args.scenario", "seed"} <= set(df.columns)
    ret = df[df["metric"] == "test_return_mean"]
    assert ret.groupby("run_dir").size().min() >= 3  # tests at t=0, 50, 100, ...


def test_plot_writes_figure_and_tables(swept, tmp_path):
    root, _ = swept
    out = str(tmp_path / "fig")
    with pytest.warns(UserWarning):
        assert (
            plot.main(
                [
                    str(root / "results"),
                    "--metric",
                    "test_return_mean",
                    "--group-by",
                    "name",
                    "--status",
                    "COMPLETED",
                    "--smooth",
                    "2",
                    "--out",
                    out,
                ]
            )
            == 0
        )
    assert os.path.getsize(out + ".png") > 5000
    with open(out + ".csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["group"]: int(r["n_seeds"]) for r in rows} == {"qmix": 2, "vdn": 2}
    with open(out + ".md") as f:
        md = f.read()
    rows_md = [line for line in md.splitlines() if line.startswith("| simple_spread_v3 |")]
    assert sorted(line.split(" | ")[1] for line in rows_md) == ["qmix", "vdn"]
    assert all(line.split(" | ")[3] == "2" for line in rows_md)  # n_seeds


def test_plot_filter_and_iqm(swept, tmp_path):
    root, _ = swept
    out = str(tmp_path / "agg")
    with pytest.warns(UserWarning, match=UNREADABLE):
        assert (
            plot.main(
                [
                    str(root / "results"),
                    "--filter",
                    "name=qmix",
                    "--status",
                    "COMPLETED",
                    "--out",
                    out,
                    "--aggregate",
                    "iqm",
                ]
            )
            == 0
        )
    with open(out + ".csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["group"] for r in rows] == ["qmix"] and rows[0]["n_seeds"] == "2"
    with open(out + "_iqm.csv") as f:
        iqm = list(csv.DictReader(f))
    assert len(iqm) == 1 and float(iqm[0]["ci_low"]) <= float(iqm[0]["iqm"]) <= float(iqm[0]["ci_high"])
    # any of several values; a value not among the runs' keeps nothing of its own
    with pytest.warns(UserWarning, match=UNREADABLE):
        assert plot.main([str(root / "results"), "--filter", "name=qmix,vdn,nope", "--out", out]) == 0
    with open(out + ".csv") as f:
        assert sorted(r["group"] for r in csv.DictReader(f)) == ["qmix", "vdn"]
    with pytest.warns(UserWarning, match=UNREADABLE):
        assert plot.main([str(root / "results"), "--filter", "name=vdn,nope", "--out", out]) == 0
    with open(out + ".csv") as f:
        assert [r["group"] for r in csv.DictReader(f)] == ["vdn"]
    # the fixture's corrupted record is skipped with a warning on purpose; expect it, not show it
    with pytest.raises(SystemExit, match="not a config key"), pytest.warns(UserWarning, match=UNREADABLE):
        plot.main([str(root / "results"), "--filter", "nope=1", "--out", out])


def test_ray_backend_runs_a_tiny_sweep(tmp_path):
    pytest.importorskip("ray", reason="Ray is in requirements.txt; this runs wherever it is installed")
    spec = write_spec(
        tmp_path / "s.yaml", tmp_path / "r", experiment="tiny_ray", backend="ray", grid={"config": ["qmix"]}
    )
    assert sweep.main([spec]) == 0
    runs = glob.glob(str(tmp_path / "r" / "sacred" / "tiny_ray" / "*" / "*" / "qmix" / "[0-9]*"))
    assert len(runs) == 2
    for r in runs:
        with open(os.path.join(r, "run.json")) as f:
            assert json.load(f)["status"] == "COMPLETED"


def test_a_run_killed_without_a_record_is_reported_and_left_out(swept, tmp_path, capsys):
    # A copy of a finished run whose run.json still says RUNNING, for a process that is gone.
    import subprocess
    import sys

    root, _ = swept
    runs = sorted(glob.glob(str(root / "results" / "sacred" / "tiny" / "*" / "*" / "*" / "[0-9]*")))
    died = os.path.join(os.path.dirname(runs[0]), "92")
    shutil.copytree(runs[0], died)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with open(os.path.join(died, "run.json")) as f:
        info = json.load(f)
    info["status"], info["host"]["pid"] = "RUNNING", gone.pid
    with open(os.path.join(died, "run.json"), "w") as f:
        json.dump(info, f)
    with open(os.path.join(died, "config.json")) as f:
        config = json.load(f)
    config["sweep_key"] = "another configuration"  # not superseded by a completed twin
    with open(os.path.join(died, "config.json"), "w") as f:
        json.dump(config, f)
    try:
        with pytest.warns(UserWarning):
            df = load_runs([str(root / "results" / "sacred")])
        assert df.groupby("run_dir").first().loc[died, "status"] == "DIED"
        with pytest.warns(UserWarning):
            plot.main([str(root / "results"), "--metric", "test_return_mean", "--out", str(tmp_path / "f")])
        err = capsys.readouterr().err
        assert "left out: 1 DIED" in err
        import pandas as pd

        table = pd.read_csv(str(tmp_path / "f") + ".csv")
        assert table["n_seeds"].sum() == 5  # 4 completed + the live RUNNING copy; not the dead one
    finally:
        shutil.rmtree(died)


def _finals(values):
    """{group: {task: [finals by seed]}} -> the finals table plot.py aggregates."""
    import pandas as pd

    rows = [
        {"run_dir": f"{g}/{t}/{s}", "group": g, "task": t, "seed": s, "final": v}
        for g, tasks in values.items()
        for t, vals in tasks.items()
        for s, v in enumerate(vals)
    ]
    return pd.DataFrame(rows)


def test_probability_of_improvement_against_a_hand_count():
    x = {"a": [1.0, 3.0, 5.0], "b": [0.0, 2.0, 2.0]}
    y = {"a": [2.0, 3.0, 4.0], "b": [1.0, 2.0, 3.0]}
    table = plot.probability_of_improvement(_finals({"X": x, "Y": y}), rng_seed=0)

    def p(u, v):  # P(U > V) + 0.5 P(U = V) over all pairs of runs
        return np.mean([(a > b) + 0.5 * (a == b) for a in u for b in v])

    expected = (p(x["a"], y["a"]) + p(x["b"], y["b"])) / 2
    row = table[(table.x == "X") & (table.y == "Y")].iloc[0]
    back = table[(table.x == "Y") & (table.y == "X")].iloc[0]
    assert row.p_x_above_y == pytest.approx(expected)
    assert row.p_x_above_y + back.p_x_above_y == pytest.approx(1.0)
    assert row.ci_low <= row.p_x_above_y <= row.ci_high and row.n_tasks == 2
    with pytest.raises(SystemExit, match="same tasks"):
        plot.probability_of_improvement(_finals({"X": x, "Y": {"a": [1.0, 2.0]}}), rng_seed=0)


def test_marl_eval_export_layout():
    import pandas as pd

    df = pd.DataFrame(
        [
            {"env": "mpe", "task": "spread", "group": "qmix", "run_dir": d, "seed": s, "t_env": t, "value": v}
            for d, s, pts in (("r2", 2, [(0, -9.0), (100, -5.0)]), ("r1", 1, [(0, -8.0), (100, -4.0)]))
            for t, v in pts
        ]
    )
    out = plot.to_marl_eval(df, "test_return_mean")
    runs = out["mpe"]["spread"]["qmix"]
    assert sorted(runs) == ["run_0", "run_1"]
    assert runs["run_0"]["step_0"] == {"step_count": 0, "return": [-8.0]}  # seed 1 first
    assert runs["run_0"]["step_1"] == {"step_count": 100, "return": [-4.0]}
    assert runs["run_1"]["absolute_metrics"] == {"return": [-5.0]}
    assert plot.marl_eval_name("test_battle_won_mean") == "win_rate"


def test_plot_writes_poi_and_marl_eval(swept, tmp_path):
    root, _ = swept
    out, path = str(tmp_path / "cmp"), str(tmp_path / "runs.json")
    args = [str(root / "results"), "--status", "COMPLETED", "--out", out]
    with pytest.warns(UserWarning):
        aggs = ["--aggregate", "poi", "--aggregate", "iqm", "--aggregate", "profile"]
        assert plot.main([*args, *aggs, "--marl-eval", path]) == 0
    with open(out + "_poi.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["x"], r["y"]) for r in rows} == {("qmix", "vdn"), ("vdn", "qmix")}
    assert os.path.exists(out + "_iqm.csv") and os.path.exists(out + "_profile.png")
    with open(path) as f:
        data = json.load(f)
    assert set(data["mpe"]["simple_spread_v3"]) == {"qmix", "vdn"}
    assert len(data["mpe"]["simple_spread_v3"]["qmix"]) == 2


def test_performance_profile_counts_runs_above_each_threshold():
    # task a spans 0..10, task b 0..2: normalised, X's runs are 0.5, 1.0 (a) and 1.0, 0.5 (b)
    finals = _finals({"X": {"a": [5.0, 10.0], "b": [2.0, 1.0]}, "Y": {"a": [0.0, 5.0], "b": [0.0, 1.0]}})
    norm = plot.normalise_per_task(finals)
    assert sorted(norm[norm.group == "X"]["final"]) == [0.5, 0.5, 1.0, 1.0]
    prof = plot.performance_profile(finals, rng_seed=0, taus=[0.25, 0.75])
    got = {(r.group, r.tau): r.fraction_above for r in prof.itertuples()}
    assert got[("X", 0.25)] == 1.0 and got[("X", 0.75)] == 0.5
    assert got[("Y", 0.25)] == 0.5 and got[("Y", 0.75)] == 0.0
    assert (prof.ci_low <= prof.fraction_above + 1e-12).all()
    assert (prof.fraction_above <= prof.ci_high + 1e-12).all()


def test_reference_band_flags_runs_outside(swept, tmp_path, capsys):
    import pandas as pd

    root, _ = swept
    with pytest.warns(UserWarning, match=UNREADABLE):
        df = load_runs([str(root / "results")], metrics=["test_return_mean"], status={"COMPLETED"})
    steps = sorted(df["t_env"].unique())
    qmix = df[df["name"] == "qmix"]
    # a band around the qmix runs' own values: they stay inside, vdn runs may not
    lo = qmix.groupby("t_env")["value"].min() - 1e-6
    hi = qmix.groupby("t_env")["value"].max() + 1e-6
    band = pd.DataFrame(
        {"t_env": steps, "low": lo.reindex(steps).to_numpy(), "high": hi.reindex(steps).to_numpy()}
    )
    band["label"] = "qmix band"
    path = tmp_path / "ref.csv"
    band.to_csv(path, index=False)
    out = str(tmp_path / "ref")

    def check_runs():
        with pytest.warns(UserWarning, match=UNREADABLE):
            args = [str(root / "results"), "--status", "COMPLETED", "--out", out, "--reference", str(path)]
            assert plot.main(args) == 0
        return pd.read_csv(out + "_reference.csv")

    check = check_runs()
    assert (check[check.group == "qmix"]["outside"] == 0).all()
    assert (check["points"] == len(steps)).all()
    # the seeds' mean lies between their lowest and highest value, so inside a min-max band
    means = pd.read_csv(out + "_reference_mean.csv").set_index("group")
    assert means.loc["qmix", "inside"] == len(steps) and means.loc["qmix", "runs"] >= 2
    assert (means["inside"] + means["above"] + means["below"] == means["points"]).all()
    # a band far above every run: all runs flagged, all points below
    band["low"], band["high"] = 1e6, 2e6
    band.to_csv(path, index=False)
    check = check_runs()
    assert (check["outside"] == check["points"]).all() and (check["below"] == check["points"]).all()
    means = pd.read_csv(out + "_reference_mean.csv")
    assert (means["below"] == means["points"]).all() and (means["inside"] == 0).all()
    assert "outside the reference" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("t_env,low\n0,1\n")
    with (
        pytest.raises(SystemExit, match=r"lacks column\(s\) \['high'\]"),
        pytest.warns(UserWarning, match=UNREADABLE),
    ):
        plot.main([str(root / "results"), "--out", out, "--reference", str(bad)])


def test_plot_says_when_a_groups_runs_end_at_different_steps(swept, tmp_path, capsys):
    # An interrupted run with no completed twin counts by default; its final value is from earlier.
    root, _ = swept
    runs = sorted(glob.glob(str(root / "results" / "sacred" / "tiny" / "*" / "*" / "*" / "[0-9]*")))
    stopped = os.path.join(os.path.dirname(runs[0]), "93")
    shutil.copytree(runs[0], stopped)
    with open(os.path.join(stopped, "run.json")) as f:
        info = json.load(f)
    info["status"] = "INTERRUPTED"
    with open(os.path.join(stopped, "run.json"), "w") as f:
        json.dump(info, f)
    with open(os.path.join(stopped, "config.json")) as f:
        config = json.load(f)
    config["sweep_key"] = "another configuration"
    with open(os.path.join(stopped, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(stopped, "metrics.json")) as f:
        metrics = json.load(f)
    for m in metrics.values():
        for field in ("steps", "values", "timestamps"):
            m[field] = m[field][:1]  # stopped after its first test
    with open(os.path.join(stopped, "metrics.json"), "w") as f:
        json.dump(metrics, f)
    name = config["name"]
    try:
        out = str(tmp_path / "f")
        args = [str(root / "results"), "--metric", "test_return_mean", "--group-by", "name", "--out", out]
        with pytest.warns(UserWarning):
            plot.main(args)
        err = capsys.readouterr().err
        with open(out + ".csv") as f:
            rows = {r["group"]: r for r in csv.DictReader(f)}
        assert rows[name]["n_unfinished"] == "2"  # the stopped copy and the fixture's RUNNING one
        assert int(rows[name]["t_env_min"]) == metrics["test_return_mean"]["steps"][0]
        assert int(rows[name]["t_env_min"]) < int(rows[name]["t_env_max"])
        other = next(g for g in rows if g != name)
        assert rows[other]["n_unfinished"] == "0" and rows[other]["t_env_min"] == rows[other]["t_env_max"]
        assert f"/ {name}: 2 of 4 runs not completed" in err and f"/ {other}:" not in err
        with pytest.warns(UserWarning):
            plot.main(args + ["--status", "COMPLETED"])
        assert "warning: final and best values" not in capsys.readouterr().err
    finally:
        shutil.rmtree(stopped)


def test_an_interrupted_sweep_run_is_superseded_by_its_completed_rerun(swept, tmp_path):
    root, _ = swept
    src = root / "results" / "sacred"
    copy = tmp_path / "sacred"
    shutil.copytree(src, copy)
    runs = sorted(glob.glob(str(copy / "tiny" / "*" / "*" / "*" / "[0-9]*")))
    for name in ("90", "91"):  # the fixture's broken and running copies
        shutil.rmtree(os.path.join(os.path.dirname(runs[0]), name))
    again = os.path.join(os.path.dirname(runs[0]), "95")
    shutil.copytree(runs[0], again)  # the same sweep configuration, stopped part way
    with open(os.path.join(again, "run.json")) as f:
        info = json.load(f)
    info["status"] = "INTERRUPTED"
    with open(os.path.join(again, "run.json"), "w") as f:
        json.dump(info, f)
    df = load_runs([str(copy)])
    assert df["run_dir"].nunique() == 4 and df.attrs["skipped"] == {"SUPERSEDED": 1}
    shutil.rmtree(runs[0])  # without its completed twin it counts again
    df = load_runs([str(copy)])
    assert df["run_dir"].nunique() == 4 and "INTERRUPTED" in set(df["status"])


def test_an_archived_sweep_is_done_on_a_fresh_checkout(swept, tmp_path, capsys):
    # Results folders do not travel between machines; the archive (committed) does.
    root, _ = swept
    results = tmp_path / "results"
    shutil.copytree(root / "results", results)
    with open(write_spec(tmp_path / "s.yaml", results)) as f:
        spec = json.load(f)
    spec["archive"] = str(tmp_path / "archive")
    with open(tmp_path / "s.yaml", "w") as f:
        json.dump(spec, f)
    # a stopped run of one of these configurations, kept from another machine
    key = sweep.expand(spec)[0]["key"]
    os.makedirs(tmp_path / "archive" / "unfinished" / f"qmix_seed1_{key}")
    with open(tmp_path / "archive" / "unfinished" / f"qmix_seed1_{key}" / "where.json", "w") as f:
        json.dump({"key": key, "t_env": 50, "token": "x", "record": "y"}, f)
    capsys.readouterr()
    assert sweep.main([str(tmp_path / "s.yaml"), "--dry-run"]) == 0
    assert os.listdir(tmp_path / "archive") == ["unfinished"]  # a dry run writes nothing
    assert sweep.main([str(tmp_path / "s.yaml")]) == 0
    assert "archived 4 completed runs" in capsys.readouterr().out
    assert not os.listdir(tmp_path / "archive" / "unfinished")  # completed: the whole curve is kept
    os.rmdir(tmp_path / "archive" / "unfinished")
    folders = sorted(os.listdir(tmp_path / "archive"))
    assert len(folders) == 4 and {f.split("_seed")[0] for f in folders} == {"qmix", "vdn"}
    assert glob.glob(str(results / "sacred" / "**" / "cout.txt"), recursive=True)
    for folder in folders:  # the record's small files, no console log
        kept = set(os.listdir(tmp_path / "archive" / folder))
        assert {"config.json", "metrics.json", "run.json"} <= kept <= set(sweep_archive.ARCHIVED)
    with pytest.warns(UserWarning, match="skipping unreadable run"):
        both = load_runs([str(results / "sacred"), str(tmp_path / "archive")], status=["COMPLETED"])
    assert both["run_dir"].nunique() == 4 and both.attrs["skipped"]["DUPLICATE"] == 4
    archived = load_runs([str(tmp_path / "archive")])
    assert archived["run_dir"].nunique() == 4 and set(archived["status"]) == {"COMPLETED"}
    key = ["name", "seed", "metric", "t_env"]
    assert archived.sort_values(key)["value"].tolist() == both.sort_values(key)["value"].tolist()

    shutil.rmtree(results)  # a fresh checkout: no results, the archive only
    assert sweep.main([str(tmp_path / "s.yaml")]) == 0
    assert "4 runs, 4 already completed" in capsys.readouterr().out
    assert not os.path.exists(results / "sacred")  # nothing ran again


def fake_record(root, run_id, seed, values=(0.1, 0.5, 0.9), **config):
    """A completed Sacred record: config (with defaults for env and name), test_return_mean."""
    path = root / "sacred" / str(run_id)
    path.mkdir(parents=True)
    cfg = {"env": "skirmish", "env_args": {"map_name": "2s3z", "seed": seed}, "name": "differ_qmix", **config}
    (path / "config.json").write_text(json.dumps({**cfg, "seed": seed}))
    (path / "run.json").write_text(
        json.dumps({"status": "COMPLETED", "start_time": f"2026-11-26T00:00:{run_id:02d}"})
    )
    steps = [0, 10000, 20000]
    (path / "metrics.json").write_text(
        json.dumps({"test_return_mean": {"steps": steps, "values": list(values)}})
    )


def groups_of(out):
    with open(out + ".csv") as f:
        return {r["group"]: int(r["n_seeds"]) for r in csv.DictReader(f)}


def test_plot_never_pools_ablations_or_a_user_config_with_the_stock_runs(tmp_path, capsys):
    root = tmp_path / "r"
    rid = iter(range(1, 99))
    for seed in (1, 2):
        name = "differ_qmix_transformer"
        fake_record(root, next(rid), seed, name=name, transformer_n_layers=2, transformer_n_head=4)
        fake_record(root, next(rid), seed, name=name, transformer_n_layers=1, transformer_n_head=4)
        fake_record(root, next(rid), seed, name=name, transformer_n_layers=2, transformer_n_head=1)
        # the stock differ_qmix runs (one recorded before hidden_dim existed: its default, 64)
        extra = {"hidden_dim": 64} if seed == 1 else {}
        fake_record(root, next(rid), seed, experiment=f"sweep{seed}", test_nepisode=32 * seed, **extra)
        fake_record(root, next(rid), seed, hidden_dim=128.0)  # a user's config that kept the name
    out = str(tmp_path / "plot")
    assert plot.main([str(root), "--out", out, "--aggregate", "poi"]) == 0
    assert groups_of(out) == {
        "differ_qmix_transformer (transformer_n_layers=2, transformer_n_head=4)": 2,
        "differ_qmix_transformer (transformer_n_layers=1, transformer_n_head=4)": 2,
        "differ_qmix_transformer (transformer_n_layers=2, transformer_n_head=1)": 2,
        "differ_qmix (hidden_dim=64)": 2,  # seeds, experiments and test cadence are bookkeeping
        "differ_qmix (hidden_dim=128)": 2,
    }
    with open(out + "_poi.csv") as f:
        assert {r["x"] for r in csv.DictReader(f)} == set(groups_of(out))
    # an explicit grouping that pools different configs is warned about, naming the keys
    assert plot.main([str(root), "--out", out, "--group-by", "name"]) == 0
    err = capsys.readouterr().err
    assert "group 'differ_qmix_transformer' averages 6 runs" in err and "transformer_n_layers" in err
    assert "group 'differ_qmix' averages 4 runs whose configs differ in hidden_dim" in err
    assert groups_of(out) == {"differ_qmix_transformer": 6, "differ_qmix": 4}


def test_plots_of_simulator_runs_say_they_are_not_starcraft_ii(tmp_path):
    root = tmp_path / "r"
    fake_record(root, 1, 1)  # env skirmish
    fake_record(root, 2, 2)
    out = str(tmp_path / "plot")
    assert plot.main([str(root), "--out", out]) == 0
    with open(out + ".md") as f:
        assert "not StarCraft II" in f.read()
    other = tmp_path / "mpe"
    fake_record(other, 1, 1, env="mpe")
    fake_record(other, 2, 2, env="mpe")
    assert plot.main([str(other), "--out", out]) == 0
    with open(out + ".md") as f:
        assert "StarCraft" not in f.read()


def test_records_from_before_the_random_layout_default_count_as_toward(tmp_path):
    root = tmp_path / "r"
    old = {"map_name": "2s3z"}  # recorded before env_args.placement existed, or with its old default
    fake_record(root, 1, 1, name="qmix", env_args={**old, "seed": 1})
    fake_record(root, 2, 2, name="qmix", env_args={**old, "placement": "toward", "seed": 2})
    fake_record(root, 3, 1, name="qmix", env_args={**old, "placement": "random", "seed": 1})
    fake_record(root, 4, 2, name="qmix", env_args={**old, "placement": "random", "seed": 2})
    out = str(tmp_path / "plot")
    assert plot.main([str(root), "--out", out]) == 0
    assert groups_of(out) == {"qmix (env_args.placement=toward)": 2, "qmix (env_args.placement=random)": 2}


def test_runs_that_end_a_few_steps_apart_end_together_in_the_mean():
    # Two runs logged every 100 steps, ending at 1000 and 1010: the mean at 1010 is of both, not
    # of the longer run alone. A run that stopped at 500 stays out of the grid beyond it.
    grid = np.array([900.0, 1000.0, 1005.0, 1010.0])
    a = plot.on_grid(grid, np.array([800.0, 900.0, 1000.0]), np.array([0.0, 0.2, 0.4]))
    b = plot.on_grid(grid, np.array([810.0, 910.0, 1010.0]), np.array([0.0, 0.8, 1.0]))
    assert a.tolist() == [0.2, 0.4, 0.4, 0.4]
    assert np.nanmean([a, b], axis=0)[-1] == pytest.approx(0.7)
    short = plot.on_grid(grid, np.array([300.0, 400.0, 500.0]), np.array([0.1, 0.2, 0.3]))
    assert np.isnan(short).all()


def test_summary_table_gives_final_last_k_and_best_per_run():
    import pandas as pd

    from plotting.aggregates import summary_table

    # two runs of one group, logged out of order: run a 0..9, run b 10..19 over t_env 0..9
    rows = [("a", t, float(t)) for t in range(10)] + [("b", t, 10.0 + t) for t in reversed(range(10))]
    df = pd.DataFrame(rows, columns=["run_dir", "t_env", "value"]).assign(
        task="t", group="g", status="COMPLETED"
    )
    row = summary_table(df, "m", last=3).iloc[0]
    assert row["final_mean"] == pytest.approx((9 + 19) / 2)
    assert row["last3_mean"] == pytest.approx((8 + 18) / 2)  # mean of 7, 8, 9 and of 17, 18, 19
    assert row["last3_std"] == pytest.approx(5.0)
    assert row["best_mean"] == pytest.approx(14.0)
    assert "last5_mean" in summary_table(df, "m").columns


def test_plot_refuses_an_empty_last_window(tmp_path):
    with pytest.raises(SystemExit, match="--last must be 1 or more, not 0"):
        plot.main([str(tmp_path), "--last", "0"])


def test_aggregate_scores_each_run_by_its_last_value_or_last_k_mean(swept, tmp_path):
    import pandas as pd

    from plotting.aggregates import run_scores

    # run a logs 0..9, run b 10..19 out of order
    rows = [("a", t, float(t)) for t in range(10)] + [("b", t, 10.0 + t) for t in reversed(range(10))]
    df = pd.DataFrame(rows, columns=["run_dir", "t_env", "value"]).assign(task="t", group="g", seed=1)
    assert run_scores(df).set_index("run_dir")["final"].to_dict() == {"a": 9.0, "b": 19.0}
    assert run_scores(df, 3).set_index("run_dir")["final"].to_dict() == {"a": 8.0, "b": 18.0}
    root, _ = swept
    out = str(tmp_path / "agg")
    args = [str(root / "results"), "--status", "COMPLETED", "--out", out, "--aggregate", "iqm"]
    with pytest.warns(UserWarning, match=UNREADABLE):
        runs = load_runs(str(root / "results"), ["test_return_mean"], {"COMPLETED"})
    runs = runs.assign(group=runs["name"], task="t")
    by_run = run_scores(runs, 2)
    assert (by_run["final"] != run_scores(runs)["final"]).any()  # the window changes the scores
    with pytest.warns(UserWarning, match=UNREADABLE):
        assert plot.main(args + ["--aggregate-on", "lastK", "--last", "2"]) == 0
    with open(out + "_iqm.csv") as f:
        iqm = {r["group"]: float(r["iqm"]) for r in csv.DictReader(f)}
    # two seeds a group: the interquartile mean is their mean
    assert iqm == pytest.approx(by_run.groupby("group")["final"].mean().to_dict())
