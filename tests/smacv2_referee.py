"""SMACv2's own code as the referee of skirmish_v2's: unmodified SMACv2 (StarCraft2Env on a 10gen_
map) served from a SkirmishV2Env in the same process, as tests/smac_referee.py does for SMAC.
SMACv2's distributions draw each episode_config; SMACv2 creates the teams by debug commands, and
the controller starts skirmish_v2's battle from the same episode_config, checking the creates
(unit types, owners, points) against it. Then, step by step, the same random available actions
go to both and everything SMACv2 computes is compared with skirmish_v2's own.

    python tests/smacv2_referee.py protoss_5_vs_5 --battles 3 --options all

Needs SMACv2 (not StarCraft II); run it in a process of its own (tests/test_smac_referee.py).
"""

import copy
import random
import sys
import types

import numpy as np

import smac_referee as v1
from envs.skirmish.args import expand
from envs.skirmish.v2 import SkirmishV2Env

# SMACv2's 15 scenarios (their EPO variants draw from generators that cannot be aligned)
SCENARIOS = [
    f"{race}_{size}"
    for race in ("protoss", "terran", "zerg")
    for size in ("5_vs_5", "10_vs_10", "20_vs_20", "10_vs_11", "20_vs_23")
]
OPTIONS = {
    "default": dict(obs_own_pos=True),
    "all": dict(v1.OPTIONS["all"], obs_own_pos=True),  # SMAC's options, and SMACv2's own position
    "sparse": dict(
        reward_sparse=True, obs_all_health=False, obs_own_health=False, reward_only_positive=False
    ),
    "fov": dict(conic_fov=True, obs_own_pos=True, use_unit_ranges=True),
}
# skirmish_v2 reproduces the current SMACv2 code's enemy block (its default, "per_row", is what
# SMACv2's published results ran with: smacv2#50)
SKIRMISH_ONLY = {"sim_options": {"enemy_obs_mode": "smacv2"}}
N_UNIT_TYPES = 1979  # 32x32_flat's unit data: SMACv2 takes the last 9 (the _RL units) as its agents


class SkirmishV2Controller(v1.SkirmishController):
    """32x32_flat: no units until SMACv2 creates them; killing them all empties the map."""

    def __init__(self, sk):
        super().__init__(sk)
        self.present, self.creates, self.kill_all = False, [], False
        self.smac = None  # the SMACv2 env, for the episode_config it is creating

    def join_game(self, request):
        pass

    def data(self):
        from s2clientprotocol import data_pb2, sc2api_pb2

        return sc2api_pb2.ResponseData(units=[data_pb2.UnitTypeData(unit_id=i) for i in range(N_UNIT_TYPES)])

    def observe(self):
        return super().observe() if self.present else self._empty()

    def _empty(self):
        from s2clientprotocol import sc2api_pb2

        obs = sc2api_pb2.ResponseObservation()
        obs.observation.game_loop = self.loop
        return obs

    def debug(self, commands):
        if not isinstance(commands, (list, tuple)):  # the conic FOV's draw comes bare (PySC2 wraps it)
            commands = [commands]
        for c in commands:
            if c.HasField("create_unit"):
                self.creates.append(c.create_unit)
            elif c.HasField("kill_unit"):
                tags = set(c.kill_unit.tag)
                if self.present and tags >= {self.tags[i] for i in np.flatnonzero(self.sk.alive)}:
                    self.kill_all = True
                else:  # the health capability: agents below their level, which skirmish killed
                    self.health_kills = sorted(tags)

    def step(self, count=1):
        self.loop += count
        if self.creates:
            self._new_battle_from_creates()
        elif self.kill_all:
            self.kill_all, self.present = False, False
        elif self.pending is not None:
            self.health_kills = None
            self._check_commands(self.pending)
            self.result = self.sk.step(self.pending)
            self.pending = None

    def _new_battle_from_creates(self):
        cfg = copy.deepcopy(self.smac.episode_config)
        if self.episode == 0:  # max_reward from the first battle played, SMACv2's first episode
            self.sk.max_reward = None
        self.reset_result = self.sk.reset(cfg)
        self.episode += 1
        self.tags = [(self.episode << 10) + i + 1 for i in range(self.sk.n)]
        self.present = True
        creates, self.creates = self.creates, []
        team = cfg["team_gen"]
        wanted = [(1, self.smac.ally_unit_map[k]) for k in team["ally_team"]] + [
            (2, self.smac.enemy_unit_map[k]) for k in team["enemy_team"]
        ]
        got = [(c.owner, c.unit_type) for c in creates]
        if got != wanted:
            raise v1.Mismatch(f"SMACv2 created {got}, the episode_config says {wanted}")
        # skirmish's units are the created ones: agents sorted by type then x, y; enemies in order
        if sorted(int(t) for t in self.sk.unit_types) != sorted(t for _, t in wanted):
            raise v1.Mismatch(f"skirmish_v2 built {self.sk.unit_types.tolist()} for {wanted}")


