"""What StarCraft II's own map files say about each SMAC map, set beside skirmish's maps.py.

    python bench/sc2map_facts.py MAPS_DIR [--maps 2s3z 3s5z ...] [--units] [--heights FILE]

MAPS_DIR holds SMAC's SC2Map files (SMAC's SMAC_Maps folder, e.g. from oxwhirl/smacv2's
smacv2/env/starcraft2/maps/SMAC_Maps; the files are not shipped here). An SC2Map is an MPQ archive
(read with mpyq): MapScript.galaxy holds the triggers (which units the spawn function creates, how
many, for which player, at which point, in which order, and the order the enemy team is given),
Objects the named points, Base.SC2Data/GameData/UnitData.xml the map's unit overrides (the agents'
<Unit>_RL copies). For every map this prints the facts and whether maps.py agrees: the teams in
creation order, each group's spawn point, the enemy's order and its target. --units adds the _RL
units' overridden fields beside skirmish's unit table. --heights FILE writes each map's terrain
height per cell, as SMAC reads it (src/envs/skirmish/heights.txt is this file, read by terrain.height()).
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))

from envs.skirmish.maps import GROUP_SPAWNS, MAPS, UNITS  # noqa: E402

# SC2 unit names (without _RL) -> skirmish's; 1c3s5z's map spells its agent Colossus "Colosus_RL"
KINDS = {
    "Marine": "marine",
    "Marauder": "marauder",
    "Medivac": "medivac",
    "Stalker": "stalker",
    "Zealot": "zealot",
    "Colossus": "colossus",
    "Colosus": "colossus",
    "Hydralisk": "hydralisk",
    "Zergling": "zergling",
    "Baneling": "baneling",
    "SpineCrawler": "spine_crawler",
}
CREATE = re.compile(r'CreateUnitsWithDefaultFacing\((\d+), "(\w+)", \d+, (\d+), PointFromId\((\d+)\)\)')
ORDER = re.compile(
    r"UnitGroupIssueOrder\(UnitGroup\(null, 2,.*?\), (OrderTargeting\w+)"
    r"\(AbilityCommand\(\"(\w+)\", 0\), (.*?)\), c_orderQueue\w+\);"
)
POINT = re.compile(r"PointFromId\((\d+)\)")
UNIT_FIELDS = ("LifeMax", "ShieldsMax", "LifeArmor", "Speed", "Acceleration", "TurningRate", "Sight")


def read_map(path):
    """-> dict(points, created, order, units) from one SC2Map file."""
    import mpyq

    archive = mpyq.MPQArchive(path)
    script = archive.read_file("MapScript.galaxy").decode()
    objects = ET.fromstring(archive.read_file("Objects").decode())
    points = {}
    for p in objects.iter("ObjectPoint"):
        x, y = (float(v) for v in p.get("Position").split(",")[:2])
        points[p.get("Id")] = dict(name=p.get("Name"), at=(x, y))
    # the spawn function (gf_Spawn, gf_SpawnMarines, ...), whose creations the reset trigger repeats
    start = re.search(r"void gf_Spawn\w* \(\) \{", script).start()
    spawn = script[start : script.find("\n}\n", start)]
    created = []
    for count, unit, player, point in CREATE.findall(spawn):
        name = unit.removesuffix("_RL")
        created.append(
            dict(
                count=int(count),
                kind=KINDS.get(name, name),
                rl=unit.endswith("_RL"),
                player=int(player),
                at=points[point]["at"],
            )
        )
    order = None
    m = ORDER.search(script)
    if m:
        how, ability, target = m.groups()
        ids = POINT.findall(target)
        order = dict(how=how, ability=ability, target=[points[i]["at"] for i in ids], text=target)
    units = {}
    try:
        data = ET.fromstring(archive.read_file("Base.SC2Data\\GameData\\UnitData.xml").decode())
    except (KeyError, TypeError, ET.ParseError):
        data = None
    for unit in data.iter("CUnit") if data is not None else ():
        fields = {f: unit.find(f).get("value") for f in UNIT_FIELDS if unit.find(f) is not None}
        fields.update(
            {
                f: unit.find(f).get("value")
                for f in ("DefaultAcquireLevel", "Response")
                if unit.find(f) is not None
            }
        )
        units[unit.get("id")] = fields
    return dict(points=points, created=created, order=order, units=units)


def teams(created, player):
    """[(kind, count)] of one player's units, groups of one kind merged, in creation order."""
    out = []
    for c in created:
        if c["player"] != player:
            continue
        if out and out[-1][0] == c["kind"]:
            out[-1] = (c["kind"], out[-1][1] + c["count"])
        else:
            out.append((c["kind"], c["count"]))
    return out


def near(a, b, tol=0.02):
    return a is not None and b is not None and abs(a[0] - b[0]) <= tol and abs(a[1] - b[1]) <= tol


