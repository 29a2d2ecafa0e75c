"""A stand-in for the StarCraft II binary: the SC2 API (s2clientprotocol over a WebSocket, as
PySC2 speaks it) served on skirmish's physics, so that unmodified SMAC and SMACv2 run without the
game. PySC2 launches it as $SC2PATH/Versions/Base75689/SC2_x64 (install_sc2.sh --stand-in writes
that launcher):

    python -m envs.skirmish.standin -listen 127.0.0.1 -port 5000 [-dataDir ... -tempDir ...]

What it serves (../shared/specs/sc2_api_standin.md): ping, create_game (the map by its file name;
the battle seeded with random_seed), join_game, game_info (pathing and height images),
observation (the living units with unique tags, the game loop running across episodes), action
(raw stop, move, attack and heal commands), step, debug (kill_unit, create_unit, draw ignored),
data (32x32_flat's unit ids), save_replay (empty) and quit. The SMAC v1 maps' triggers: the teams
spawn at init and again once no unit is left, and the enemies attack; SMACv2's 32x32_flat: units
come from create_unit only, and the enemies hunt the nearest agent (skirmish_v2's model).

What it cannot prove: physics. It restates skirmish's model of the game; SMAC on it equals
SkirmishEnv step for step, which is what its tests check.
"""

import argparse
import os
import shutil
import stat
import sys

import numpy as np

from envs.skirmish import sc2_protocol, terrain
from envs.skirmish.maps import MAPS, UNITS

FLAT = "32x32_flat"
N_UNIT_TYPES = 1979  # 32x32_flat's unit data: the 9 "_RL" units come last, from 1970
STOP, MOVE, ATTACK, HEAL = 4, 16, 23, 386


def _pb():
    from s2clientprotocol import common_pb2, data_pb2, debug_pb2, raw_pb2, sc2api_pb2

    return common_pb2, data_pb2, debug_pb2, raw_pb2, sc2api_pb2


class _FlatMap:
    """game_info's view of 32x32_flat before any unit exists."""

    map_name, map_x, map_y, max_distance_x, max_distance_y = FLAT, 32, 32, 32, 32
    pathing_grid = terrain.grid("L2")
    terrain_height = np.full((32, 32), 191 / 255)


