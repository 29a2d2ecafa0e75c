"""install_sc2.sh, run offline against local copies of SMAC and SMACv2, into a throw-away
environment that sees this project's packages: afterwards protobuf and the other installed
packages keep their versions, and TensorBoard, W&B and SMAC all import.

It needs the sources: SMAC_SRC and SMACV2_SRC naming local folders or archives of oxwhirl/smac
and oxwhirl/smacv2 (and PyPI for PySC2 and the rest), so it is skipped elsewhere:

    SMAC_SRC=/src/smac SMACV2_SRC=/src/smacv2 python -m pytest tests/test_install_sc2.py
"""

import json
import os
import subprocess
import sys
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = {k: os.environ.get(k, "") for k in ("SMAC_SRC", "SMACV2_SRC")}
KEPT = ("protobuf", "googleapis-common-protos", "numpy", "torch", "tensorboard", "wandb", "ray", "sacred")
VERSIONS = (
    "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
)

pytestmark = pytest.mark.skipif(
    not all(os.path.exists(p) for p in SOURCES.values()),
    reason="SMAC_SRC and SMACV2_SRC must name local copies of SMAC and SMACv2",
)


def test_install_keeps_every_pin_and_everything_imports(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # the throw-away environment sees this one's packages, as a project venv would hold them
    with open(os.path.join(site, "project.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    before = json.loads(
        subprocess.run([python, "-c", VERSIONS, *KEPT], check=True, capture_output=True, text=True).stdout
    )
    game = tmp_path / "StarCraftII"
    (game / "Versions" / "Base75689").mkdir(parents=True)
    (game / "Versions" / "Base75689" / "SC2_x64").write_text("not a game")
    maps = game / "Maps" / "SMAC_Maps"
    maps.mkdir(parents=True)
    for name in ("3m", "32x32_flat"):
        (maps / f"{name}.SC2Map").write_text("")
    env = {**os.environ, **SOURCES, "SC2PATH": str(game), "PYTHON": python}
    env.pop("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", None)
    done = subprocess.run(
        ["bash", os.path.join(ROOT, "install_sc2.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "already at" in done.stdout and "left alone" in done.stdout  # the game is not fetched
    assert (game / "Versions" / "Base75689" / "SC2_x64").read_text() == "not a game"
    after = json.loads(
        subprocess.run([python, "-c", VERSIONS, *KEPT], check=True, capture_output=True, text=True).stdout
    )
    assert after == before
    # everything imports in one process, SMAC's through the wrapper (it picks protobuf's runtime)
    check = (
        "import sys; sys.path.insert(0, 'src');"
        "from envs.sc2_env import load_smac; from envs.smacv2_env import load_smacv2;"
        "load_smac(); load_smacv2();"
        "from s2clientprotocol import sc2api_pb2 as sc;"
        "r = sc.Request(ping=sc.RequestPing()); assert sc.Request.FromString(r.SerializeToString()) == r;"
        "from torch.utils.tensorboard import SummaryWriter; import wandb, smac.env, smacv2.env; print('ok')"
    )
    out = subprocess.run([python, "-c", check], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.stdout.strip().endswith("ok"), out.stderr[-2000:]
    # run again: SMAC is told from SMAC3 by its files, so it is not removed as SMAC3
    again = subprocess.run(
        ["bash", os.path.join(ROOT, "install_sc2.sh")], env=env, capture_output=True, text=True
    )
    assert again.returncode == 0 and "removing SMAC3" not in again.stdout, again.stdout[-2000:]
