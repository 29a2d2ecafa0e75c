"""Checks against the installed SMAC and SMACv2 that run in a process of their own: SMAC and SMACv2
register the same map names with PySC2 (DuplicateMapError once both are imported in one process),
and PySC2's protobuf files need protobuf's pure-Python runtime chosen before anything (TensorBoard,
W&B) loads protobuf. tests/test_sc2.py and tests/test_sc2v2.py call them.

    python tests/real_smac_checks.py env_info_smac | env_info_smacv2 | run_smac DIR | run_smacv2 DIR
"""

import sys

from envs.sc2_env import protobuf_runtime

protobuf_runtime()


def env_info_smac():
    """get_env_info() of SMAC, of our wrapper and of skirmish agree on all 23 maps (SMAC's
    constructor starts no game)."""
    from envs import sc2_env
    from envs.skirmish.env import SkirmishEnv
    from envs.skirmish.maps import MAPS

    real_class = sc2_env.load_smac()
    assert len(MAPS) == 23
    for name in MAPS:
        real = real_class(map_name=name).get_env_info()
        ours = sc2_env.StarCraft2Env(map_name=name).get_env_info()
        assert {k: ours[k] for k in real} == real, name
        sim = SkirmishEnv(map_name=name).get_env_info()
        assert {k: sim[k] for k in real} == real, name


def env_info_smacv2():
    """The same for SMACv2's 15 scenarios and their EPO variants."""
    from envs import smacv2_env
    from envs.skirmish import distributions as dist
    from envs.skirmish.args import expand
    from envs.skirmish.v2 import SkirmishV2Env

    real_class = smacv2_env.load_smacv2()
    assert len(dist.SCENARIOS) == 30
    for name in dist.SCENARIOS:
        real = real_class(**expand({"scenario": name})).get_env_info()
        ours = smacv2_env.SMACv2Env(scenario=name).get_env_info()
        assert {k: ours[k] for k in real} == real, name
        sim = SkirmishV2Env(scenario=name).get_env_info()
        assert {k: sim[k] for k in real} == real, name


def _run(env, arg, results):
    import main

    argv = [
        "--config=qmix",
        f"--env-config={env}",
        "with",
        arg,
        "t_max=200",
        "test_interval=100",
        "test_nepisode=1",
        "batch_size=2",
        f"local_results_path={results}",
    ]
    assert main.main(argv) == 0


def run_smac(results):
    _run("sc2", "env_args.map_name=3m", results)


def run_smacv2(results):
    _run("sc2v2", "env_args.scenario=protoss_5_vs_5", results)


if __name__ == "__main__":
    globals()[sys.argv[1]](*sys.argv[2:])
    print("ok")
