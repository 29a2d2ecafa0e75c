"""SMACv2's scenario generator: the capability config, its distributions and the 15 standard
scenarios. Each reset draws one episode config (teams, start points, optional masks and
capabilities) from the config, with the laws of SMACv2's own distributions but from one seeded
stream, so the k-th battle of a run depends only on (seed, k)."""

import copy
import itertools
import math

import numpy as np

from utils.errors import ConfigError
from utils.registry import unknown_name_message

MAP_SIZE = 32
RACES = {
    # unit types (standard order), weights, exception types, map type
    "protoss": (["stalker", "zealot", "colossus"], [0.45, 0.45, 0.1], [], "protoss_gen"),
    "terran": (["marine", "marauder", "medivac"], [0.45, 0.45, 0.1], ["medivac"], "terran_gen"),
    "zerg": (["zergling", "baneling", "hydralisk"], [0.45, 0.1, 0.45], ["baneling"], "zerg_gen"),
}
MAP_RACE = {f"10gen_{race}": race for race in RACES}
# the one-hot type index of each race's units (allies and enemies alike)
TYPE_BITS = {
    "protoss_gen": ["stalker", "zealot", "colossus"],
    "terran_gen": ["marine", "marauder", "medivac"],
    "zerg_gen": ["zergling", "hydralisk", "baneling"],
}
SIZES = {
    "5_vs_5": (5, 5),
    "10_vs_10": (10, 10),
    "20_vs_20": (20, 20),
    "10_vs_11": (10, 11),
    "20_vs_23": (20, 23),
}
SCENARIOS = [f"{race}_{size}" for race in RACES for size in SIZES] + [
    f"{race}_{size}_epo" for race in RACES for size in SIZES
]
TEAM_DISTS = ("weighted_teams", "all_teams")
POSITION_DISTS = ("surrounded_and_reflect", "surrounded", "reflect_position")
# (corner, inner point) of the four diagonals that surrounded enemy groups stand on
DIAGONALS = [((0, 0), (14, 14)), ((0, 32), (14, 18)), ((32, 32), (18, 18)), ((32, 0), (18, 14))]


def scenario(name):
    """(env_args overrides, capability_config) of a standard scenario, e.g. protoss_5_vs_5 or
    zerg_10_vs_11_epo (EPO: enemies seen only by the agent that spotted them, no action mask)."""
    if name not in SCENARIOS:
        raise ConfigError(unknown_name_message("env_args.scenario", name, SCENARIOS))
    epo = name.endswith("_epo")
    race, size = name.removesuffix("_epo").split("_", 1)
    n_units, n_enemies = SIZES[size]
    types, weights, exceptions, _ = RACES[race]
    cap = {
        "n_units": n_units,
        "n_enemies": n_enemies,
        "team_gen": {
            "dist_type": "weighted_teams",
            "unit_types": list(types),
            "weights": list(weights),
            "observe": True,
        },
        "start_positions": {
            "dist_type": "surrounded_and_reflect",
            "p": 0.5,
            "map_x": MAP_SIZE,
            "map_y": MAP_SIZE,
        },
    }
    if exceptions:
        cap["team_gen"]["exception_unit_types"] = list(exceptions)
    args = {"map_name": f"10gen_{race}"}
    if epo:
        args.update(prob_obs_enemy=0.0, action_mask=False)
    return args, cap


