import os
import subprocess
import sys
from pathlib import Path

import pytest

from config import CONFIG_DIR, available, load_config, load_yaml
from utils.errors import ConfigError

ROOT = os.path.dirname(CONFIG_DIR)


def test_merge_order_default_env_alg_override():
    default = load_yaml(os.path.join(CONFIG_DIR, "default.yaml"))
    cfg = load_config(["--config=qmix", "--env-config=mpe"])
    assert default["t_max"] != cfg["t_max"] == 2050000  # env file over default
    assert default["optimizer"] == "rmsprop" and cfg["optimizer"] == "adam"  # alg over default
    assert cfg["mixer"] == "qmix" and cfg["name"] == "qmix"
    cfg = load_config(
        [
            "--config=qmix",
            "--env-config=mpe",
            "with",
            "t_max=123",
            "optimizer=rmsprop",
            "env_args.scenario=simple_adversary_v3",
            "env_args.N=2",
            "mixer=vdn",
        ]
    )
    assert cfg["t_max"] == 123 and cfg["optimizer"] == "rmsprop" and cfg["mixer"] == "vdn"
    assert cfg["env_args"]["scenario"] == "simple_adversary_v3" and cfg["env_args"]["N"] == 2
    assert cfg["env_args"]["max_cycles"] == 25  # untouched nested keys survive


def test_alg_file_beats_env_file(tmp_path, monkeypatch):
    algs = tmp_path / "algs"
    envs = tmp_path / "envs"
    algs.mkdir()
    envs.mkdir()
    (tmp_path / "default.yaml").write_text(Path(CONFIG_DIR, "default.yaml").read_text())
    (envs / "e.yaml").write_text(Path(CONFIG_DIR, "envs", "mpe.yaml").read_text() + "\nlr: 0.1\n")
    (algs / "a.yaml").write_text("name: a\nlr: 0.2\n")
    import config

    monkeypatch.setattr(config, "CONFIG_DIR", str(tmp_path))
    assert config.load_config(["--config=a", "--env-config=e"])["lr"] == 0.2


def test_types_are_coerced():
    cfg = load_config(["with", "t_max=2e5", "lr=1", "use_tensorboard=True", "mixer=None", "seed=7"])
    assert cfg["t_max"] == 200000 and isinstance(cfg["t_max"], int)
    assert cfg["lr"] == 1.0 and isinstance(cfg["lr"], float)
    assert cfg["use_tensorboard"] is True and cfg["mixer"] is None and cfg["seed"] == 7


def test_none_is_a_name_for_string_keys():
    # value_norm's choices include the name 'none'; the command line's none must not become null
    cfg = load_config(["--config=mappo", "with", "value_norm=none", "advantage_norm=None"])
    assert cfg["value_norm"] == "none" and cfg["advantage_norm"] == "none"
    with pytest.raises(ConfigError, match="unknown squash 'none'"):
        load_config(["--config=mappo", "with", "squash=none"])


def test_on_policy_batches_need_no_replay_buffer():
    # mappo keeps buffer_size: 10; 60 episodes per update allocate no buffer, so they are fine
    assert load_config(["--config=mappo", "with", "batch_size_run=60", "batch_size=60"])["batch_size"] == 60
    with pytest.raises(ConfigError, match="buffer_size=10 must be at least batch_size=60"):
        load_config(["with", "buffer_size=10", "batch_size=60"])


def test_vmas_keeps_its_vector_runner_over_an_algorithms_parallel_one(capsys):
    # mappo.yaml asks for 10 worker processes; VMAS steps its copies as one batch in one process
    cfg = load_config(["--config=mappo", "--env-config=vmas"])
    assert cfg["runner"] == "vector" and cfg["batch_size_run"] == 10
    assert "runner=vector instead of mappo.yaml's runner=parallel" in capsys.readouterr().err
    cfg = load_config(["--config=mappo", "--env-config=vmas", "with", "runner=parallel"])
    assert cfg["runner"] == "parallel"
    assert load_config(["--config=mappo", "--env-config=mpe"])["runner"] == "parallel"


