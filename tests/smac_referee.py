"""SMAC's own code as the referee of skirmish's: unmodified `smac.env.StarCraft2Env` is served
from a SkirmishEnv in the same process (the SC2 API's messages built from skirmish's state by
envs/skirmish/sc2_protocol.py, through a controller object in place of PySC2's), the same random
available actions go to both, and SMAC's observations, state, available actions, reward,
termination and stats are compared with skirmish's own at every step.

    python tests/smac_referee.py 3m 2s3z --battles 3 --options all

Prints one JSON line per map and option set; exits 1 on the first mismatch, naming it. Needs
SMAC (install_sc2.sh, or pip install --no-deps from ../shared/vendor) but not StarCraft II; run
it in a process of its own (tests/test_smac_referee.py does): SMAC parses absl flags at import,
and protobuf's runtime must be chosen before anything loads protobuf.
"""

import argparse
import json
import sys

import numpy as np

from envs.sc2_env import protobuf_runtime

protobuf_runtime()

from envs.skirmish import sc2_protocol  # noqa: E402
from envs.skirmish.env import SkirmishEnv  # noqa: E402
from envs.skirmish.maps import MAPS  # noqa: E402

OPTIONS = {
    "default": {},
    "all": dict(
        obs_pathing_grid=True,
        obs_terrain_height=True,
        obs_last_action=True,
        obs_timestep_number=True,
        state_timestep_number=True,
        state_last_action=False,
    ),
    "sparse": dict(reward_sparse=True, obs_all_health=False, obs_own_health=False, obs_instead_of_state=True),
}


class Mismatch(AssertionError):
    pass


class SkirmishController:
    """What PySC2's RemoteController offers SMAC, answered from a SkirmishEnv: the battle
    restarts when SMAC kills every unit and steps, and a step plays the actions the harness
    gave (`pending`), which SMAC's raw commands must match."""

    def __init__(self, sk):
        self.sk, self.loop, self.episode = sk, 0, 0
        self.pending = self.result = None
        self.killed = False
        self.tags = None

    def _new_battle(self):
        self.reset_result = self.sk.reset()
        self.episode += 1
        # unique across battles, as SC2's are; never 0
        self.tags = [(self.episode << 10) + i + 1 for i in range(self.sk.n)]

    def create_game(self, request):
        self.seed = request.random_seed

    def join_game(self, request):
        self._new_battle()

    def game_info(self):
        return sc2_protocol.game_info(self.sk)

    def observe(self):
        return sc2_protocol.observation(self.sk, self.tags, self.loop)

    def actions(self, request):
        self.commands = [a.action_raw.unit_command for a in request.actions]

    def step(self, count=1):
        self.loop += count
        if self.killed:
            self.killed = False
            self._new_battle()
        elif self.pending is not None:
            self._check_commands(self.pending)
            self.result = self.sk.step(self.pending)
            self.pending = None

    def _check_commands(self, actions):
        """SMAC's raw commands say what skirmish's action ints mean: stop 4, move 16 to the
        unit's position +- move_amount, attack 23 / heal 386 on the target's tag."""
        by_tag = {c.unit_tags[0]: c for c in self.commands}
        na, first = self.sk.n_agents, self.sk.n_actions_no_attack  # SMACv2: facing actions before
        for i, a in enumerate(actions):
            a = int(a)
            c = by_tag.get(self.tags[i])
            if a == 0 or 6 <= a < first or not self.sk.alive[i]:
                if c is not None:
                    raise Mismatch(f"agent {i} action {a}: SMAC sent {c}")
                continue
            if c is None:
                raise Mismatch(f"agent {i} action {a}: SMAC sent no command")
            if a == 1:
                ok = c.ability_id == 4
            elif a < 6:
                dx, dy = [(0, 2), (0, -2), (2, 0), (-2, 0)][a - 2]
                p = c.target_world_space_pos
                ok = c.ability_id == 16 and np.allclose([p.x, p.y], self.sk.pos[i] + [dx, dy], atol=1e-4)
            else:
                j = a - first
                target = j if self.sk.is_medivac[i] else na + j
                ok = (
                    c.ability_id == (386 if self.sk.is_medivac[i] else 23)
                    and c.target_unit_tag == self.tags[target]
                )
            if not ok:
                raise Mismatch(f"agent {i} action {a}: SMAC sent {c}")

    def debug(self, commands):
        if any(c.HasField("kill_unit") for c in commands):
            self.killed = True

    def save_replay(self):
        return b""

    def quit(self):
        pass

    def close(self):
        pass


class _Process:
    def __init__(self, controller):
        self.controller = controller

    def close(self):
        pass


class _RunConfig:
    def __init__(self, controller):
        self.controller = controller

    def start(self, **kwargs):
        return _Process(self.controller)

    def map_data(self, path):
        return b""