def validate(cap, race):
    """Refuses a capability config SMACv2 would reject or misread (one line, naming the value)."""
    if not isinstance(cap, dict):
        raise ConfigError(f"env_args.capability_config={cap!r} must be a mapping")
    for key in ("n_units", "n_enemies"):
        v = cap.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"env_args.capability_config.{key}={v!r} must be a positive integer")
    if "team_gen" not in cap:
        raise ConfigError(
            "env_args.capability_config needs team_gen (a 10gen_ map creates no units without it)"
        )
    known = {"n_units", "n_enemies", "team_gen", "start_positions", "enemy_mask", "attack", "health"}
    for key in cap:
        if key not in known:
            raise ConfigError(unknown_name_message("env_args.capability_config key", key, sorted(known)))
    allowed, _, _, _ = RACES[race]
    team = cap["team_gen"]
    where = "env_args.capability_config.team_gen"
    if team.get("dist_type") not in TEAM_DISTS:
        raise ConfigError(unknown_name_message(f"{where}.dist_type", team.get("dist_type"), list(TEAM_DISTS)))
    types = list(team.get("unit_types") or [])
    if not types:
        raise ConfigError(f"{where}.unit_types must list at least one of {allowed}")
    for t in types + list(team.get("exception_unit_types") or []):
        if t not in allowed:
            raise ConfigError(unknown_name_message(f"{where} unit type for {race}", t, allowed))
    if team["dist_type"] == "weighted_teams":
        w = list(team.get("weights") or [])
        if len(w) != len(types) or abs(sum(w) - 1.0) > 1e-6 or min(w) < 0:
            raise ConfigError(
                f"{where}.weights={w!r} must be {len(types)} non-negative numbers (one per unit type) "
                "summing to 1"
            )
    if set(types) <= set(team.get("exception_unit_types") or []):
        raise ConfigError(f"{where}: every unit type is an exception type, so no team can be drawn")
    if "observe" not in team or not isinstance(team["observe"], bool):
        raise ConfigError(f"{where}.observe={team.get('observe')!r} must be True or False")
    pos = cap.get("start_positions")
    if pos is not None:
        where = "env_args.capability_config.start_positions"
        if pos.get("dist_type") not in POSITION_DISTS:
            raise ConfigError(
                unknown_name_message(f"{where}.dist_type", pos.get("dist_type"), list(POSITION_DISTS))
            )
        if pos["dist_type"] == "surrounded_and_reflect" and not 0.0 <= float(pos.get("p", -1)) <= 1.0:
            raise ConfigError(f"{where}.p={pos.get('p')!r} must be a probability")
    if "enemy_mask" in cap:
        m = cap["enemy_mask"]
        if m.get("dist_type") != "mask" or not 0.0 <= float(m.get("mask_probability", -1)) <= 1.0:
            raise ConfigError(
                "env_args.capability_config.enemy_mask needs dist_type: mask and mask_probability in [0, 1]"
            )
    for key in ("attack", "health"):
        if key in cap:
            c = cap[key]
            lo, hi = c.get("lower_bound"), c.get("upper_bound")
            if c.get("dist_type") != "per_agent_uniform" or not (
                isinstance(lo, list)
                and isinstance(hi, list)
                and len(lo) == len(hi) == 1
                and 0 <= lo[0] <= hi[0] <= 1
            ):
                raise ConfigError(
                    f"env_args.capability_config.{key} needs dist_type: per_agent_uniform and one-element "
                    f"lower_bound <= upper_bound lists in [0, 1] (got {c!r})"
                )
            if not isinstance(c.get("observe"), bool):
                raise ConfigError(f"env_args.capability_config.{key}.observe must be True or False")