def check(name, facts):
    """-> [(what, map files say, maps.py says, agree)]."""
    m = MAPS[name]
    rows = []
    for player, key in ((1, "agents"), (2, "enemies")):
        theirs, ours = teams(facts["created"], player), [tuple(t) for t in m[key]]
        rows.append((f"{key} (creation order)", theirs, ours, theirs == ours))
    groups = GROUP_SPAWNS.get(name, {})
    for player, key, at in ((1, "agents", "agent_at"), (2, "enemies", "enemy_at")):
        theirs = [c["at"] for c in facts["created"] if c["player"] == player]
        if player == 1 and "agents_each" in groups:
            ours = list(groups["agents_each"])
        elif key in groups:
            ours = list(groups[key])
        else:
            ours = [m[at]] * len(theirs)
        agree = len(theirs) == len(ours) and all(near(a, b) for a, b in zip(theirs, ours, strict=False))
        rows.append((f"{key} spawn points", sorted(set(theirs)), sorted(set(map(tuple, ours))), agree))
    order, (kind, point) = facts["order"], m["order"]
    if order is None:
        rows.append(("enemy order", "none (the enemy stands)", kind, kind == "static"))
    elif order["how"] == "OrderTargetingUnitGroup":
        rows.append(("enemy order", f"{order['ability']} the agents' group", kind, kind == "attack_group"))
    else:
        target = order["target"]
        if "RandomPointBetweenPoints" in order["text"]:
            theirs = f"attack-move to a random point between {target[0]} and {target[1]}"
            agree = kind == "attack_move" and all(near(a, b) for a, b in zip(target, point, strict=True))
        else:
            theirs = f"{order['ability']}-move to {target[0]}"
            agree = kind == "attack_move" and near(target[0], point)
        rows.append(("enemy order", theirs, f"{kind} {point}", agree))
    return rows


def unit_rows(facts):
    """The _RL units' overrides beside skirmish's table (hp, shield, armour; speed is per Normal
    second in both)."""
    rows = []
    for unit, fields in sorted(facts["units"].items()):
        kind = KINDS.get(unit.removesuffix("_RL"))
        ours = UNITS.get(kind, {})
        rows.append(
            (
                unit,
                fields,
                dict(
                    hp=ours.get("hp"), sh=ours.get("sh"), armour=ours.get("armour"), speed=ours.get("speed")
                ),
            )
        )
    return rows


def sync_heights(path):
    """[33, 33] game heights of the map's vertices, [y, x], from t3SyncHeightMap: a 64-byte header
    (magic, version, width, height, ...), then one little-endian uint32 a vertex whose low half is
    the height in 1/256 (8.0 on the SMAC maps' playable ground, 2 more a cliff level up) and whose
    high half is the vertex's cliff level."""
    import mpyq
    import numpy as np

    data = mpyq.MPQArchive(path).read_file("t3SyncHeightMap")
    if data[:4] != b"SMAP":
        raise ValueError(f"{path}: t3SyncHeightMap does not start with SMAP")
    w, h = np.frombuffer(data[8:16], "<u4")
    v = np.frombuffer(data[64 : 64 + 4 * int(w) * int(h)], "<u4").reshape(int(h), int(w))
    return (v & 0xFFFF) / 256.0


def cell_bytes(vertex_heights):
    """[32, 32] bytes, [y, x], of the heights at the cells' centres (the mean of their corners),
    encoded as the game's terrain_height image: height -16..16 to 0..255 (python-sc2 decodes it as
    -16 + 32 * byte / 255); SMAC's terrain_height is byte / 255."""
    import numpy as np

    z = vertex_heights
    centre = (z[:-1, :-1] + z[1:, :-1] + z[:-1, 1:] + z[1:, 1:]) / 4.0
    return np.clip(np.round((centre + 16.0) * 255.0 / 32.0), 0, 255).astype(int)


HEIGHTS_HEAD = (
    "# Terrain height of every cell of the SMAC maps as the game's terrain_height image gives it (one\n"
    "# byte a cell, two hex digits; rows from y = 31 down, columns x = 0..31), from each map's\n"
    "# t3SyncHeightMap: python bench/sc2map_facts.py MAPS_DIR --heights FILE\n"
)


def write_heights(names, maps_dir, out):
    with open(out, "w") as f:
        f.write(HEIGHTS_HEAD)
        for name in names:
            grid = cell_bytes(sync_heights(os.path.join(maps_dir, f"{name}.SC2Map")))
            f.write(f"{name}\n")
            for y in range(grid.shape[0] - 1, -1, -1):
                f.write("".join(f"{b:02x}" for b in grid[y]) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("maps_dir")
    p.add_argument("--maps", nargs="+", help="default: every map of maps.py found in MAPS_DIR")
    p.add_argument("--units", action="store_true", help="also the _RL units' overridden fields")
    p.add_argument("--heights", metavar="FILE", help="write every map's cell heights to FILE")
    a = p.parse_args()
    names = a.maps or [n for n in MAPS if os.path.exists(os.path.join(a.maps_dir, f"{n}.SC2Map"))]
    if a.heights:
        write_heights(names, a.maps_dir, a.heights)
        print(f"wrote the cell heights of {len(names)} maps to {a.heights}")
    disagree = 0
    print("| map | what | SC2Map | maps.py | agree |")
    print("|---|---|---|---|---|")
    for name in names:
        facts = read_map(os.path.join(a.maps_dir, f"{name}.SC2Map"))
        for what, theirs, ours, agree in check(name, facts):
            disagree += not agree
            print(f"| {name} | {what} | {theirs} | {ours} | {'yes' if agree else '**no**'} |")
        if a.units:
            for unit, fields, ours in unit_rows(facts):
                print(f"| {name} | unit {unit} | {fields} | {ours} | |")
    print(f"\n{len(names)} maps read; {disagree} facts where maps.py disagrees with the map files")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
