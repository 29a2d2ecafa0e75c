"""The SC2 API stand-in (envs/skirmish/standin.py) behind unmodified SMAC, SMACv2 and PySC2:
SMAC through it equals SkirmishEnv step for step (20 battles a map on 3m, 2s3z, MMM2, corridor and
2m_vs_1z), SMACv2 equals skirmish_v2 (20 battles each on protoss/terran/zerg 5_vs_5), main.py runs
--env-config=sc2 and sc2v2 end to end on it, and a stand-in that dies mid-run ends the run with the
one-line launch error. Each case runs in a process of its own (SMAC and SMACv2 register the same
map names with PySC2, which refuses that in one process). .ci/run installs SMAC, SMACv2 and PySC2
from ../shared/vendor; without them these tests skip saying so."""

import glob
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from envs.sc2_env import smac_distribution
from envs.skirmish import standin

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HAVE = {
    "smac": smac_distribution() == "smac",
    "smacv2": importlib.util.find_spec("smacv2") is not None,
    "pysc2": all(importlib.util.find_spec(m) is not None for m in ("pysc2", "s2clientprotocol", "websocket")),
}
INSTALL = "bash install_sc2.sh --packages-only; offline, give SMAC_SRC and SMACV2_SRC as source archives"


def needs(*packages):
    missing = [p for p in packages if not HAVE[p]]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not installed ({INSTALL})")


@pytest.fixture(scope="module")
def sc2path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("StarCraftII"))
    standin.install(path)
    return path


def run(args, sc2path, timeout=600):
    env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    env["SC2PATH"] = sc2path
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


def run_main(sc2path, results, *overrides, config="qmix", env="sc2", timeout=600):
    """src/main.py in a process of its own, on the game (or stand-in) at sc2path."""
    argv = ["src/main.py", f"--config={config}", f"--env-config={env}", "with", *overrides]
    return run([*argv, f"local_results_path={results}"], sc2path, timeout=timeout)


def lockstep_lines(done):
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert not [line for line in lines if "mismatch" in line], lines
    assert done.returncode == 0, done.stderr[-3000:]
    return lines


def test_the_launcher_is_where_pysc2_looks(sc2path):
    launcher = os.path.join(sc2path, "Versions", "Base75689", "SC2_x64")
    assert os.access(launcher, os.X_OK)
    maps = {os.path.basename(p) for p in glob.glob(os.path.join(sc2path, "Maps", "SMAC_Maps", "*.SC2Map"))}
    assert {"3m.SC2Map", "MMM2.SC2Map", "32x32_flat.SC2Map"} <= maps


@needs("smac", "pysc2")
def test_smac_through_the_standin_equals_skirmish_step_for_step(sc2path):
    maps = ["3m", "2s3z", "MMM2", "corridor", "2m_vs_1z"]
    lines = lockstep_lines(run(["tests/standin_lockstep.py", *maps, "--battles", "20"], sc2path))
    assert [line["map"] for line in lines] == maps and all(line["battles"] == 20 for line in lines)


@needs("smacv2", "pysc2")
def test_smacv2_through_the_standin_equals_skirmish_v2(sc2path):
    scenarios = ["protoss_5_vs_5", "terran_5_vs_5", "zerg_5_vs_5"]
    lines = lockstep_lines(run(["tests/standin_lockstep.py", "--v2", *scenarios, "--battles", "20"], sc2path))
    assert [line["map"] for line in lines] == scenarios


@pytest.mark.parametrize(
    "config, env, arg",
    [
        ("qmix", "sc2", "env_args.map_name=3m"),
        ("differ_qmix", "sc2", "env_args.map_name=3m"),
        ("qmix", "sc2v2", "env_args.scenario=protoss_5_vs_5"),
    ],
)
def test_main_runs_on_the_standin(sc2path, tmp_path, config, env, arg):
    if not (HAVE["smacv2" if env == "sc2v2" else "smac"] and HAVE["pysc2"]):
        pytest.skip(f"SMAC{'v2' if env == 'sc2v2' else ''} or PySC2 not installed ({INSTALL})")
    # small batches and test phases: training and testing both happen, in a fraction of the time
    short = ["t_max=800", "batch_size=8", "test_nepisode=8"]
    done = run_main(sc2path, tmp_path, arg, *short, config=config, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = glob.glob(os.path.join(str(tmp_path), "sacred", "*", "*", "*", "[0-9]*"))
    with open(os.path.join(record, "run.json")) as f:
        assert json.load(f)["status"] == "COMPLETED"
    with open(os.path.join(record, "metrics.json")) as f:
        metrics = json.load(f)
    assert metrics["test_battle_won_mean"]["steps"] and any(k.endswith("loss") for k in metrics)


@needs("smac", "pysc2")
def test_a_standin_that_dies_mid_run_ends_it_with_the_launch_error(sc2path, tmp_path):
    # serves 12 s, then dies; SMAC relaunches it, and the second launch fails
    game = tmp_path / "StarCraftII"
    standin.install(str(game))
    launcher = game / "Versions" / "Base75689" / "SC2_x64"
    script = launcher.read_text().splitlines()
    marker = tmp_path / "launched"
    body = "\n".join(line for line in script if not line.startswith("exec "))
    exec_line = next(line for line in script if line.startswith("exec "))
    launcher.write_text(
        f"{body}\nif [ -e '{marker}' ]; then sleep 2; exit 1; fi\ntouch '{marker}'\n"
        f"{exec_line.replace('exec ', 'exec timeout 12 ', 1)}\n"
    )
    done = run_main(str(game), tmp_path / "results", "env_args.map_name=3m", "t_max=100000", timeout=300)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "did not start" in last and "StarCraft II at" in last, last
    (record,) = glob.glob(os.path.join(str(tmp_path / "results"), "sacred", "*", "*", "*", "[0-9]*"))
    with open(os.path.join(record, "run.json")) as f:
        assert json.load(f)["status"] == "FAILED"


@needs("pysc2")
def test_pysc2_alone_replays_smacs_requests(sc2path):
    # create, join, game_info, observe, a move, step 8, a kill of every unit, step 2, data
    done = run(["tests/standin_pysc2.py"], sc2path, timeout=120)
    assert done.stdout.strip().splitlines()[-1:] == ["ok"], done.stdout[-2000:] + done.stderr[-2000:]


@needs("smac", "pysc2")
def test_a_game_that_never_answers_ends_the_run_within_sc2_timeout(tmp_path):
    game = tmp_path / "StarCraftII"
    launcher = standin.install(str(game))
    with open(launcher, "w") as f:  # accepts PySC2's WebSocket, then says nothing
        f.write(f'#!/bin/sh\nexec "{sys.executable}" "{os.path.join(HERE, "silent_sc2.py")}" "$@"\n')
    done = run_main(
        str(game),
        tmp_path / "results",
        "env_args.map_name=3m",
        "env_args.sc2_timeout=5",
        "t_max=2000",
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "did not start" in last and "timed out" in last, last
