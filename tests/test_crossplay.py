"""Teams of competitive MPE scenarios, their statistics, and cross-play evaluation: each team acts
with the controller of its own checkpoint, whatever algorithm trained it."""

import glob
import json
import os
import shutil

import numpy as np
import pytest
import torch

import main
from controllers.team_controller import TeamMAC
from envs.pettingzoo_env import PettingZooEnv
from helpers import read

ADV = "env_args.scenario=simple_adversary_v3"


def test_competitive_scenarios_declare_teams():
    teams = {
        "simple_adversary_v3": {"adversary": [0], "good": [1, 2]},
        "simple_tag_v3": {"adversary": [0, 1, 2], "good": [3]},
        "simple_push_v3": {"adversary": [0], "good": [1]},
    }
    for scenario, want in teams.items():
        env = PettingZooEnv(scenario=scenario, common_reward=False, seed=0)
        assert env.get_env_info()["teams"] == want, scenario
    assert "teams" not in PettingZooEnv(scenario="simple_spread_v3", seed=0).get_env_info()


def test_tag_touches_count_every_collision_of_the_episode():
    env = PettingZooEnv(scenario="simple_tag_v3", common_reward=False, seed=3, max_cycles=60)
    world = env.env.unwrapped.world
    good = [a for a in world.agents if not a.adversary]
    bad = [a for a in world.agents if a.adversary]
    count, done = 0, False
    while not done:
        actions = [0] * env.n_agents  # the prey stands still; adversaries chase it
        for i in env.teams["adversary"]:
            dx, dy = good[0].state.p_pos - world.agents[i].state.p_pos
            actions[i] = (2 if dx > 0 else 1) if abs(dx) > abs(dy) else (4 if dy > 0 else 3)
        _, done, info = env.step(actions)
        count += sum(
            int(np.linalg.norm(g.state.p_pos - b.state.p_pos) < g.size + b.size) for g in good for b in bad
        )
        assert ("touches" in info) == done
    assert info["touches"] == count and count > 0


def test_adversary_stats_are_final_distances_to_the_goal():
    env = PettingZooEnv(scenario="simple_adversary_v3", common_reward=False, seed=2)
    done = False
    while not done:
        _, done, info = env.step([0, 0, 0])
    world = env.env.unwrapped.world
    goal = world.agents[1].goal_a
    dist = {a.name: np.linalg.norm(a.state.p_pos - goal.state.p_pos) for a in world.agents}
    assert info["adversary_goal_dist"] == pytest.approx(dist["adversary_0"])
    assert info["good_goal_dist"] == pytest.approx(min(dist["agent_0"], dist["agent_1"]))
    assert info["good_at_goal"] == float(min(dist["agent_0"], dist["agent_1"]) < 0.15 + 0.08)


class _Fixed:
    def __init__(self, value):
        self.value = value

    def select_actions(self, batch, t_ep, t_env, bs=slice(None), test_mode=False):
        return torch.full((2, 3), self.value)

    def env_actions(self, actions, batch, t, bs):
        return actions * 10


def test_team_mac_takes_each_agent_from_its_team():
    mac = TeamMAC({"adversary": (_Fixed(1), torch.tensor([0])), "good": (_Fixed(2), torch.tensor([1, 2]))})
    actions = mac.select_actions(None, 0, 0)
    assert actions.tolist() == [[1, 2, 2], [1, 2, 2]]
    assert mac.env_actions(actions, None, 0, slice(None)).tolist() == [[10, 20, 20], [10, 20, 20]]


def train(tmp_path, config, *extra):
    results = str(tmp_path / config)
    argv = [
        f"--config={config}",
        "--env-config=mpe",
        "with",
        ADV,
        "common_reward=False",
        "t_max=200",
        "test_interval=200",
        "test_nepisode=2",
        "batch_size=2",
        "transition_batch_size=0",
        "save_model=True",
        "save_model_interval=100",
        f"local_results_path={results}",
        *extra,
    ]
    assert main.main(argv) == 0
    (models,) = glob.glob(os.path.join(results, "models", "*"))
    return models


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("xp")
    return tmp, train(tmp, "maddpg"), train(tmp, "iql", "agent=mlp")