class _SharedOrder:
    """skirmish_v2's observation stream, keeping the agents' order it draws so that SMACv2 builds
    its observations in the same one: SMACv2 shuffles the agents with Python's `random` (EPO tags
    and its enemy-block wipe depend on the order), skirmish_v2 draws from its own stream. The
    harness has skirmish_v2 build its observations first at every step."""

    def __init__(self, generator):
        self.generator, self.last = generator, None

    def permutation(self, n):
        self.last = self.generator.permutation(n)
        return self.last

    def __getattr__(self, name):
        return getattr(self.generator, name)


class _RunConfig(v1._RunConfig):
    version = None


def align(smac, sk, seed):
    """What SMACv2 draws from generators skirmish_v2 does not share, made to agree: its agents'
    observation order taken from skirmish_v2's (which builds its observations first), its
    distributions (and those inside them, which draw from OS entropy) and Python's and NumPy's
    global generators seeded from `seed`."""
    from smacv2.env.starcraft2 import starcraft2

    order = _SharedOrder(sk._obs_rng)
    sk._obs_rng = order

    def shuffle(agents):
        agents[:] = [int(i) for i in order.last]

    starcraft2.random = types.SimpleNamespace(shuffle=shuffle)
    random.seed(seed)
    np.random.seed(seed)
    todo, k = list(smac.env_key_to_distribution_map.values()), 0
    while todo:
        d = todo.pop()
        if hasattr(d, "rng"):
            d.rng, k = np.random.default_rng([seed, k]), k + 1
        todo += [v for v in vars(d).values() if hasattr(v, "generate")]


def build(scenario, seed, options):
    from smacv2.env.starcraft2 import starcraft2, wrapper

    args = expand({"scenario": scenario})
    sk = SkirmishV2Env(
        map_name=args["map_name"],
        capability_config=copy.deepcopy(args["capability_config"]),
        seed=seed,
        **options,
        **SKIRMISH_ONLY,
    )
    controller = SkirmishV2Controller(sk)
    starcraft2.run_configs.get = lambda version=None: _RunConfig(controller)
    smac = wrapper.StarCraftCapabilityEnvWrapper(
        map_name=args["map_name"],
        capability_config=copy.deepcopy(args["capability_config"]),
        seed=seed,
        **options,
    )
    controller.smac = smac.env
    align(smac, sk, seed)
    return sk, controller, smac


def lockstep(scenario, options, battles, seed=0):
    # stats=False: the wrapper's get_stats counts what its inner env counts, which v1 compares
    steps, wins = v1.play_controlled(*build(scenario, seed, options), battles, seed, stats=False)
    return {"scenario": scenario, "steps": steps, "battles": battles, "won": wins}


def main(argv=None):
    return v1.cli(argv, lockstep, SCENARIOS, OPTIONS, key="scenario", what="skirmish_v2 scenarios")


if __name__ == "__main__":
    sys.exit(main())
