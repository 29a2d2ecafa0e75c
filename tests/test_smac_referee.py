"""SMAC's own encoder referees skirmish's (tests/smac_referee.py): on every SMAC map, with the
observation options off, on (pathing grid, terrain height, last action, time step) and with sparse
rewards and the other health and state switches, unmodified SMAC served from skirmish's state
gives skirmish's observations, state, available actions, rewards, terminations and stats at every
step of 2 random battles. Each option set runs in a process of its own (SMAC parses absl flags at
import; protobuf's runtime is chosen before it loads). .ci/run installs SMAC from
../shared/vendor; where SMAC is not installed the test skips saying so, and where it is installed
but fails, the test fails."""

import json
import os
import subprocess
import sys

import pytest

from envs.sc2_env import smac_distribution

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("options", ["default", "all", "sparse"])
def test_smac_gives_what_skirmish_gives_on_every_map(options):
    if smac_distribution() != "smac":
        pytest.skip(
            "SMAC is not installed "
            "(SMAC_SRC=../shared/vendor/smac-src.tar.gz bash install_sc2.sh --packages-only)"
        )
    env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "smac_referee.py"), "--battles", "2", "--options", options],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    mismatches = [line for line in lines if "mismatch" in line]
    assert not mismatches, mismatches
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(lines) == 23 and all(line["steps"] > 0 for line in lines)  # every SMAC map played
