"""Every command the README shows runs (with a tiny t_max), and every error example prints the
line the README says, so that its examples cannot go stale."""

import glob
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


def docs_lines():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)):
        with open(path) as f:
            text = f.read().replace("\\\n", " ")  # shell line continuations
        out += [(os.path.relpath(path, ROOT), line.strip()) for line in text.splitlines()]
    return out


def docs_commands():
    """(page, argv) of every `python src/main.py` command the docs show (not the templates)."""
    found = []
    for page, line in docs_lines():
        for part in line.split("&&"):
            part = part.strip().removeprefix("$ ")
            if part.startswith("python src/main.py") and "<" not in part and "..." not in part:
                found.append((page, shlex.split(part.split(" #")[0])[2:]))
    return found


def docs_error_examples():
    lines = docs_lines()
    return [
        (page, shlex.split(line[2:])[2:], lines[i + 1][1])
        for i, (page, line) in enumerate(lines)
        if line.startswith("$ python src/main.py") and lines[i + 1][1].startswith("error: ")
    ]


@pytest.mark.parametrize("page, argv, expected", docs_error_examples())
def test_each_error_example_in_the_docs_prints_what_it_says(page, argv, expected, capsys):
    assert main.main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == expected, page


def test_every_command_in_the_docs_is_a_valid_config():
    # A doc check: each command's config loads (names, keys, types, ranges, env arguments); one
    # that needs StarCraft II or SMAC here may stop only for that. Error examples are above.
    from config import load_config
    from utils.errors import ConfigError

    examples = {tuple(argv) for _, argv, _ in docs_error_examples()}
    commands = [(page, argv) for page, argv in docs_commands() if tuple(argv) not in examples]
    assert len(commands) > 20
    for page, argv in commands:
        try:
            load_config(argv)
        except ConfigError as e:
            assert "not installed" in str(e) or "StarCraft II" in str(e), (page, argv, str(e))
