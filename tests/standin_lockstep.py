"""Unmodified SMAC (or SMACv2) through PySC2 against the SC2 API stand-in, beside SkirmishEnv (or
SkirmishV2Env) with the same seed: the same random available actions go to both, and the
observations, states, available actions, rewards, terminations, outcomes and get_stats() must
agree (to float32 rounding) at every step.

    SC2PATH=/tmp/sc2 python tests/standin_lockstep.py 3m 2s3z --battles 20
    SC2PATH=/tmp/sc2 python tests/standin_lockstep.py --v2 protoss_5_vs_5 --battles 5

SC2PATH must hold the stand-in (python -m envs.skirmish.standin install SC2PATH). One JSON line a
map; exit 1 on the first mismatch. Run it in a process of its own (SMAC and SMACv2 both register
maps with PySC2, which refuses the same name twice in one process).
"""

import argparse
import copy
import json
import sys

import numpy as np

import smac_referee as v1
import smacv2_referee
from envs.skirmish.env import SkirmishEnv


def v1_pair(map_name, seed):
    from smac.env import StarCraft2Env

    return StarCraft2Env(map_name=map_name, seed=seed), SkirmishEnv(map_name=map_name, seed=seed)


def v2_pair(scenario, seed):
    from smacv2.env.starcraft2.wrapper import StarCraftCapabilityEnvWrapper

    from envs.skirmish.args import expand
    from envs.skirmish.v2 import SkirmishV2Env

    args = expand({"scenario": scenario})
    smac = StarCraftCapabilityEnvWrapper(
        map_name=args["map_name"], capability_config=copy.deepcopy(args["capability_config"]), seed=seed
    )
    # the stand-in builds its battles with n_units/n_enemies from the creates, on the race's 5_vs_5
    # config: the same streams as this env's
    race = args["map_name"].split("_", 1)[1]
    cap = dict(
        expand({"scenario": f"{race}_5_vs_5"})["capability_config"],
        n_units=args["capability_config"]["n_units"],
        n_enemies=args["capability_config"]["n_enemies"],
    )
    # SMACv2's current enemy block (smacv2#50), as the referee does
    sk = SkirmishV2Env(
        map_name=args["map_name"], capability_config=cap, seed=seed, sim_options={"enemy_obs_mode": "smacv2"}
    )
    sk.max_reward = None  # from the first battle SMACv2 plays, as SMACv2's
    smacv2_referee.align(smac, sk, seed)
    return smac, sk


def lockstep(name, battles, seed, v2):
    smac, sk = (v2_pair if v2 else v1_pair)(name, seed)

    def reset():
        if not v2:
            return (*smac.reset(), *sk.reset())
        config = {}  # the wrapper's reset, with skirmish first (it draws the agents' order)
        for d in smac.env_key_to_distribution_map.values():
            config = {**config, **d.generate()}
        sk_out = sk.reset(_positions_as_created(config))
        return (*smac.env.reset(config), *sk_out)

    try:
        steps, wins = v1.play(smac, sk, battles, seed, reset, sk_step=sk.step, stats=not v2)
        if not v2:
            same_healers(smac, sk)
    finally:
        smac.close()
    return {"map": name, "steps": steps, "battles": battles, "won": wins}


def same_healers(smac, sk):
    """The agents whose attack slots heal (SMAC's own rule: MMM maps, Medivacs), as SMAC placed its
    units in the last battle, against what the sc2 wrapper and skirmish declare to HPN."""
    from envs.sc2_env import wrapped_entities

    mmm = smac.map_type == "MMM"
    real = [i for i, u in sorted(smac.agents.items()) if mmm and u.unit_type == smac.medivac_id]
    declared = wrapped_entities(smac)["action_entities"]["healers"]
    ours = sk.get_env_info()["action_entities"]["healers"]
    if not real == declared == ours:
        raise v1.Mismatch(f"healers: SMAC's units {real}, the sc2 wrapper {declared}, skirmish {ours}")


def _positions_as_created(config):
    """The episode_config as the stand-in receives it: start points as float32 (protobuf)."""
    config = copy.deepcopy(config)
    for key in ("ally_start_positions", "enemy_start_positions"):
        if key in config:
            config[key]["item"] = np.asarray(config[key]["item"], dtype=np.float32).astype(np.float64)
    return config


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("maps", nargs="+")
    parser.add_argument("--battles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--v2", action="store_true", help="SMACv2 scenarios against skirmish_v2")
    args = parser.parse_args(argv)
    for name in args.maps:
        try:
            out = lockstep(name, args.battles, args.seed, args.v2)
        except v1.Mismatch as e:
            print(json.dumps({"map": name, "mismatch": str(e)}))
            return 1
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
