"""SMACv2's observations, state, capabilities and visibility on skirmish_v2's battles: who each agent
sees (the conic field of view, EPO), the feature blocks and their names (SkirmishV2Env's part)."""

import numpy as np

from envs.skirmish.maps import UNITS

SHIELD_MAX = {"stalker": 80.0, "zealot": 50.0, "colossus": 150.0}


class V2Encoding:
    """Mixed into SkirmishV2Env, ahead of SkirmishEnv: SMACv2's encoding of the battle."""

    # --- observations -------------------------------------------------------------------------
    def _seen(self, units):
        """[n_agents, len(units)] geometric visibility: closer than the observer's sight, or in its cone."""
        return self._within(units, self.sight, strict=True)

    def _epo(self, seen):
        """EPO tagging, as SMACv2 does it while it builds the observations of the agents one by one
        in a random order: the first agent in that order that sees an untagged enemy tags it and
        may see it; each other agent may too, with probability prob_obs_enemy, but only from its
        turn on. Returns [n_agents, n_enemies]: the enemy rows each agent's observation keeps."""
        na, ne = self.n_agents, self.n_enemies
        rank = np.empty(na, dtype=np.int64)
        rank[self._obs_rng.permutation(na)] = np.arange(na)
        allowed = self.obs_enemies.T.astype(bool)  # [na, ne] before this observation
        alive = self.alive[:na]
        new = np.flatnonzero((self.enemy_tags < 0) & (seen & alive[:, None]).any(0))
        if len(new):
            seers = seen[:, new] & alive[:, None]
            first = np.where(seers, rank[:, None], na).min(0)  # the holder's turn, per new enemy
            holder = np.argmax(seers & (rank[:, None] == first), axis=0)
            grant = self._obs_rng.uniform(size=(len(new), na)) < self.prob_obs_enemy
            grant[np.arange(len(new)), holder] = True
            self.enemy_tags[new] = holder
            self.obs_enemies[new] |= grant
            allowed[:, new] = grant.T & (rank[:, None] >= first[None, :])
        if self.sim_options["enemy_obs_mode"] == "per_row" or allowed.all():
            return allowed
        # SMACv2 wipes every row up to the last enemy an agent may not see
        last = np.where(~allowed, np.arange(ne)[None, :], -1).max(1)
        return allowed & (np.arange(ne)[None, :] > last[:, None])

    def _health_obs(self, idx):
        """health / health_max, rescaled above the death threshold with the health capability."""
        h = self.hp[idx] / self.hp_max[idx]
        if self.health_cap:
            lvl = self._health_level[idx]
            h = np.where(self.alive[idx], (h - lvl) / (1 - lvl), 0.0)
        return h

    def get_obs(self):
        if not self._cache_ok("obs"):
            self._store("obs", self._build_obs(self.fully_observable))
        return list(self._cache["obs"])

    def get_obs_agent(self, agent_id, fully_observable=False):
        """As SMACv2's: fully_observable ignores sight ranges (not EPO's tags) for this call."""
        if fully_observable and not self.fully_observable:
            return self._build_obs(True)[agent_id]
        return self.get_obs()[agent_id]

    def _build_obs(self, fully_observable):
        na, ne = self.n_agents, self.n_enemies
        alive_a = self.alive[:na]
        tstep = np.full((na, 1), self._episode_steps / self.episode_limit, np.float32)
        if not self.obs_starcraft:
            return tstep
        rel, d = self._geometry()
        s = self.sight[:, None]
        obs = np.zeros((na, self.obs_size), np.float32)
        obs[:, : self.move_feats] = self._move_obs()
        first = self.move_feats
        en = self._enemy_feats(fully_observable, rel, d, s)
        obs[:, first : first + ne * self.nf_en] = en.reshape(na, -1)
        health = self._health_obs(slice(0, na))
        al = self._ally_feats(fully_observable, rel, d, s, health)
        first += ne * self.nf_en
        obs[:, first : first + (na - 1) * self.nf_al] = al.reshape(na, -1)
        self._own_feats(obs, first + (na - 1) * self.nf_al, health)
        obs[~alive_a] = 0.0
        if self.obs_timestep_number:
            obs[:, -1] = tstep[:, 0]
        return obs

    def _enemy_feats(self, fully_observable, rel, d, s):
        """[agents, enemies, nf_en]; EPO tags follow sight even when fully observable, as in SMACv2."""
        na, ne = self.n_agents, self.n_enemies
        alive_a = self.alive[:na]
        seen = self._seen(slice(na, self.n)) & alive_a[:, None]
        keep = self._epo(seen) & (alive_a[:, None] if fully_observable else seen) & self.alive[na:][None, :]
        en = np.zeros((na, ne, self.nf_en))
        true = self._target_flags(True)
        k = min(true.shape[1], ne)
        en[:, :k, 0] = true[:, :k]
        en[..., 1] = d[:, na:] / s
        en[..., 2:4] = rel[:, na:] / s[..., None]
        c = 4
        if self.obs_all_health:
            en[..., c] = (self.hp[na:] / self.hp_max[na:])[None, :]
            c += 1
            if self.shield_bits_enemy:
                en[..., c] = (self.sh[na:] / self.sh_max[na:])[None, :]
                c += 1
        en[..., c:] = self._enemy_onehot[None]
        if self._enemy_mask is not None:  # masked enemies show no health, shield or type
            en[..., 4:] *= ~self._enemy_mask[..., None]
        en *= keep[..., None]
        return en

    def _ally_feats(self, fully_observable, rel, d, s, health):
        """[agents, agents - 1, nf_al]: each agent's view of its teammates."""
        na = self.n_agents
        alive_a = self.alive[:na]
        o = self._others
        al = np.zeros((na, na - 1, self.nf_al))
        rows = self._rows
        vis = self._seen(slice(0, na))[rows, o] | fully_observable
        vis &= alive_a[o] & alive_a[:, None]
        al[..., 0] = 1.0
        al[..., 1] = d[rows, o] / s
        al[..., 2:4] = rel[rows, o] / s[..., None]
        c = 4
        if self.obs_all_health:
            al[..., c] = health[o] * (not self.health_cap or self.capability_config["health"]["observe"])
            c += 1
            if self.shield_bits_ally:
                al[..., c] = (self.sh[:na] / self.sh_max[:na])[o]
                c += 1
        for key in ("attack", "health"):
            if getattr(self, f"{key}_cap"):
                al[..., c] = getattr(self, f"_{key}_level")[o] * self.capability_config[key]["observe"]
                c += 1
        al[..., c : c + 3] = self._ally_onehot[o] * self.team_observe
        if self.obs_last_action:
            al[..., c + 3 :] = self.last_action[o]
        al *= vis[..., None]
        return al

    def _own_feats(self, obs, c, health):
        """Writes each agent's own features into obs from column c on."""
        na = self.n_agents
        if self.obs_own_health:
            obs[:, c] = health
            c += 1
            if self.shield_bits_ally:
                obs[:, c] = self.sh[:na] / self.sh_max[:na]
                c += 1
        for key in ("attack", "health"):
            if getattr(self, f"{key}_cap"):
                obs[:, c] = getattr(self, f"_{key}_level")
                c += 1
        if self.obs_own_pos:
            obs[:, c : c + 2] = self.seen_pos[:na] / np.array([self.map_x, self.map_y])
            c += 2
        if self.conic_fov:
            obs[:, c : c + 2] = self.fov_directions
            c += 2
        obs[:, c : c + 3] = self._ally_onehot

    def _ally_health(self):
        return self._health_obs(np.arange(self.n_agents))

    def _ally_state_extra(self):
        cols = [getattr(self, f"_{key}_level") for key in ("attack", "health") if getattr(self, f"{key}_cap")]
        if self.conic_fov:
            cols += [self.fov_directions[:, 0], self.fov_directions[:, 1]]
        return cols

    def _type_onehots(self):
        return self._ally_onehot, self._enemy_onehot

    def get_obs_ally_capability_size(self):
        return self._cap_size

    def get_cap_size(self):
        return self._cap_size

    def get_capabilities_agent(self, agent_id):
        parts = []
        if self.attack_cap:
            parts.append([self._attack_level[agent_id]])
        if self.health_cap:
            parts.append([self._health_level[agent_id]])
        parts.append(np.eye(3)[self.ally_type[agent_id]])
        return np.concatenate(parts).astype(np.float32)

    def get_capabilities(self):
        return np.concatenate([self.get_capabilities_agent(i) for i in range(self.n_agents)])

    def get_obs_feature_names(self):
        names = [f"move_{d}" for d in "nsew"]
        for j in range(self.n_enemies):
            names += [f"enemy_{j}_{f}" for f in self._enemy_obs_names()]
        for j in range(self.n_agents - 1):
            names += [f"ally_{j}_{f}" for f in self._ally_obs_names()]
        names += [f"own_{f}" for f in self._own_obs_names()]
        if self.obs_timestep_number:
            names.append("timestep")
        return names

    def _enemy_obs_names(self):
        health = ["health"] + ["shield"] * self.shield_bits_enemy if self.obs_all_health else []
        return ["shootable", "distance", "rel_x", "rel_y"] + health + [f"type_{i}" for i in range(3)]

    def _ally_obs_names(self):
        health = ["health"] + ["shield"] * self.shield_bits_ally if self.obs_all_health else []
        last = [f"last_action_{a}" for a in range(self.n_actions)] * self.obs_last_action
        return ["visible", "distance", "rel_x", "rel_y"] + health + self.capability_attr_names + last

    def _own_obs_names(self):
        health = ["health"] + ["shield"] * self.shield_bits_ally if self.obs_own_health else []
        cap = self.capability_attr_names[:-3]
        return (
            health
            + cap
            + ["own_x", "own_y"] * self.obs_own_pos
            + ["fov_x", "fov_y"] * self.conic_fov
            + [f"type_{i}" for i in range(3)]
        )

    def get_state_feature_names(self):
        names = [f"ally_{i}_{f}" for i in range(self.n_agents) for f in self.ally_state_attr_names]
        names += [f"enemy_{j}_{f}" for j in range(self.n_enemies) for f in self.enemy_state_attr_names]
        if self.state_last_action:
            names += [
                f"ally_{i}_last_action_{a}" for i in range(self.n_agents) for a in range(self.n_actions)
            ]
        if self.state_timestep_number:
            names.append("timestep")
        return names

    def get_visibility_matrix(self):
        """Who sees whom by distance alone (no cone, no EPO), with each agent's own sight range."""
        na, pos = self.n_agents, self.seen_pos
        d = np.sqrt(((pos[None, :, :] - pos[:na, None, :]) ** 2).sum(-1))
        vis = (d < self.sight[:, None]) & self.alive[None, :] & self.alive[:na, None]
        vis[np.arange(na), np.arange(na)] = False
        return vis

    def unit_shoot_range(self, agent_id):
        return float(self.shoot[agent_id])

    def unit_sight_range(self, agent_id):
        return float(self.sight[agent_id])

    def unit_max_shield(self, unit):
        for kind, value in SHIELD_MAX.items():
            if unit.unit_type in (UNITS[kind]["sc2"], getattr(self, f"{kind}_id")):
                return value
        return None