def test_test_nepisode_rounded_to_runner_batches():
    cfg = load_config(["with", "runner=parallel", "batch_size_run=4", "test_nepisode=10"])
    assert cfg["test_nepisode"] == 8
    cfg = load_config(["with", "runner=parallel", "batch_size_run=4", "test_nepisode=2"])
    assert cfg["test_nepisode"] == 4


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (
            ["--config=qmx"],
            f"unknown --config name 'qmx'; did you mean qmix, per_qmix, hpn_qmix? "
            f"({len(available('algs'))} valid choices, listed in config/algs/)",
        ),
        (["--env-config=mpee"], "unknown --env-config name 'mpee'"),
        (["with", "t_mx=5"], "unknown config key 't_mx'"),
        (["with", "t_max=abc"], "t_max='abc' has the wrong type: expected int"),
        (["with", "use_tensorboard=3"], "use_tensorboard=3 has the wrong type: expected bool"),
        (
            ["with", "runner=paralel"],
            "unknown runner 'paralel'; valid choices: episode, parallel, vector (did you mean 'parallel'?)",
        ),
        (["with", "agent=gru"], "unknown agent 'gru'"),
        (["with", "mixer=qmixx"], "unknown mixer 'qmixx'"),
        (["with", "learner=foo"], "unknown learner 'foo'"),
        (["with", "action_selector=soft"], "unknown action_selector 'soft'"),
        (["with", "optimizer=sgd"], "unknown optimizer 'sgd'; valid choices: adam, rmsprop"),
        (["with", "hypernet_layers=3"], "unknown hypernet_layers '3'"),
        (
            ["with", "continuous_actor=sigmoid"],
            "unknown continuous_actor 'sigmoid'; valid choices: softmax, squashed_gaussian, tanh",
        ),
        (
            ["with", "train_interval_steps=-1"],
            "train_interval_steps=-1 is out of range: expected int >= 0 (default 0)",
        ),
        (
            ["with", "exploration_mode=ou"],
            "unknown exploration_mode 'ou'; valid choices: gaussian, ornstein_uhlenbeck",
        ),
        (["with", "ou_theta=0"], "ou_theta=0.0 is out of range: expected float in (0, 1]"),
        (["with", "policy_ensemble=0"], "policy_ensemble=0 is out of range: expected int >= 1"),
        (
            ["with", "policy_ensemble=3"],
            "policy_ensemble=3 needs a controller with policy ensembles (mac=maddpg_mac), not mac=basic_mac",
        ),
        (["with", "env_args.scenario=simple_spred_v3"], "did you mean 'simple_spread_v3'"),
        (["with", "env_args.foo=1"], "unknown argument of mpe2.simple_spread_v3 (env_args) 'foo'"),
        (["with", "batch_size_run=4"], "runner=episode steps one env"),
        (
            ["with", "learner=q_divide_learner", "mixer=None"],
            "learner=q_divide_learner needs a mixer (mixer=qatten or mixer=qmix or mixer=qplex or "
            "mixer=qplex_qatten or mixer=vdn)",
        ),
        (["--config=maddpg", "with", "mixer=qmix"], "learner=maddpg_learner uses no mixer; set mixer=None"),
        (
            ["--config=maddpg", "with", "mac=basic_mac"],
            "learner=maddpg_learner trains mac=maddpg_mac, not mac=basic_mac",
        ),
        (["with", "mac=maddpg_mac"], "learner=q_learner trains mac=basic_mac, not mac=maddpg_mac"),
        (["with", "selected=bogus", "learner=q_divide_learner"], "unknown selected 'bogus'"),
        (["with", "batch_size=0"], "batch_size=0 is out of range: expected int >= 1 (default 32)"),
        (["with", "common_reward=False"], "needs common_reward=True"),
        (["with", "evaluate=True"], "evaluate=True needs checkpoint_path"),
        (["with", "env_args.continuous_actions=True"], "needs a continuous-action learner"),
        (["with", "checkpoint_path=/nonexistent"], "is not a folder"),
        (["t_max=5"], "put overrides after 'with'"),
        # numeric keys: the type and range declared in default.yaml's comments
        (["with", "lr=-1"], "lr=-1.0 is out of range: expected float > 0 (default 0.0005)"),
        (["with", "lr=0"], "lr=0.0 is out of range: expected float > 0"),
        (["with", "gamma=1.5"], "gamma=1.5 is out of range: expected float in [0, 1] (default 0.99)"),
        (["with", "epsilon_start=2"], "epsilon_start=2.0 is out of range: expected float in [0, 1]"),
        (["with", "seed=abc"], "seed='abc' has the wrong type: expected int in [0, 4294967295] or null"),
        (["with", "seed=-1"], "seed=-1 is out of range: expected int in [0, 4294967295] or null"),
        (["with", "seed=1.5"], "seed=1.5 has the wrong type"),
        (["with", "critic_lr=abc"], "critic_lr='abc' has the wrong type: expected float > 0 or null"),
        (["with", "tau=nan"], "tau=nan is out of range"),
        (["with", "optim_alpha=1"], "optim_alpha=1.0 is out of range: expected float in [0, 1)"),
        # env constructor arguments: typed by the scenario's signature, judged by the scenario
        (
            ["with", "env_args.N=abc"],
            "env_args.N='abc' has the wrong type: expected int (default 3), got str",
        ),
        (["with", "env_args.N=0"], "mpe2.simple_spread_v3 cannot be built with env_args N=0: ValueError"),
        (["with", "env_args.local_ratio=2"], "cannot be built with env_args local_ratio=2.0: AssertionError"),
        (["with", "env_args.max_cycles=0"], "env_args.max_cycles=0 must be a positive integer"),
        (
            ["--env-config=skirmish", "with", "env_args.move_amount=0"],
            "env_args.move_amount=0 must be positive",
        ),
        (
            ["--env-config=skirmish", "with", "env_args.reward_win=abc"],
            "env_args.reward_win='abc' has the wrong type",
        ),
        (["--env-config=skirmish", "with", "env_args.difficulty=11"], "unknown env_args.difficulty '11'"),
        (
            ["--env-config=skirmish", "with", "env_args.seed=-3"],
            "env_args.seed=-3 must be a non-negative integer",
        ),
        # messages that say what is wrong
        (
            ["--conifg=qmix"],
            "unknown option '--conifg'; valid choices: --config, --env-config (did you mean '--config'?)",
        ),
        (["with", "t_max.x=1"], "config key 't_max.x': t_max is a value (2050000), not a section of keys"),
        (
            ["with", "lrr=1"],
            "unknown config key 'lrr'; did you mean lr, learner? (docs/configuration.md lists every key)",
        ),
    ],
)
def test_refused_inputs(argv, fragment):
    with pytest.raises(ConfigError) as e:
        load_config(argv)
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_unknown_key_message_is_short():
    with pytest.raises(ConfigError) as e:
        load_config(["with", "target_update_intervall=5"])
    assert len(str(e.value)) < 250 and str(e.value).count(",") <= 2, str(e.value)


