"""Keys declared beside the code that reads them (utils/keys.py): a newcomer's learner brings its
own key in its own file, and the command line, the checks and the generated docs table see it."""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from config_keys import DOCS_PAGE, ROOT, key_table, load_defaults
from utils import keys as keys_module
from utils.errors import ConfigError


def test_docs_key_table_is_the_generated_one():
    with open(DOCS_PAGE) as f:
        page = f.read()
    assert key_table() in page, "run: python src/config_keys.py --docs"


def test_declared_keys_join_the_defaults_and_are_checked():
    defaults = load_defaults()
    assert defaults["ices_int_ratio"] == 0.1 and defaults["kalei_layer_weights"] == [1.0, 2.0, 4.0, 8.0]
    from config import load_config

    with pytest.raises(ConfigError, match=r"ices_world_z_dim=0 is out of range: expected int >= 1"):
        load_config(["--config=ices_qmix", "--env-config=skirmish_ices", "with", "ices_world_z_dim=0"])


def test_a_key_both_in_default_yaml_and_declared_is_refused(monkeypatch):
    monkeypatch.setitem(keys_module.DECLARED, "lr", keys_module.Key("lr", 0.1, None, "", "x", "learners.toy"))
    with pytest.raises(ConfigError, match="'lr' is in config/default.yaml and declared by learners.toy"):
        load_defaults()


def test_two_modules_cannot_declare_one_name(monkeypatch):
    monkeypatch.setattr(keys_module, "DECLARED", {})
    keys_module.declare_keys("a", ("same_key", 1, "int >= 0", "one"))
    keys_module.declare_keys("a", ("same_key", 1, "int >= 0", "one"))  # the same module again: fine
    with pytest.raises(ValueError, match="declared by both"):
        exec(
            compile("declare_keys('b', ('same_key', 2, None, 'two'))", "other", "exec"),
            {
                "__name__": "other_module",
                "declare_keys": keys_module.declare_keys,
            },
        )


TOY_LEARNER = '''"""A newcomer's learner: QMIX's update with the TD loss scaled by toy_scale."""

from learners.q_learner import QLearner
from utils.keys import declare_keys

declare_keys("Toy (learner toy_learner)", ("toy_scale", 1.0, "float > 0", "factor on the TD loss"))


class ToyLearner(QLearner):
    def __init__(self, mac, scheme, logger, args):
        super().__init__(mac, scheme, logger, args)
        self.toy_scale = args.toy_scale
'''


def test_a_newcomers_learner_is_a_file_a_registry_line_and_a_yaml(tmp_path):
    # a copy of the project as a newcomer has it; then only the three additions
    for part in ("src", "config"):
        shutil.copytree(
            os.path.join(ROOT, part), tmp_path / part, ignore=shutil.ignore_patterns("__pycache__")
        )
    (tmp_path / "docs").mkdir()
    shutil.copy(DOCS_PAGE, tmp_path / "docs" / "configuration.md")
    (tmp_path / "src" / "learners" / "toy_learner.py").write_text(TOY_LEARNER)
    with open(tmp_path / "src" / "learners" / "__init__.py", "a") as f:
        f.write(
            '\nfrom .toy_learner import ToyLearner  # noqa: E402\n\nREGISTRY["toy_learner"] = ToyLearner\n'
        )
    (tmp_path / "config" / "algs" / "toy.yaml").write_text(
        "learner: toy_learner\nmixer: vdn\ntoy_scale: 2.0\n"
    )

    def main(*args):
        return subprocess.run(
            [sys.executable, "src/main.py", "--config=toy", "--env-config=mpe", "with", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )

    bad = main("toy_scale=-1", "t_max=100")
    assert bad.returncode == 2, bad.stderr
    assert "toy_scale=-1.0 is out of range: expected float > 0 (default 1.0)" in bad.stderr
    typo = main("toy_scal=3", "t_max=100")
    assert typo.returncode == 2 and "toy_scal" in typo.stderr and "toy_scale" in typo.stderr
    good = main("t_max=100", "test_nepisode=2", "torch_threads=1", "save_model=False")
    assert good.returncode == 0, good.stderr[-2000:]
    (config,) = glob.glob(str(tmp_path / "results" / "sacred" / "**" / "config.json"), recursive=True)
    with open(config) as f:
        recorded = json.load(f)
    assert recorded["learner"] == "toy_learner" and recorded["toy_scale"] == 2.0
    docs = subprocess.run(
        [sys.executable, "src/config_keys.py", "--docs"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert docs.returncode == 0, docs.stderr
    page = (tmp_path / "docs" / "configuration.md").read_text()
    assert "### Toy (learner toy_learner)" in page and "Declared in src/learners/toy_learner.py." in page
    assert "| `toy_scale` | `1.0` | float > 0 | factor on the TD loss |" in page
