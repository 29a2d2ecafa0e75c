"""Keys renamed to carry their family's prefix (utils/keys.py FORMER_NAMES) are still read under
their former names: in YAML files and on the command line, in a checkpoint's saved settings, in
run records and in plot filters."""

import json

import pandas as pd

from config import load_config, resumed_config
from config_keys import load_defaults
from plotting.grouping import apply_filters
from utils.keys import FORMER_NAMES, current_names
from utils.results import read_run


def test_a_former_name_on_the_command_line_sets_the_current_key_with_a_note(capsys):
    cfg = load_config(["--config=differ_qmix", "--env-config=mpe", "with", "beta_start=0.3", "warm_up=False"])
    assert cfg["selected_beta_start"] == 0.3 and cfg["selected_warm_up"] is False
    assert not set(FORMER_NAMES) & set(cfg)
    assert "beta_start: 0.3 -> selected_beta_start: 0.3" in capsys.readouterr().err


def test_a_yaml_file_with_former_names_means_the_current_keys(tmp_path):
    path = tmp_path / "differ_pymarl3.yaml"
    path.write_text("learner: q_divide_learner\nmixer: qmix\nwarm_up_ratio: 0.25\nbeta_end: 0.9\n")
    cfg = load_config([f"--config={path}", "--env-config=mpe"])
    assert cfg["selected_warm_up_ratio"] == 0.25 and cfg["selected_beta_end"] == 0.9


def test_a_checkpoint_saved_with_former_names_resumes_with_its_values(tmp_path, capsys):
    defaults = load_defaults()
    saved = {**load_config(["--config=differ_qmix", "--env-config=mpe"])}
    for former, current in FORMER_NAMES.items():
        saved[former] = saved.pop(current)
    saved["beta_start"], saved["warm_up_ratio"] = 0.35, 0.15  # not the defaults: they must survive
    config = resumed_config(str(tmp_path), saved, None, None, [], defaults)
    assert config["selected_beta_start"] == 0.35 and config["selected_warm_up_ratio"] == 0.15
    assert "beta_start read as selected_beta_start" in capsys.readouterr().err


def test_current_names_keeps_a_current_key_given_beside_its_former_one():
    cfg, renamed = current_names({"beta_start": 0.1, "selected_beta_start": 0.2, "lr": 1})
    assert cfg == {"selected_beta_start": 0.2, "lr": 1} and renamed == [("beta_start", "selected_beta_start")]


def test_old_records_read_and_filter_under_the_current_names(tmp_path):
    for i, ratio in enumerate((0.6, 0.3)):
        run = tmp_path / str(i + 1)
        run.mkdir()
        (run / "run.json").write_text(json.dumps({"status": "COMPLETED"}))
        (run / "config.json").write_text(json.dumps({"seed": i, "warm_up_ratio": ratio, "env": "mpe"}))
        (run / "metrics.json").write_text("{}")
    infos = [read_run(str(tmp_path / d))[0] for d in ("1", "2")]
    assert [i["selected_warm_up_ratio"] for i in infos] == [0.6, 0.3]
    assert not any("warm_up_ratio" in i for i in infos)
    df = pd.DataFrame(infos)
    assert len(apply_filters(df, ["warm_up_ratio=0.3"])) == 1  # the former name, as a filter