def test_every_spec_parses_and_admits_its_default():
    from config import key_specs
    from config_keys import load_defaults

    defaults = load_defaults()  # default.yaml's keys and those components declare
    specs = key_specs()
    assert len(specs) >= 60 and {"lr", "gamma", "seed", "t_max", "optimizer"} <= set(specs)
    for key, spec in specs.items():
        assert spec.check(key, defaults[key], defaults[key]) == defaults[key], key
    numeric = [k for k, v in defaults.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    assert set(numeric) <= set(specs), set(numeric) - set(specs)  # every numeric key is declared


def test_yaml_errors_name_the_line(tmp_path, monkeypatch):
    import config

    (tmp_path / "algs").mkdir()
    (tmp_path / "envs").mkdir()
    (tmp_path / "default.yaml").write_text(Path(CONFIG_DIR, "default.yaml").read_text())
    (tmp_path / "envs" / "mpe.yaml").write_text(Path(CONFIG_DIR, "envs", "mpe.yaml").read_text())
    (tmp_path / "algs" / "bad.yaml").write_text("name: bad\nlr: 0.1\n  gamma: [1\n")
    monkeypatch.setattr(config, "CONFIG_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match=r"bad.yaml is not valid YAML \(line 3, column \d+\)"):
        config.load_config(["--config=bad"])


def test_main_refuses_with_exit_code_2_and_one_line(tmp_path):
    for args in (["--config=qmx"], ["with", "t_max=abc"], ["with", "foo=1"], ["with", "mixer=qmixx"]):
        p = subprocess.run(
            [sys.executable, os.path.join(ROOT, "src", "main.py"), *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert p.returncode == 2, p.stderr
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
        assert "Traceback" not in p.stdout + p.stderr


def test_transition_batches_fall_back_to_episodes_for_agents_with_memory(capsys):
    cfg = load_config(["--config=maddpg", "--env-config=mpe"])
    assert cfg["transition_batch_size"] == 1024 and cfg["agent"] == "mlp"
    cfg = load_config(["--config=maddpg", "--env-config=mpe", "with", "agent=rnn"])
    assert cfg["transition_batch_size"] == 0 and cfg["batch_size"] == 32
    assert "agent='rnn' needs whole episodes" in capsys.readouterr().err


@pytest.mark.parametrize("base", ["qmix", "vdn"])
def test_pymarl_baselines_differ_from_differ_only_in_what_differ_adds(base):
    # qmix_pymarl / vdn_pymarl are the like-for-like bases of differ_qmix / differ_vdn: the same
    # optimiser, targets and schedules; the DIFFER config adds its learner and selection only.
    plain = load_config([f"--config={base}_pymarl"])
    differ = load_config([f"--config=differ_{base}"])
    tuned = load_config([f"--config={base}"])
    assert (plain["optimizer"], plain["td_lambda"], plain["optim_eps"]) == ("rmsprop", 0.0, 1e-5)
    assert (tuned["optimizer"], tuned["optim_eps"]) == ("adam", 1e-8)  # PyMARL2's, not the base
    differ_only = {"name", "learner", "runner", "selected", "selected_ratio", "selected_alpha"}
    same = {k for k in plain if k not in differ_only and k not in ("alg_config",)}
    diffs = {k: (plain[k], differ[k]) for k in same if plain[k] != differ[k]}
    assert diffs == {}, diffs
    assert plain["learner"] == "q_learner" and differ["learner"] == "q_divide_learner"


@pytest.mark.parametrize(
    "method, base, env, allowed",
    [
        # ICES on SMAC against PyMARL2's QMIX: the exploration policy in place of epsilon's floor
        ("ices_qmix", "qmix_pymarl2", "skirmish_ices", {"learner", "mac", "epsilon_finish"}),
        # ICES on football against the same QPLEX alone (any env: gfootball_cds needs the game)
        ("ices_qplex", "qplex_ices", "mpe", {"learner", "mac", "epsilon_finish"}),
        # Kaleidoscope against the same agent without masks
        ("kalei_qmix", "qmix_deep", "skirmish_v2", {"agent"}),
    ],
)
def test_like_for_like_baselines_differ_only_in_the_method(method, base, env, allowed):
    a = load_config([f"--config={method}", f"--env-config={env}"])
    b = load_config([f"--config={base}", f"--env-config={env}"])
    own = ("ices_", "kalei_")  # the method's keys, inert in the baseline
    diffs = {
        k
        for k in set(a) | set(b)
        if a.get(k) != b.get(k) and not k.startswith(own) and k not in ("name", "alg_config")
    }
    assert diffs == allowed, {k: (a.get(k), b.get(k)) for k in diffs ^ allowed}
