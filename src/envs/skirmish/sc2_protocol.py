"""Skirmish's state as the SC2 API's messages (s2clientprotocol), in the layout StarCraft II 4.10
sends them: what SMAC's own code reads when it is served from skirmish instead of the game.

Only the fields SMAC and SMACv2 read are filled (../shared/specs/sc2_api_standin.md, section 1.2).
The images are row-major with row 0 at y = 0, as the game sends them (python-sc2 indexes both
pathing and height as [y][x] unflipped; SMAC decodes the 1-bit pathing grid that way): so SMAC's
terrain_height, which it flips, is the world's mirrored in y, and skirmish gives the same.
s2clientprotocol's generated files need protobuf's pure-Python runtime under protobuf >= 4
(envs.sc2_env.protobuf_runtime() sets it; call it before the first use).
"""

import numpy as np


def _pb():
    from s2clientprotocol import common_pb2, raw_pb2, sc2api_pb2

    return common_pb2, raw_pb2, sc2api_pb2


def world_heights(env):
    """The world-oriented height bytes [x, y] (env.terrain_height holds them as SMAC exposes
    them: y mirrored, / 255)."""
    heights = getattr(env, "world_height", None)
    if heights is None:
        heights = np.asarray(env.terrain_height)[:, ::-1]
    return np.rint(np.asarray(heights) * 255).astype(np.uint8)


def game_info(env):
    """ResponseGameInfo for the env's map: size, playable area, the 1-bit pathing grid (rows y,
    bits x, most significant first) and the terrain height bytes (rows y)."""
    common, raw, sc2api = _pb()
    x, y = int(env.map_x), int(env.map_y)
    grid = np.asarray(env.pathing_grid, dtype=bool)  # [x, y], True: pathable
    start = raw.StartRaw(
        map_size=common.Size2DI(x=x, y=y),
        pathing_grid=common.ImageData(
            bits_per_pixel=1, size=common.Size2DI(x=x, y=y), data=np.packbits(grid.T, axis=1).tobytes()
        ),
        terrain_height=common.ImageData(
            bits_per_pixel=8, size=common.Size2DI(x=x, y=y), data=world_heights(env).T.tobytes()
        ),
        playable_area=common.RectangleI(
            p0=common.PointI(x=0, y=0),
            p1=common.PointI(x=int(env.max_distance_x), y=int(env.max_distance_y)),
        ),
    )
    return sc2api.ResponseGameInfo(map_name=str(env.map_name), start_raw=start)


def units(env, tags):
    """The living units as raw Units, in the env's unit order (agents in SMAC's sort, enemies in
    creation order); dead ones are absent, as in the game. tags: one per unit index."""
    _, raw, _ = _pb()
    out = []
    for i in np.flatnonzero(env.alive):
        out.append(
            raw.Unit(
                tag=int(tags[i]),
                owner=1 + int(env.team[i]),
                unit_type=int(env.unit_types[i]),
                pos={"x": float(env.pos[i, 0]), "y": float(env.pos[i, 1]), "z": 8.0},
                health=float(env.hp[i]),
                health_max=float(env.hp_max[i]),
                shield=float(env.sh[i]),
                shield_max=float(env.sh_max[i]),
                energy=float(env.energy[i]),
                weapon_cooldown=float(max(env.cooldown[i], 0.0)),
                radius=float(env.radius[i]),
                alliance=1 if env.team[i] == 0 else 4,
                display_type=1,
            )
        )
    return out


def observation(env, tags, game_loop):
    """ResponseObservation with the env's living units at game loop `game_loop`."""
    _, raw, sc2api = _pb()
    obs = sc2api.ResponseObservation()
    obs.observation.game_loop = int(game_loop)
    obs.observation.raw_data.units.extend(units(env, tags))
    return obs