class Game:
    """The game behind the socket: one map, its battles, the game loop."""

    def __init__(self):
        self.status = "launched"
        self.env = None
        self.map_name = None
        self.seed = None
        self.loop = 0
        self.next_tag = 1
        self.tags = []
        self.present = False  # any units on the map
        self.commands = {}  # agent index -> action int, for the next step
        self.creates = []
        self.respawn = False

    # --- requests -------------------------------------------------------------------------------
    def handle(self, request):
        """Response to one Request (None for quit: no reply)."""
        *_, sc2api = _pb()
        kind = request.WhichOneof("request")
        response = sc2api.Response(id=request.id)
        if kind == "quit":
            self.status = "quit"
            return None
        handler = getattr(self, f"_{kind}", None)
        if handler is None:
            response.error.append(f"the stand-in does not serve {kind}")
        else:
            try:
                handler(getattr(request, kind), response)
            except Exception as e:  # the client sees the error, the stand-in lives on
                response.error.append(f"{kind}: {type(e).__name__}: {e}")
        response.status = sc2api.Status.Value(self.status)
        return response

    def _ping(self, req, response):
        response.ping.game_version = "4.10.0"
        response.ping.data_build = response.ping.base_build = 75689

    def _create_game(self, req, response):
        name = req.local_map.map_path.replace("\\", "/").rsplit("/", 1)[-1]
        name = name[: -len(".SC2Map")] if name.endswith(".SC2Map") else name
        if name != FLAT and name not in MAPS:
            response.create_game.error = 1  # MissingMap
            response.create_game.error_details = f"the stand-in has no map {name!r}"
            return
        self.map_name = name
        self.seed = req.random_seed if req.HasField("random_seed") else None
        if name != FLAT:
            from envs.skirmish.env import SkirmishEnv

            self.env = SkirmishEnv(map_name=name, seed=self.seed)
        self.status = "init_game"
        response.create_game.SetInParent()

    def _join_game(self, req, response):
        self.status = "in_game"
        response.join_game.player_id = 1
        if self.map_name != FLAT:
            self._spawn()  # the map's init trigger

    def _game_info(self, req, response):
        source = self.env if self.map_name != FLAT or self.env is not None else _FlatMap
        response.game_info.CopyFrom(sc2_protocol.game_info(source))

    def _observation(self, req, response):
        obs = response.observation.observation
        obs.game_loop = self.loop
        if self.present:
            obs.raw_data.units.extend(sc2_protocol.units(self.env, self.tags))

    def _data(self, req, response):
        _, data_pb2, *_ = _pb()
        response.data.units.extend(data_pb2.UnitTypeData(unit_id=i) for i in range(N_UNIT_TYPES))

    def _save_replay(self, req, response):
        response.save_replay.data = b""

    def _action(self, req, response):
        for action in req.actions:
            if action.HasField("action_raw") and action.action_raw.HasField("unit_command"):
                self._command(action.action_raw.unit_command)
            response.action.result.append(1)  # Success

    def _debug(self, req, response):
        for command in req.debug:
            if command.HasField("kill_unit"):
                self._kill(set(command.kill_unit.tag))
            elif command.HasField("create_unit"):
                self.creates.append(command.create_unit)
        response.debug.SetInParent()

    def _step(self, req, response):
        count = max(int(req.count), 1)
        self.loop += count
        response.step.simulation_loop = self.loop
        if self.creates:
            self._battle_from_creates()
            return
        if not self.present:
            return
        if self.respawn and self.map_name != FLAT:  # every unit gone: the map spawns both teams
            self._spawn()
            return
        env = self.env
        if self.commands:
            actions = np.zeros(env.n_agents, dtype=np.int64)
            for i, a in self.commands.items():
                actions[i] = a
            self.commands = {}
            env._orders(actions)
        env._simulate(count)

    # --- the battle -----------------------------------------------------------------------------
    def _new_tags(self):
        self.tags = list(range(self.next_tag, self.next_tag + self.env.n))
        self.next_tag += self.env.n

    def _spawn(self):
        self.env.reset()
        self._new_tags()
        self.present, self.respawn, self.commands = True, False, {}

    def _kill(self, tags):
        env = self.env
        if env is None or not self.present:
            return
        idx = [i for i, t in enumerate(self.tags) if t in tags and env.alive[i]]
        env.alive[idx], env.hp[idx], env.sh[idx], env.target[idx] = False, 0.0, 0.0, -1
        if not env.alive.any():
            if self.map_name == FLAT:
                self.present = False  # 32x32_flat stays empty until units are created
            else:
                self.respawn = True

    def _command(self, c):
        env = self.env
        if env is None or not self.present or not c.unit_tags:
            return
        index = {t: i for i, t in enumerate(self.tags)}
        i = index.get(c.unit_tags[0])
        if i is None or i >= env.n_agents or not env.alive[i]:
            return
        first = env.n_actions_no_attack
        if c.ability_id == STOP:
            self.commands[i] = 1
        elif c.ability_id == MOVE and c.HasField("target_world_space_pos"):
            dx = c.target_world_space_pos.x - env.pos[i, 0]
            dy = c.target_world_space_pos.y - env.pos[i, 1]
            if abs(dy) >= abs(dx):
                self.commands[i] = 2 if dy > 0 else 3
            else:
                self.commands[i] = 4 if dx > 0 else 5
        elif c.ability_id in (ATTACK, HEAL) and c.HasField("target_unit_tag"):
            j = index.get(c.target_unit_tag)
            if j is None:
                return
            target = j if c.ability_id == HEAL else j - env.n_agents
            if 0 <= target < env.n_actions - first:
                self.commands[i] = first + target

    def _battle_from_creates(self):
        """32x32_flat: a skirmish_v2 battle of the created units at their points."""
        from envs.skirmish import distributions as dist
        from envs.skirmish.args import expand
        from envs.skirmish.env import ALLY_TYPE_BASE
        from envs.skirmish.v2 import RL_SORT, SkirmishV2Env

        creates, self.creates = self.creates, []
        rl = {ALLY_TYPE_BASE + i: k for k, i in RL_SORT.items()}
        sc2 = {UNITS[k]["sc2"]: k for k in RL_SORT}
        allies = [c for c in creates if c.owner == 1]
        enemies = [c for c in creates if c.owner == 2]
        ally_team = [rl[c.unit_type] for c in allies]
        enemy_team = [sc2[c.unit_type] for c in enemies]
        race = next(r for r, spec in dist.RACES.items() if ally_team[0] in spec[0])
        key = (race, len(ally_team), len(enemy_team))
        if self.env is None or getattr(self, "_v2_key", None) != key:
            args = expand({"scenario": f"{race}_5_vs_5"})
            cap = dict(args["capability_config"], n_units=len(ally_team), n_enemies=len(enemy_team))
            self.env = SkirmishV2Env(map_name=args["map_name"], capability_config=cap, seed=self.seed)
            self._v2_key = key
        config = {
            "team_gen": {"ally_team": ally_team, "enemy_team": enemy_team},
            "ally_start_positions": {"item": np.array([[c.pos.x, c.pos.y] for c in allies])},
            "enemy_start_positions": {"item": np.array([[c.pos.x, c.pos.y] for c in enemies])},
        }
        self.env.reset(config)
        self._new_tags()
        self.present, self.commands = True, {}