class ScenarioSampler:
    """Draws SMACv2 episode configs from a capability config with one numpy Generator."""

    def __init__(self, cap, rng):
        self.cap = copy.deepcopy(cap)
        self.rng = rng
        self.n_units, self.n_enemies = cap["n_units"], cap["n_enemies"]
        team = self.cap["team_gen"]
        self.types = list(team["unit_types"])
        self.exceptions = set(team.get("exception_unit_types") or [])
        self.weights = np.asarray(team.get("weights") or [1.0 / len(self.types)] * len(self.types))
        if team["dist_type"] == "all_teams":
            self.teams = [
                c
                for c in itertools.combinations_with_replacement(self.types, self.n_units)
                if not set(c) <= self.exceptions
            ]

    def _group(self, k):
        while True:  # a group made only of exception types is drawn again
            group = [self.types[i] for i in self.rng.choice(len(self.types), size=k, p=self.weights)]
            group = [group[i] for i in self.rng.permutation(k)]
            if not set(group) <= self.exceptions:
                return group

    def _teams(self):
        if self.cap["team_gen"]["dist_type"] == "all_teams":
            i = int(self.rng.integers(len(self.teams)))
            team = [self.teams[i][j] for j in self.rng.permutation(self.n_units)]
            return {"ally_team": team, "enemy_team": list(team), "id": i}
        ally = self._group(self.n_units)
        if self.n_enemies > self.n_units:
            enemy = ally + self._group(self.n_enemies - self.n_units)
        else:
            enemy = ally[: self.n_enemies]
        return {"ally_team": ally, "enemy_team": enemy, "id": 0}

    def _reflect(self, pos):
        half = pos.get("map_x", MAP_SIZE) / 2
        ally = np.stack(
            [
                self.rng.uniform(0, half - 1, self.n_units),
                self.rng.uniform(0, pos.get("map_y", MAP_SIZE), self.n_units),
            ],
            -1,
        )
        k = min(self.n_units, self.n_enemies)
        enemy = np.zeros((self.n_enemies, 2))
        enemy[:k, 0] = pos.get("map_x", MAP_SIZE) - ally[:k, 0]
        enemy[:k, 1] = ally[:k, 1]
        extra = self.n_enemies - k
        if extra > 0:
            enemy[k:, 0] = self.rng.uniform(half, pos.get("map_x", MAP_SIZE), extra)
            enemy[k:, 1] = self.rng.uniform(0, pos.get("map_y", MAP_SIZE), extra)
        return ally, enemy, {"layout": "reflect"}

    def _surrounded(self, pos):
        ally = np.full((self.n_units, 2), [pos.get("map_x", MAP_SIZE) / 2, pos.get("map_y", MAP_SIZE) / 2])
        groups = int(self.rng.integers(1, 5))
        sizes = self.rng.multinomial(self.n_enemies, [1.0 / groups] * groups)
        t = self.rng.uniform(0, 1, groups)
        diagonals = self.rng.choice(4, size=groups, replace=False)
        points = []
        for g in range(groups):
            corner, inner = (np.asarray(p, dtype=np.float64) for p in DIAGONALS[diagonals[g]])
            points += [corner + t[g] * (inner - corner)] * int(sizes[g])
        info = {
            "layout": "surrounded",
            "groups": groups,
            "sizes": sizes.tolist(),
            "diagonals": diagonals.tolist(),
        }
        return ally, np.array(points), info

    def sample(self):
        """One episode config, keyed as SMACv2's env reads it."""
        out = {"team_gen": self._teams()}
        na, ne = self.n_units, self.n_enemies
        pos = self.cap.get("start_positions")
        if pos is not None:
            kind = pos["dist_type"]
            if kind == "surrounded_and_reflect":
                kind = "surrounded" if self.rng.uniform() > pos.get("p", 0.5) else "reflect_position"
            ally, enemy, info = self._surrounded(pos) if kind == "surrounded" else self._reflect(pos)
            out["ally_start_positions"] = {"item": ally}
            out["enemy_start_positions"] = {"item": enemy}
            out["_layout"] = info  # for tests and replays; the env does not read it
        for key in ("enemy_mask", "attack", "health"):
            c = self.cap.get(key)
            if c is None:
                continue
            if key == "enemy_mask":
                item = (self.rng.uniform(size=(na, ne)) >= c["mask_probability"]).astype(np.int64)
            else:
                item = self.rng.uniform(c["lower_bound"][0], c["upper_bound"][0], size=(na, 1))
            out[key] = {"item": item}
        return out


def expected_enemy_hs(cap, hs):
    """The expected total health + shield of the enemy team under the team law (hs: type -> value),
    with a group made only of exception types redrawn."""
    team = cap["team_gen"]
    types = list(team["unit_types"])
    exc = set(team.get("exception_unit_types") or [])
    n, m = cap["n_units"], cap["n_enemies"]
    if team["dist_type"] == "all_teams":
        teams = [c for c in itertools.combinations_with_replacement(types, n) if not set(c) <= exc]
        return float(np.mean([sum(hs[t] for t in c) for c in teams]))
    w = dict(zip(types, team.get("weights") or [1.0 / len(types)] * len(types), strict=True))
    mu = sum(w[t] * hs[t] for t in types)
    q = sum(w[t] for t in exc)
    mu_exc = sum(w[t] * hs[t] for t in exc) / q if q > 0 else 0.0

    def group(k):  # E[sum of a group of k] given it is not all exceptions
        return (k * mu - q**k * k * mu_exc) / (1 - q**k) if q > 0 else k * mu

    mirrored = min(n, m)
    total = group(n) * mirrored / n
    return float(total + (group(m - n) if m > n else 0.0))


def is_position_in_cone(agent_pos, facing, point, radius, n_fov):
    """SMACv2's cone test, with its arithmetic (arctan on the target's side, so the region is not a
    true cone). agent_pos [..., 2], facing [..., 2], point [..., 2] broadcast; returns bool [...]."""
    eps = 1e-7
    d = np.sqrt(((point - agent_pos) ** 2).sum(-1))
    xd = point[..., 0] - agent_pos[..., 0]
    right = xd > 0
    xd_safe = np.where(right, np.maximum(xd, eps), np.minimum(xd, -eps))
    obj = np.arctan((point[..., 1] - agent_pos[..., 1]) / xd_safe)
    fx = np.broadcast_to(facing[..., 0], xd.shape)
    fx = np.where(right, np.maximum(fx, eps), np.minimum(fx, -eps))
    fov = np.arctan(np.broadcast_to(facing[..., 1], xd.shape) / fx)
    return (d <= radius) & (np.abs(obj - fov) < math.pi / n_fov)
