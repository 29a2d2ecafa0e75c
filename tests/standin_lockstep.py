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
import os
import random
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import smac_referee as v1  # noqa: E402  (src/ on the path, protobuf's runtime chosen)
import smacv2_referee  # noqa: E402
from envs.skirmish.env import SkirmishEnv  # noqa: E402


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
    # SMACv2 builds the agents' observations in an order from Python's random; it takes skirmish's
    order = smacv2_referee._SharedOrder(sk._obs_rng)
    sk._obs_rng = order

    def shuffle(agents):
        agents[:] = [int(i) for i in order.last]

    from smacv2.env.starcraft2 import starcraft2

    starcraft2.random = types.SimpleNamespace(shuffle=shuffle)
    random.seed(seed)
    np.random.seed(seed)
    todo, k = list(smac.env_key_to_distribution_map.values()), 0
    while todo:  # SMACv2's distributions draw from OS entropy: seeded here so a run repeats
        d = todo.pop()
        if hasattr(d, "rng"):
            d.rng, k = np.random.default_rng([seed, k]), k + 1
        todo += [v for v in vars(d).values() if hasattr(v, "generate")]
    return smac, sk


def lockstep(name, battles, seed, v2):
    smac, sk = (v2_pair if v2 else v1_pair)(name, seed)
    rng = np.random.default_rng(seed)
    steps = wins = 0
    try:
        for battle in range(battles):
            if v2:  # the wrapper's reset, with skirmish first (it draws the agents' order)
                config = {}
                for d in smac.env_key_to_distribution_map.values():
                    config = {**config, **d.generate()}
                sk_obs, sk_state = sk.reset(_positions_as_created(config))
                obs, state = smac.env.reset(config)
            else:
                obs, state = smac.reset()
                sk_obs, sk_state = sk.reset()
            v1.same(f"battle {battle} reset obs", obs, sk_obs)
            v1.same(f"battle {battle} reset state", state, sk_state)
            for t in range(smac.episode_limit + 1):
                avail = np.asarray(smac.get_avail_actions())
                v1.same(f"battle {battle} step {t} avail", avail, sk.get_avail_actions(), atol=0)
                actions = [int(rng.choice(np.flatnonzero(row))) for row in avail]
                reward, terminated, info = smac.step(actions)
                sk_reward, sk_terminated, sk_info = sk.step(actions)
                where = f"battle {battle} step {t}"
                v1.same(f"{where} reward", reward, sk_reward)
                if terminated != sk_terminated or bool(info["battle_won"]) != bool(sk_info["battle_won"]):
                    ends = f"SMAC ends {terminated, info}, skirmish {sk_terminated, sk_info}"
                    raise v1.Mismatch(f"{where}: {ends}")
                sk_obs = sk.get_obs()
                v1.same(f"{where} obs", smac.get_obs(), sk_obs)
                v1.same(f"{where} state", smac.get_state(), sk.get_state())
                steps += 1
                if terminated:
                    wins += bool(info["battle_won"])
                    break
            if not v2:
                ours, theirs = sk.get_stats(), smac.get_stats()
                for key in ("battles_won", "battles_game", "battles_draw", "timeouts"):
                    if ours[key] != theirs[key]:
                        stats = f"SMAC {theirs[key]}, skirmish {ours[key]}"
                        raise v1.Mismatch(f"battle {battle} stats {key}: {stats}")
    finally:
        smac.close()
    return {"map": name, "steps": steps, "battles": battles, "won": wins}


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
