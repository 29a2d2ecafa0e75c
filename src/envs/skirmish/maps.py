"""SMAC's maps and unit statistics for the skirmish simulator (SC2 4.10-era data, Normal speed,
converted to game loops: 16 loops per game second)."""
LOOPS = 16.0

# name: sc2 id, hp, shield, armour, light, armored, bio, radius, speed (cells/s), damage, hits,
# bonus damage, bonus vs ("light"/"armored"/None), range, cooldown (s), hits ground, hits air,
# air unit, zerg regen, SMAC max_cd
UNITS = {
    "marine": dict(sc2=48, hp=45, sh=0, armour=0, light=1, armored=0, bio=1, radius=0.375, speed=2.25,
                   dmg=6, hits=1, bonus=0, bonus_vs=None, range=5, cd=0.8608, ground=1, air=1, flying=0,
                   regen=0, max_cd=15),
    "marauder": dict(sc2=51, hp=125, sh=0, armour=1, light=0, armored=1, bio=1, radius=0.5625, speed=2.25,
                     dmg=10, hits=1, bonus=10, bonus_vs="armored", range=6, cd=1.5, ground=1, air=0,
                     flying=0, regen=0, max_cd=25),
    "medivac": dict(sc2=54, hp=150, sh=0, armour=1, light=0, armored=1, bio=0, radius=0.75, speed=2.5,
                    dmg=0, hits=0, bonus=0, bonus_vs=None, range=4, cd=1.0, ground=0, air=0, flying=1,
                    regen=0, max_cd=200),
    "stalker": dict(sc2=74, hp=80, sh=80, armour=1, light=0, armored=1, bio=0, radius=0.625, speed=2.9531,
                    dmg=13, hits=1, bonus=5, bonus_vs="armored", range=6, cd=1.8701, ground=1, air=1,
                    flying=0, regen=0, max_cd=35),
    "zealot": dict(sc2=73, hp=100, sh=50, armour=1, light=1, armored=0, bio=1, radius=0.5, speed=2.25,
                   dmg=8, hits=2, bonus=0, bonus_vs=None, range=0.1, cd=1.2, ground=1, air=0, flying=0,
                   regen=0, max_cd=22),
    "colossus": dict(sc2=4, hp=200, sh=150, armour=1, light=0, armored=1, bio=0, radius=1.0, speed=2.25,
                     dmg=10, hits=2, bonus=5, bonus_vs="light", range=7, cd=1.5, ground=1, air=0,
                     flying=0, regen=0, max_cd=24),
    "zergling": dict(sc2=105, hp=35, sh=0, armour=0, light=1, armored=0, bio=1, radius=0.375, speed=2.9531,
                     dmg=5, hits=1, bonus=0, bonus_vs=None, range=0.1, cd=0.696, ground=1, air=0, flying=0,
                     regen=1, max_cd=11),
    "hydralisk": dict(sc2=107, hp=90, sh=0, armour=0, light=1, armored=0, bio=1, radius=0.625, speed=2.25,
                      dmg=12, hits=1, bonus=0, bonus_vs=None, range=5, cd=0.825, ground=1, air=1, flying=0,
                      regen=1, max_cd=10),
    "baneling": dict(sc2=9, hp=30, sh=0, armour=0, light=0, armored=0, bio=1, radius=0.375, speed=2.5,
                     dmg=16, hits=1, bonus=19, bonus_vs="light", range=0.25, cd=1.0, ground=1, air=0,
                     flying=0, regen=1, max_cd=1),
    "spine_crawler": dict(sc2=98, hp=300, sh=0, armour=2, light=0, armored=1, bio=1, radius=1.125, speed=0.0,
                          dmg=25, hits=1, bonus=5, bonus_vs="armored", range=7, cd=1.8501, ground=1, air=0,
                          flying=0, regen=1, max_cd=15),
}

# map_type -> unit types in one-hot index order (allies; enemies use the same except
# stalkers_and_zealots, where SMAC orders the enemy bits Zealot, Stalker)
TYPE_ORDER = {
    "marines": [], "stalkers": [], "zealots": [], "hydralisks": [], "colossus": [],
    "stalkers_and_zealots": ["stalker", "zealot"],
    "colossi_stalkers_zealots": ["colossus", "stalker", "zealot"],
    "MMM": ["marauder", "marine", "medivac"],
    "bane": ["baneling", "zergling"],
}
ENEMY_TYPE_ORDER = {"stalkers_and_zealots": ["zealot", "stalker"]}

def _m(agents, enemies, limit, map_type, layout="L1", agent_at=(9.0, 16.0), enemy_at=(23.0, 16.0),
       order=("attack_move", (9.0, 16.0))):
    return dict(agents=agents, enemies=enemies, limit=limit, map_type=map_type, layout=layout,
                agent_at=agent_at, enemy_at=enemy_at, order=order)


