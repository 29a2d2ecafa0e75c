"""YAML files of the PyMARL family mean here what they meant there, or are refused by name; every
key of every YAML file is checked as a `with` override is."""

import math
import os

import pytest
import yaml

import main
from config import ConfigError, load_config, load_defaults
from peer_configs import PEERS
from peer_keys import IMPLIED, MISSING, RENAMED

# Refused, and the key each refusal must name (PyMARL's COMA normalises its policy over the
# unavailable actions too; PyMARL2's PPO accumulates episodes across runner calls).
REFUSED = {"pymarl/coma": {"mask_before_softmax"}, "pymarl2/ippo": {"accumulated_episodes", "use_orthogonal"}}
# What the accepted ones become, beyond the keys they share with us (checked one by one below).
HARD_200 = {"target_update_mode": "hard", "target_update_interval": 200}
EPYMARL_VALUE = {"value_norm": "none", "critic_individual_obs": False}
EXPECTED = {
    "pymarl2/qmix": {"learner": "q_learner", "mac": "basic_mac", "agent": "rnn", "td_lambda": 0.6},
    "pymarl2/vdn": {"learner": "q_learner", "mac": "basic_mac", "agent": "rnn", "td_lambda": 0.6},
    "pymarl2/coma": {
        "mac": "ac_mac",
        "return_estimator": "td_lambda",
        "td_lambda": 0.6,
        "entropy_coef": 0.09,
        "policy_epsilon_floor": True,
        "critic": "coma_critic",
    },
    "epymarl/qmix": {**HARD_200, **EPYMARL_VALUE, "agent": "mlp", "mac": "basic_mac"},
    "epymarl/vdn": {**HARD_200, **EPYMARL_VALUE, "agent": "mlp", "mac": "basic_mac"},
    "epymarl/iql": {**HARD_200, **EPYMARL_VALUE, "agent": "rnn"},
    "epymarl/coma": {
        **HARD_200,
        **EPYMARL_VALUE,
        "mac": "ac_mac",
        "critic": "coma_critic",
        "critic_hidden_dim": 64,
        "agent": "rnn",
        "return_estimator": "nstep",
    },
    "epymarl/maddpg": {**HARD_200, **EPYMARL_VALUE, "critic": "maddpg_critic", "actor_reg": 0.001},
}
for name, critic in (
    ("ia2c", "ac_critic"),
    ("ippo", "ac_critic"),
    ("maa2c", "cv_critic"),
    ("mappo", "cv_critic"),
):
    EXPECTED[f"epymarl/{name}"] = {
        **EPYMARL_VALUE,
        "mac": "ac_mac",
        "critic": critic,
        "critic_hidden_dim": 128,
        "target_update_mode": "soft",
        "tau": 0.01,
        "agent": "rnn",
    }


def load_peer(tmp_path, name):
    path = tmp_path / f"{name.replace('/', '_')}.yaml"
    path.write_text(yaml.safe_dump(PEERS[name]))
    env = "mpe" if name.startswith("epymarl/") else "skirmish"  # SMAC's env_args in PyMARL's COMA
    return load_config([f"--config={path}", f"--env-config={env}"])


@pytest.mark.parametrize("name", sorted(PEERS))
def test_a_peer_config_is_read_with_its_meaning_or_refused_by_name(tmp_path, name):
    if name in REFUSED:
        with pytest.raises(ConfigError) as e:
            load_peer(tmp_path, name)
        named = [k for k in REFUSED[name] if k in str(e.value)]
        assert named and ".yaml: " in str(e.value), str(e.value)  # names the key and the file
        return
    cfg = load_peer(tmp_path, name)
    expected = EXPECTED.get(name, {})
    ours = load_defaults()
    for key, value in PEERS[name].items():
        if key in expected or key not in ours or key == "action_selector" and value != "epsilon_greedy":
            continue
        if key == "q_nstep" and value == 0:  # their COMA's n with TD(lambda) targets: unused, dropped
            assert cfg["return_estimator"] == "td_lambda"
            continue
        if key == "env_args":
            assert value.items() <= cfg["env_args"].items(), name
        elif key in ("learner", "mac", "agent") and cfg[key] != value:
            assert key in expected, f"{name}: {key}={value!r} became {cfg[key]!r} without an expectation"
        elif isinstance(value, float):
            assert math.isclose(cfg[key], value), (name, key)
        else:
            assert cfg[key] == value, (name, key, cfg[key], value)
    for key, value in expected.items():
        assert cfg[key] == value, (name, key, cfg[key], value)
    for key in PEERS[name]:  # none of their own names is carried into the run's config
        assert key in ours or key not in cfg, (name, key)


def test_every_peer_config_is_covered():
    assert set(REFUSED) | set(EXPECTED) | {"pymarl/qmix", "pymarl/vdn", "pymarl/iql"} | {
        "pymarl2/iql",
        "pymarl3/differ_qmix",
    } == set(PEERS)


