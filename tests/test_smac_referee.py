"""SMAC's and SMACv2's own encoders referee skirmish's (tests/smac_referee.py,
tests/smacv2_referee.py): on every SMAC map, with the observation options off, on (pathing grid,
terrain height, last action, time step) and with sparse rewards and the other health and state
switches, unmodified SMAC served from skirmish's state gives skirmish's observations, state,
available actions, rewards, terminations and stats at every step of 2 random battles; the same
for SMACv2 on its 15 scenarios (3 races, 5 sizes) against skirmish_v2, with SMACv2's
distributions drawing each episode_config, also with the conic field of view. Each option set
runs in a process of its own (SMAC parses absl flags at import; protobuf's runtime is chosen
before it loads). .ci/run installs SMAC and SMACv2 from ../shared/vendor; where they are not
installed the tests skip saying so, and where they are installed but fail, the tests fail."""

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from envs.sc2_env import smac_distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def run_referee(script, options, expected):
    env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, script), "--battles", "2", "--options", options],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    mismatches = [line for line in lines if "mismatch" in line]
    assert not mismatches, mismatches
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(lines) == expected and all(line["steps"] > 0 for line in lines)  # every map played


@pytest.mark.parametrize("options", ["default", "all", "sparse"])
def test_smac_gives_what_skirmish_gives_on_every_map(options):
    if smac_distribution() != "smac":
        pytest.skip(
            "SMAC is not installed (bash install_sc2.sh --packages-only; offline, "
            "SMAC_SRC=<SMAC's source archive> bash install_sc2.sh --packages-only)"
        )
    run_referee("smac_referee.py", options, 23)


@pytest.mark.parametrize("options", ["default", "all", "sparse", "fov"])
def test_smacv2_gives_what_skirmish_v2_gives(options):
    try:
        importlib.metadata.version("smacv2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(
            "SMACv2 is not installed (bash install_sc2.sh --packages-only; offline, "
            "SMACV2_SRC=<SMACv2's source archive> bash install_sc2.sh --packages-only)"
        )
    run_referee("smacv2_referee.py", options, 15)