MAPS = {
    "3m": _m([("marine", 3)], [("marine", 3)], 60, "marines"),
    "8m": _m([("marine", 8)], [("marine", 8)], 120, "marines"),
    "25m": _m([("marine", 25)], [("marine", 25)], 150, "marines"),
    "5m_vs_6m": _m([("marine", 5)], [("marine", 6)], 70, "marines"),
    "8m_vs_9m": _m([("marine", 8)], [("marine", 9)], 120, "marines"),
    "10m_vs_11m": _m([("marine", 10)], [("marine", 11)], 150, "marines"),
    "27m_vs_30m": _m([("marine", 27)], [("marine", 30)], 180, "marines"),
    "2s3z": _m([("stalker", 2), ("zealot", 3)], [("stalker", 2), ("zealot", 3)], 120,
               "stalkers_and_zealots"),
    "3s5z": _m([("stalker", 3), ("zealot", 5)], [("stalker", 3), ("zealot", 5)], 150,
               "stalkers_and_zealots"),
    "3s5z_vs_3s6z": _m([("stalker", 3), ("zealot", 5)], [("stalker", 3), ("zealot", 6)], 170,
                       "stalkers_and_zealots"),
    "1c3s5z": _m([("colossus", 1), ("stalker", 3), ("zealot", 5)],
                 [("colossus", 1), ("stalker", 3), ("zealot", 5)], 180, "colossi_stalkers_zealots"),
    "MMM": _m([("marine", 7), ("marauder", 2), ("medivac", 1)],
              [("marine", 7), ("marauder", 2), ("medivac", 1)], 150, "MMM"),
    "MMM2": _m([("marine", 7), ("marauder", 2), ("medivac", 1)],
               [("marine", 8), ("marauder", 3), ("medivac", 1)], 180, "MMM"),
    "3s_vs_3z": _m([("stalker", 3)], [("zealot", 3)], 150, "stalkers", "L2"),
    "3s_vs_4z": _m([("stalker", 3)], [("zealot", 4)], 200, "stalkers", "L2"),
    "3s_vs_5z": _m([("stalker", 3)], [("zealot", 5)], 250, "stalkers", "L2"),
    "2s_vs_1sc": _m([("stalker", 2)], [("spine_crawler", 1)], 300, "stalkers", "L4",
                    agent_at=(14.05, 10.35), enemy_at=(13.92, 20.04), order=("static", None)),
    "6h_vs_8z": _m([("hydralisk", 6)], [("zealot", 8)], 150, "hydralisks", "L5",
                   agent_at=(14.60, 9.49), enemy_at=(14.41, 16.76),
                   order=("attack_move", (14.60, 9.49))),
    "2c_vs_64zg": _m([("colossus", 2)], [("zergling", 64)], 400, "colossus", "L6",
                     agent_at=(16.0, 16.0), enemy_at=(16.0, 9.0), order=("attack_group", None)),
    "corridor": _m([("zealot", 6)], [("zergling", 24)], 400, "zealots", "L7",
                   agent_at=(19.04, 19.12), enemy_at=(27.91, 28.24),
                   order=("attack_move", (4.47, 4.33))),
    "so_many_baneling": _m([("zealot", 7)], [("baneling", 32)], 100, "zealots", "L8",
                           agent_at=(11.47, 12.02), enemy_at=(27.91, 28.24),
                           order=("attack_move", (4.47, 4.33))),
    "bane_vs_bane": _m([("zergling", 20), ("baneling", 4)], [("zergling", 20), ("baneling", 4)], 200,
                       "bane", "L3", agent_at=(16.0, 11.0), enemy_at=(16.0, 21.0),
                       order=("attack_move", (16.0, 8.0))),
    # the Zealot attack-moves to a point drawn each episode on the segment between the Marines
    "2m_vs_1z": _m([("marine", 2)], [("zealot", 1)], 150, "marines", "L3", agent_at=(16.0, 12.0),
                   enemy_at=(16.0, 19.0), order=("attack_move", ((13.0, 12.0), (19.0, 12.0)))),
}
# Per-group spawn points where SMAC creates groups at different points.
GROUP_SPAWNS = {
    "bane_vs_bane": {"agents": [(16.0, 11.0), (16.0, 8.0)], "enemies": [(16.0, 21.0), (16.0, 24.0)]},
    "2s_vs_1sc": {"agents_each": [(11.12, 10.34), (16.98, 10.37)]},
    "2m_vs_1z": {"agents_each": [(13.0, 12.0), (19.0, 12.0)]},
}


def type_index(map_type, unit, enemy):
    order = (ENEMY_TYPE_ORDER.get(map_type) if enemy else None) or TYPE_ORDER[map_type]
    return order.index(unit) if order else 0
