"""Every command the README shows runs (with a tiny t_max), and every error example prints the
line the README says, so that its examples cannot go stale."""

import os
import re
import shlex
import subprocess
import sys

import pytest

import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = [
    "t_max=200",
    "test_nepisode=2",
    "test_interval=100",
    "log_interval=100",
    "batch_size=4",
    "buffer_size=16",
]


def readme_lines():
    with open(os.path.join(ROOT, "README.md")) as f:
        return [line.strip() for line in f]


def commands(program):
    """The README's commands of src/<program> (not the templates with <...>)."""
    found = []
    for line in readme_lines():
        for part in line.split("&&"):  # the set-up commands chain theirs
            part = part.strip()
            if part.startswith(f"python src/{program}") and "<" not in part:
                found.append(shlex.split(part)[2:])
    return found


def error_examples():
    lines = readme_lines()
    return [
        (shlex.split(line[2:])[2:], lines[i + 1])
        for i, line in enumerate(lines)
        if line.startswith("$ python src/main.py") and lines[i + 1].startswith("error: ")
    ]


def test_the_readme_shows_commands_of_each_kind():
    assert commands("main.py") and commands("plot.py") and commands("sweep.py") and len(error_examples()) >= 3
    setup = [line for line in readme_lines() if line.startswith("python3 -m venv")]
    assert len(setup) == 2 and setup[1].endswith("python -m pytest")  # the set-up commands come first
    assert readme_lines().index(setup[0]) < 30


@pytest.mark.parametrize("argv, expected", error_examples())
def test_each_error_example_prints_what_the_readme_says(argv, expected, capsys):
    assert main.main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == expected


def test_the_readmes_commands_run(tmp_path):
    results = tmp_path / "results"
    for argv in commands("main.py"):
        argv = argv + ([] if "with" in argv else ["with"]) + TINY + [f"local_results_path={results}"]
        assert main.main(argv) == 0, argv
    for argv in commands("plot.py"):
        done = subprocess.run([sys.executable, os.path.join(ROOT, "src", "plot.py"), *argv], cwd=tmp_path)
        assert done.returncode == 0, argv
        out = [a for a in argv if a.startswith("results/")][-1]
        assert any(
            p.name.startswith(os.path.basename(out)) for p in (tmp_path / os.path.dirname(out)).iterdir()
        )
    for argv in commands("sweep.py"):
        extra = [*TINY, f"local_results_path={tmp_path / 'sweep'}"]
        done = subprocess.run(
            [sys.executable, os.path.join(ROOT, "src", "sweep.py"), *argv, *extra], cwd=ROOT
        )
        assert done.returncode == 0, argv
        runs = re.findall(r"--seeds (\S+)", " ".join(argv))[0].split(",")
        records = list((tmp_path / "sweep" / "sacred").rglob("run.json"))
        assert len(records) == len(runs)