def crossplay_argv(tmp, good, adversary, *extra):
    return [
        "--config=maddpg",
        "--env-config=mpe",
        "with",
        ADV,
        "common_reward=False",
        "evaluate=True",
        f"team_checkpoints.good={good}",
        f"team_checkpoints.adversary={adversary}",
        "test_nepisode=4",
        f"local_results_path={tmp / 'xp_eval'}",
        *extra,
    ]


def test_crossplay_loads_each_team_from_its_own_checkpoint(checkpoints, monkeypatch):
    tmp, maddpg_dir, iql_dir = checkpoints
    import assembly as tc

    built = {}
    real = tc.build_team_mac

    def spy(*a, **kw):
        built["mac"] = real(*a, **kw)
        return built["mac"]

    monkeypatch.setattr(tc, "build_team_mac", spy)
    assert main.main(crossplay_argv(tmp, maddpg_dir, iql_dir)) == 0
    macs = built["mac"].macs
    for team, folder in (("good", maddpg_dir), ("adversary", iql_dir)):
        (step,) = sorted(glob.glob(os.path.join(folder, "*")), key=lambda p: int(os.path.basename(p)))[-1:]
        saved = torch.load(os.path.join(step, "learner.th"), weights_only=True)["agent"]
        got = macs[team][0].state_dict()
        assert saved.keys() == got.keys() and all(torch.equal(saved[k], got[k]) for k in saved), team
    assert type(macs["good"][0]).__name__ == "MADDPGMAC" and type(macs["adversary"][0]).__name__ == "BasicMAC"
    (record,) = glob.glob(os.path.join(str(tmp / "xp_eval"), "sacred", "*", "*", "*", "[0-9]*"))
    metrics = read(record, "metrics.json")
    for key in ("test_good_return_mean", "test_adversary_return_mean", "test_good_at_goal_mean"):
        assert key in metrics, key
    assert "loss" not in metrics and "critic_loss" not in metrics  # nothing trained
    # the agents' returns are their team's: the good agents share one reward here
    assert metrics["test_good_return_mean"]["values"] == pytest.approx(
        metrics["test_agent1_return_mean"]["values"]
    )


def test_checkpoints_saved_before_a_new_config_key_still_play(checkpoints, tmp_path):
    # a key added to default.yaml later (here mlp_activation) takes its default
    tmp, maddpg_dir, iql_dir = checkpoints
    old = tmp_path / "old_maddpg"
    shutil.copytree(maddpg_dir, old)
    for meta_path in glob.glob(str(old / "*" / "meta.json")):
        with open(meta_path) as f:
            meta = json.load(f)
        del meta["config"]["mlp_activation"]
        with open(meta_path, "w") as f:
            json.dump(meta, f)
    assert main.main(crossplay_argv(tmp_path, old, iql_dir)) == 0


def test_bad_team_keys_are_refused(checkpoints, capsys):
    tmp, maddpg_dir, iql_dir = checkpoints
    argv = crossplay_argv(tmp, maddpg_dir, iql_dir, f"team_checkpoints.predator={iql_dir}")
    assert main.main(argv) == 2
    err = capsys.readouterr().err
    assert "unknown team predator; this env's teams are adversary, good" in err
    argv = [a for a in crossplay_argv(tmp, maddpg_dir, iql_dir) if not a.startswith("team_checkpoints.adv")]
    assert main.main(argv) == 2
    assert "no checkpoint for adversary" in capsys.readouterr().err
    argv = [a for a in crossplay_argv(tmp, maddpg_dir, iql_dir) if a != "evaluate=True"]
    assert main.main(argv) == 2
    assert "team_checkpoints (cross-play) needs evaluate=True" in capsys.readouterr().err
    spread = [
        a if a != ADV else "env_args.scenario=simple_spread_v3"
        for a in crossplay_argv(tmp, maddpg_dir, iql_dir)
    ]
    assert main.main(spread) == 2
    assert "has no teams" in capsys.readouterr().err


