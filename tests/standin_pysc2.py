"""PySC2 alone (no SMAC) against the SC2 API stand-in: SMAC's request sequence, replayed, and the
responses checked. Prints "ok" and exits 0, or names the first wrong response.

    SC2PATH=/tmp/sc2 python tests/standin_pysc2.py
"""

import os
import sys

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

from absl import flags
from pysc2 import run_configs
from s2clientprotocol import common_pb2, debug_pb2, raw_pb2, sc2api_pb2

flags.FLAGS(["standin_pysc2"])


def check(ok, what):
    if not ok:
        print(f"wrong: {what}")
        sys.exit(1)


def main():
    config = run_configs.get()
    with config.start(want_rgb=False) as c:  # the RemoteController of the launched process
        create = sc2api_pb2.RequestCreateGame(
            local_map=sc2api_pb2.LocalMap(
                map_path="SMAC_Maps/3m.SC2Map", map_data=config.map_data("SMAC_Maps/3m.SC2Map")
            ),
            realtime=False,
            random_seed=5,
        )
        create.player_setup.add(type=sc2api_pb2.Participant)
        create.player_setup.add(
            type=sc2api_pb2.Computer, race=common_pb2.Terran, difficulty=sc2api_pb2.VeryHard
        )
        c.create_game(create)
        c.join_game(
            sc2api_pb2.RequestJoinGame(race=common_pb2.Terran, options=sc2api_pb2.InterfaceOptions(raw=True))
        )
        info = c.game_info().start_raw
        check((info.map_size.x, info.map_size.y) == (32, 32), f"map size {info.map_size}")
        check(info.pathing_grid.bits_per_pixel == 1 and len(info.pathing_grid.data) == 32 * 4, "pathing grid")
        check(len(info.terrain_height.data) == 32 * 32, "terrain height")
        obs = c.observe().observation
        units = list(obs.raw_data.units)
        owners = sorted(u.owner for u in units)
        check(owners == [1, 1, 1, 2, 2, 2], f"owners {owners}")
        tags = {u.tag for u in units}
        check(len(tags) == 6 and 0 not in tags, f"tags {tags}")
        check(all(u.health == u.health_max == 45 for u in units), "marines at full health")
        loop = obs.game_loop
        ally = next(u for u in units if u.owner == 1)
        enemy = next(u for u in units if u.owner == 2)
        move = raw_pb2.ActionRawUnitCommand(
            ability_id=16,
            unit_tags=[ally.tag],
            target_world_space_pos=common_pb2.Point2D(x=ally.pos.x + 2, y=ally.pos.y),
        )
        c.actions(
            sc2api_pb2.RequestAction(
                actions=[sc2api_pb2.Action(action_raw=raw_pb2.ActionRaw(unit_command=move))]
            )
        )
        c.step(8)
        obs = c.observe().observation
        check(obs.game_loop == loop + 8, f"game loop {obs.game_loop} after {loop} + 8")
        moved = next(u for u in obs.raw_data.units if u.tag == ally.tag)
        check(moved.pos.x > ally.pos.x + 0.5, f"the moved marine went from x {ally.pos.x} to {moved.pos.x}")
        check(any(u.tag == enemy.tag for u in obs.raw_data.units), "the enemy keeps its tag")
        alive = [u.tag for u in obs.raw_data.units]
        c.debug([debug_pb2.DebugCommand(kill_unit=debug_pb2.DebugKillUnit(tag=alive))])
        c.step(2)
        obs = c.observe().observation
        new = {u.tag for u in obs.raw_data.units}
        check(len(new) == 6 and not new & tags, f"respawned with new tags: {new} after {tags}")
        data = c.data()
        check(len(data.units) == 1979, f"{len(data.units)} unit types")
    print("ok")


if __name__ == "__main__":
    main()