def build(map_name, seed, options):
    from smac.env.starcraft2 import starcraft2

    sk = SkirmishEnv(map_name=map_name, seed=seed, **options)
    controller = SkirmishController(sk)
    starcraft2.run_configs.get = lambda version=None: _RunConfig(controller)
    smac = starcraft2.StarCraft2Env(map_name=map_name, seed=seed, **options)
    return sk, controller, smac


def same(what, a, b, atol=1e-5):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise Mismatch(f"{what}: SMAC's shape {a.shape}, skirmish's {b.shape}")
    if not np.allclose(a, b, atol=atol, rtol=1e-5):
        where = np.argwhere(~np.isclose(a, b, atol=atol, rtol=1e-5))[:3].tolist()
        raise Mismatch(f"{what}: differ at {where}: SMAC {a[tuple(where[0])]}, skirmish {b[tuple(where[0])]}")


def play(smac, sk, battles, seed, reset, sk_step, before=None, stats=True):
    """The lockstep both referees and the stand-in's test share: `battles` battles, the same random
    available actions to both, every output compared. reset() starts a battle in both and returns
    (SMAC's obs, state, skirmish's obs, state); before(actions), if given, runs before SMAC's step;
    sk_step(actions), after it, gives skirmish's (reward, terminated, info) for the step (played
    beside SMAC's, or inside it by a controller). Skirmish builds its observations first at every
    step (SMACv2 may take its agents' order from it). -> (steps, wins)."""
    rng = np.random.default_rng(seed)
    steps = wins = 0
    for battle in range(battles):
        obs, state, sk_obs, sk_state = reset()
        same(f"battle {battle} reset obs", obs, sk_obs)
        same(f"battle {battle} reset state", state, sk_state)
        for t in range(smac.episode_limit + 1):
            avail = np.asarray(smac.get_avail_actions())
            same(f"battle {battle} step {t} avail", avail, sk.get_avail_actions(), atol=0)
            actions = [int(rng.choice(np.flatnonzero(row))) for row in avail]
            if before is not None:
                before(actions)
            reward, terminated, info = smac.step(actions)
            sk_reward, sk_terminated, sk_info = sk_step(actions)
            where = f"battle {battle} step {t}"
            same(f"{where} reward", reward, sk_reward)
            if terminated != sk_terminated or bool(info["battle_won"]) != bool(sk_info["battle_won"]):
                raise Mismatch(f"{where}: SMAC ends {terminated, info}, skirmish {sk_terminated, sk_info}")
            sk_obs = sk.get_obs()
            same(f"{where} obs", smac.get_obs(), sk_obs)
            same(f"{where} state", smac.get_state(), sk.get_state())
            steps += 1
            if terminated:
                wins += bool(info["battle_won"])
                break
        if stats:
            ours, theirs = sk.get_stats(), smac.get_stats()
            for key in ("battles_won", "battles_game", "battles_draw", "timeouts"):
                if ours[key] != theirs[key]:
                    raise Mismatch(f"battle {battle} stats {key}: SMAC {theirs[key]}, skirmish {ours[key]}")
    return steps, wins


def play_controlled(sk, controller, smac, battles, seed, stats=True):
    """play() with skirmish stepped by the controller inside SMAC's own step; closes both."""
    try:
        return play(
            smac,
            sk,
            battles,
            seed,
            reset=lambda: (*smac.reset(), *controller.reset_result),
            before=lambda actions: setattr(controller, "pending", actions),
            sk_step=lambda actions: controller.result,
            stats=stats,
        )
    finally:
        smac.close()
        sk.close()


def lockstep(map_name, options, battles, seed=0):
    steps, wins = play_controlled(*build(map_name, seed, options), battles, seed)
    return {"map": map_name, "steps": steps, "battles": battles, "won": wins}


def cli(argv, lockstep, names, options, key="map", what="SMAC maps"):
    """The referees' command line: names (default: all), --battles, --options; one JSON line each,
    exit 1 at the first mismatch."""
    parser = argparse.ArgumentParser(description="SMAC's own code as the referee of skirmish's")
    parser.add_argument("names", nargs="*", help=f"{what} (default: {', '.join(names)})")
    parser.add_argument("--battles", type=int, default=2)
    parser.add_argument("--options", default="default", choices=sorted(options))
    args = parser.parse_args(argv)
    for name in args.names or names:
        try:
            out = lockstep(name, options[args.options], args.battles)
        except Mismatch as e:
            print(json.dumps({key: name, "options": args.options, "mismatch": str(e)}))
            return 1
        print(json.dumps({**out, "options": args.options}), flush=True)
    return 0


def main(argv=None):
    return cli(argv, lockstep, sorted(MAPS), OPTIONS)


if __name__ == "__main__":
    sys.exit(main())