def test_crossplay_table_pairs_every_algorithm_seed_by_seed(tmp_path, capsys):
    import crossplay

    results = str(tmp_path / "r")
    for config in ("maddpg", "iddpg"):
        for seed in (1, 2):
            argv = [
                f"--config={config}",
                "--env-config=mpe",
                "with",
                "env_args.scenario=simple_push_v3",
                "env_args.max_cycles=10",
                "common_reward=False",
                "t_max=60",
                "test_interval=1000",
                "test_nepisode=1",
                "transition_batch_size=16",
                "save_model=True",
                f"seed={seed}",
                "experiment=tiny",
                f"local_results_path={results}",
            ]
            assert main.main(argv) == 0
    out = str(tmp_path / "table")
    assert crossplay.main(["tiny", "--results", results, "--test-nepisode", "2", "--out", out]) == 0
    text = capsys.readouterr().out
    assert text.count("cross-play simple_push_v3") == 8  # 2 x 2 pairings x 2 seeds
    import csv

    with open(out + "_simple_push_v3.csv") as f:
        rows = list(csv.DictReader(f))
    cells = {(r["metric"], r["good"], r["adversary"]): r for r in rows}
    assert len(cells) == 4 * 4 and all(r["n"] == "2" for r in rows)
    r = cells[("good_return_mean", "maddpg", "iddpg")]
    assert float(r["ci_low"]) <= float(r["mean"]) <= float(r["ci_high"])
    # the cell is the mean over seeds of the evaluations' good-team returns
    evals = crossplay.evaluated(results, "tiny_crossplay")
    found = crossplay.finished_checkpoints(results, "tiny")["simple_push_v3"]
    vals = [evals[(found["maddpg"][s], found["iddpg"][s])]["good_return_mean"] for s in (1, 2)]
    assert float(r["mean"]) == pytest.approx(np.mean(vals))
    with open(out + ".md") as f:
        assert "| good \\ adversary | iddpg | maddpg |" in f.read()
    # a second invocation evaluates nothing again
    assert crossplay.main(["tiny", "--results", results, "--test-nepisode", "2"]) == 0
    assert "cross-play simple_push_v3" not in capsys.readouterr().out
    assert crossplay.main(["nothing", "--results", results]) == 2


def test_crossplay_from_a_sweep_archive_alone(tmp_path, capsys):
    # a fresh checkout has the archive (committed) but no results/models: the final checkpoints
    # kept with archive_checkpoints are enough for the cross-play tables
    import shutil

    import crossplay
    import sweep

    results, archive = tmp_path / "r", tmp_path / "archive"
    spec = {
        "experiment": "tinyx",
        "env_config": "mpe",
        "grid": {"config": ["maddpg", "iddpg"]},
        "seeds": [1],
        "workers": 1,
        "results": str(results),
        "archive": str(archive),
        "archive_checkpoints": True,
        "overrides": {
            "env_args.scenario": "simple_push_v3",
            "env_args.max_cycles": 10,
            "common_reward": False,
            "t_max": 60,
            "test_interval": 1000,
            "test_nepisode": 1,
            "transition_batch_size": 16,
            "save_model": True,
        },
    }
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(spec))
    assert sweep.main([str(path)]) == 0
    kept = glob.glob(str(archive / "*" / "checkpoint" / "*" / "learner.th"))
    assert len(kept) == 2 and not glob.glob(str(archive / "*" / "checkpoint" / "*" / "buffer.th"))
    shutil.rmtree(results)
    fresh = tmp_path / "fresh"
    assert crossplay.main(["tinyx", "--results", str(fresh), "--test-nepisode", "2"]) == 2
    assert "no finished checkpoints" in capsys.readouterr().err
    out = str(tmp_path / "table")
    args = ["tinyx", "--results", str(fresh), "--archive", str(archive), "--test-nepisode", "2", "--out", out]
    assert crossplay.main(args) == 0
    with open(out + ".md") as f:
        assert "| good \\ adversary | iddpg | maddpg |" in f.read()