def test_an_unknown_key_in_a_yaml_file_stops_the_run_naming_file_key_and_nearest(tmp_path, capsys):
    path = tmp_path / "my_qmix.yaml"
    path.write_text("learner: q_learner\nmixer: qmix\nhiden_dim: 32\n")
    assert main.main([f"--config={path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "'hiden_dim'" in err[0] and "hidden_dim" in err[0], err


def test_a_yaml_value_of_the_wrong_type_is_refused_as_on_the_command_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("t_max: lots\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: t_max='lots' has the wrong type"):
        load_config([f"--config={path}"])


def test_a_renamed_key_is_used_under_our_name_with_a_note(tmp_path, capsys):
    path = tmp_path / "pymarl2_qmix.yaml"
    path.write_text(
        "learner: q_learner\nmixer: qmix\nrnn_hidden_dim: 256\ntarget_update_interval_or_tau: 0.01\n"
    )
    cfg = load_config([f"--config={path}"])
    assert cfg["hidden_dim"] == 256 and "rnn_hidden_dim" not in cfg
    assert cfg["target_update_mode"] == "soft" and cfg["tau"] == 0.01
    err = capsys.readouterr().err
    assert "rnn_hidden_dim: 256 -> hidden_dim: 256" in err and "tau: 0.01" in err


def test_a_peer_key_on_the_command_line_after_a_yaml_file_means_ours(tmp_path):
    # it used to run and record rnn_hidden_dim: 128 beside hidden_dim: 64, as if it had applied
    path = tmp_path / "my_differ.yaml"
    path.write_text("learner: q_divide_learner\nmixer: qmix\nrnn_hidden_dim: 256\n")
    cfg = load_config([f"--config={path}", "with", "rnn_hidden_dim=128"])
    assert cfg["hidden_dim"] == 128 and "rnn_hidden_dim" not in cfg
    cfg = load_config([f"--config={path}", "with", "hidden_dim=96"])
    assert cfg["hidden_dim"] == 96


@pytest.mark.parametrize(
    "text, key",
    [
        ("learner: q_learner\nagent_output_type: pi_logits\n", "agent_output_type"),
        ("learner: q_learner\nreturn_priority: True\n", "return_priority"),
        ("learner: q_learner\nq_lambda: True\n", "q_lambda"),
        ("learner: ppo_learner\nmac: ac_mac\naccumulated_episodes: 4\n", "accumulated_episodes"),
    ],
)
def test_a_feature_we_lack_is_refused_by_name(tmp_path, text, key):
    path = tmp_path / "peer.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=key):
        load_config([f"--config={path}"])


def test_an_implied_value_is_accepted_and_changes_nothing(tmp_path):
    path = tmp_path / "peer.yaml"
    path.write_text("learner: q_learner\nagent_output_type: q\nlabel: x\n")
    cfg = load_config([f"--config={path}"])
    plain = load_config(["--config=qmix"])
    for key in ("agent_output_type", "label"):
        assert key not in cfg
    assert cfg["learner"] == plain["learner"] == "q_learner"


def test_env_config_takes_a_path_and_a_missing_file_is_named(tmp_path):
    path = tmp_path / "my_env.yaml"
    path.write_text("env: mpe\nenv_args:\n  scenario: simple_spread_v3\n  max_cycles: 10\n")
    assert load_config([f"--env-config={path}"])["env_args"]["max_cycles"] == 10
    with pytest.raises(ConfigError, match="no such file"):
        load_config([f"--config={tmp_path / 'nope.yaml'}"])
    with pytest.raises(
        ConfigError, match=r"no such file; did you mean --config=qmix \(config/algs/qmix.yaml\)"
    ):
        load_config(["--config=qmix.yaml"])


def test_the_docs_list_every_key_of_the_tables():
    import os

    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs", "peer_configs.md")) as f:
        readme = f.read()
    missing = [k for k in (*RENAMED, *IMPLIED, *MISSING) if f"`{k}`" not in readme]
    assert not missing, missing


def test_pymarl2_per_keys_are_ours(tmp_path):
    path = tmp_path / "per.yaml"
    path.write_text("learner: nq_learner\nmixer: qmix\nuse_per: True\nper_alpha: 0.5\nper_beta: 0.3\n")
    cfg = load_config([f"--config={path}"])
    assert cfg["use_per"] is True and cfg["per_alpha"] == 0.5 and cfg["per_beta_start"] == 0.3
    assert "per_beta" not in cfg


def test_the_researchers_sharing_keys_in_yaml_and_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "learner: q_divide_learner\nmixer: qmix\nESR_selected_ratio_end: 0.4\nESR_warm_up_ratio: 0.5\n"
        "probability_temperature: 1.4\nprobabilities_version: 1\nreceive_version: 2\n"
    )
    cfg = load_config([f"--config={path}"])
    assert (cfg["share_ratio_end"], cfg["share_warm_up_ratio"], cfg["share_temperature"]) == (0.4, 0.5, 1.4)
    assert (cfg["share_rule"], cfg["receive_rule"]) == ("density", "sigmoid_gate")
    assert "probabilities_version" in capsys.readouterr().err  # each with its note
    cfg = load_config(["--config=inspire_qmix", "with", "probabilities_version=2", "receive_version=0"])
    assert (cfg["share_rule"], cfg["receive_rule"]) == ("joint_density", "all")
    notes = capsys.readouterr().err
    assert "probabilities_version" in notes and "receive_version" in notes
    with pytest.raises(ConfigError, match="probabilities_version: 3"):
        load_config(["--config=inspire_qmix", "with", "probabilities_version=3"])


def test_a_shipped_config_in_its_authors_names_says_so_in_one_line(capsys):
    # inspire_published keeps the published file's 17 peer keys: one note per run, not 17; the
    # command the note names lists each key's reading.
    import subprocess
    import sys

    cfg = load_config(["--config=inspire_published"])
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: config/algs/inspire_published.yaml keeps its authors' key names: 17 read as ours "
        "(`python src/config.py --config=inspire_published` lists them)"
    ]
    assert cfg["share_ratio_end"] == 0 and cfg["learner"] == "q_divide_learner"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, os.path.join(root, "src", "config.py"), "--config=inspire_published"],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    ).stdout.splitlines()
    assert len(out) == 17 and all(
        line.startswith("note: config/algs/inspire_published.yaml: ") for line in out
    )
    assert (
        "note: config/algs/inspire_published.yaml: ESR_warm_up_ratio: 0.6 -> share_warm_up_ratio: 0.6"
        in out[14]
    )