def install(sc2path, python=None, maps_from=None):
    """Writes the launcher PySC2 runs ($SC2PATH/Versions/Base75689/SC2_x64, a script that runs this
    module with `python`) and $SC2PATH/Maps/SMAC_Maps: the map files from `maps_from` where it has
    them, else empty ones (PySC2 only sends a map's bytes; the stand-in picks the map by name)."""
    python = python or sys.executable
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    base = os.path.join(sc2path, "Versions", "Base75689")
    os.makedirs(base, exist_ok=True)
    launcher = os.path.join(base, "SC2_x64")
    with open(launcher, "w") as f:
        f.write(
            "#!/bin/sh\n# The SC2 API stand-in on skirmish's physics, not StarCraft II\n"
            f'export PYTHONPATH="{src}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
            "export PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python\n"
            f'exec "{python}" -m envs.skirmish.standin "$@"\n'
        )
    os.chmod(launcher, os.stat(launcher).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    maps = os.path.join(sc2path, "Maps", "SMAC_Maps")
    os.makedirs(maps, exist_ok=True)
    for name in [*MAPS, FLAT]:
        target = os.path.join(maps, f"{name}.SC2Map")
        source = os.path.join(maps_from, f"{name}.SC2Map") if maps_from else None
        if source and os.path.exists(source):
            shutil.copyfile(source, target)
        elif not os.path.exists(target):
            open(target, "wb").close()
    return launcher


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["install"]:  # python -m envs.skirmish.standin install SC2PATH [MAPS_FOLDER]
        print(install(argv[1], maps_from=argv[2] if len(argv) > 2 else None))
        return 0
    parser = argparse.ArgumentParser(description="the SC2 API on skirmish's physics", prefix_chars="-")
    parser.add_argument("-listen", default="127.0.0.1")
    parser.add_argument("-port", type=int, required=True)
    args, _ = parser.parse_known_args(argv)  # -dataDir, -tempDir, -dataVersion, ...: not needed
    from envs.sc2_env import protobuf_runtime

    protobuf_runtime()
    *_, sc2api = _pb()
    game = Game()

    def answer(message):
        response = game.handle(sc2api.Request.FromString(message))
        return None if response is None else response.SerializeToString()

    from utils.websocket_server import serve

    serve(args.listen, args.port, "/sc2api", answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
