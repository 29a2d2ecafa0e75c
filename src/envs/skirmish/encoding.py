"""SMAC's encoding of a skirmish battle: available actions, observations and the state, with
SMAC's layouts and normalisation. skirmish_v2 (v2.py) replaces the parts where SMACv2 differs."""

import numpy as np

from envs.multiagentenv import smac_entities, step_field_specs
from envs.skirmish.api import SHOOT, SIGHT


class SmacEncoding:
    """Observations, state and available actions of a Battle, as SMAC computes them."""

    def _set_up_encoding(self):
        na = self.n_agents
        self.ally_state_attr_names = (
            ["health", "energy/cooldown", "rel_x", "rel_y"]
            + ["shield"] * self.shield_bits_ally
            + [f"type_{i}" for i in range(self.unit_type_bits)]
        )
        self.enemy_state_attr_names = (
            ["health", "rel_x", "rel_y"]
            + ["shield"] * self.shield_bits_enemy
            + [f"type_{i}" for i in range(self.unit_type_bits)]
        )
        self.nf_en = 4 + self.unit_type_bits + (1 + self.shield_bits_enemy if self.obs_all_health else 0)
        self.nf_al = (
            4
            + self.unit_type_bits
            + (1 + self.shield_bits_ally if self.obs_all_health else 0)
            + (self.n_actions if self.obs_last_action else 0)
        )
        self.own_feats = (
            self.unit_type_bits
            + (1 + self.shield_bits_ally) * self.obs_own_health
            + int(self.obs_timestep_number)
        )
        self.move_feats = 4 + 8 * self.obs_pathing_grid + 9 * self.obs_terrain_height
        self.obs_size = self.move_feats + self.n_enemies * self.nf_en + (na - 1) * self.nf_al + self.own_feats
        self.nf_al_s = 4 + self.shield_bits_ally + self.unit_type_bits
        self.nf_en_s = 3 + self.shield_bits_enemy + self.unit_type_bits
        self._onehots = {}

    def _avail(self):
        if self._cache_ok("avail"):
            return self._cache["avail"]
        na, ne = self.n_agents, self.n_enemies
        avail = self._moves()
        alive = self.alive[:na]
        pos = self.seen_pos
        p = pos[:na]
        d = np.sqrt(((pos[na:][None, :, :] - p[:, None, :]) ** 2).sum(-1))  # [na, ne]
        avail[:, 6:] = self.alive[na:][None, :] & (d <= SHOOT)
        med = self.is_medivac[:na]
        if self.is_mmm and med.any():
            da = np.sqrt(((p[None, :, :] - p[:, None, :]) ** 2).sum(-1))  # [na, na]
            heal = alive[None, :] & ~med[None, :] & (da <= SHOOT)
            avail[med, 6:] = 0
            k = min(na, ne)
            avail[np.ix_(med, np.arange(6, 6 + k))] = heal[med][:, :k]
        avail[~alive] = 0
        avail[~alive, 0] = 1
        self._store("avail", avail)
        return avail

    def _moves(self):
        """[n_agents, n_actions] with SMAC's stop and move columns set: a move is available where
        the point half a move away is on the map and pathable."""
        avail = np.zeros((self.n_agents, self.n_actions), dtype=np.int64)
        p = self.seen_pos[: self.n_agents]
        probes = (p[:, None, :] + self._probe_dirs * (self.move_amount / 2)).astype(np.int64)  # int()
        inside = ((probes >= 0) & (probes < 32)).all(-1)
        probes = np.minimum(np.maximum(probes, 0), 31)
        avail[:, 2:6] = inside & self.grid[probes[..., 0], probes[..., 1]]
        avail[:, 1] = 1
        return avail

    def _onehot(self, idx, bits):
        key = (id(idx), bits)  # the type index arrays never change: build each one-hot once
        if key not in self._onehots:
            self._onehots[key] = (
                np.eye(bits, dtype=np.float32)[idx] if bits else np.zeros((len(idx), 0), np.float32)
            )
        return self._onehots[key]

    def get_obs(self):
        if self._cache_ok("obs"):
            return list(self._cache["obs"])
        na, ne = self.n_agents, self.n_enemies
        if not self.obs_starcraft:  # open loop: the time step alone
            obs = np.full((na, 1), self._episode_steps / self.episode_limit, np.float32)
            self._store("obs", obs)
            return list(obs)
        avail = self._avail()
        p = self.seen_pos
        alive_a, alive_e = self.alive[:na], self.alive[na:]
        # enemies
        rel = p[na:][None, :, :] - p[:na][:, None, :]  # [na, ne, 2]
        d = np.sqrt((rel**2).sum(-1))
        vis = alive_e[None, :] & (d < SIGHT) & alive_a[:, None]
        cols = [avail[:, 6:].astype(np.float32), d / SIGHT, rel[..., 0] / SIGHT, rel[..., 1] / SIGHT]
        if self.obs_all_health:
            cols.append(np.broadcast_to(self.hp[na:] / self.hp_max[na:], (na, ne)))
            if self.shield_bits_enemy:
                cols.append(np.broadcast_to(self.sh[na:] / self.sh_max[na:], (na, ne)))
        en = np.concatenate(
            [
                np.stack(cols, -1),
                np.broadcast_to(
                    self._onehot(self.enemy_type, self.unit_type_bits)[None], (na, ne, self.unit_type_bits)
                ),
            ],
            -1,
        )
        en = (en * vis[..., None]).astype(np.float32)
        # allies
        o = self._others  # [na, na-1]
        rel_a = p[o] - p[:na][:, None, :]
        d_a = np.sqrt((rel_a**2).sum(-1))
        vis_a = alive_a[o] & (d_a < SIGHT) & alive_a[:, None]
        cols = [np.ones_like(d_a), d_a / SIGHT, rel_a[..., 0] / SIGHT, rel_a[..., 1] / SIGHT]
        if self.obs_all_health:
            cols.append((self.hp[:na] / self.hp_max[:na])[o])
            if self.shield_bits_ally:
                cols.append((self.sh[:na] / self.sh_max[:na])[o])
        parts = [np.stack(cols, -1), self._onehot(self.ally_type, self.unit_type_bits)[o]]
        if self.obs_last_action:
            parts.append(self.last_action[o])
        al = (np.concatenate(parts, -1) * vis_a[..., None]).astype(np.float32)
        # own
        own = []
        if self.obs_own_health:
            own.append((self.hp[:na] / self.hp_max[:na])[:, None])
            if self.shield_bits_ally:
                own.append((self.sh[:na] / self.sh_max[:na])[:, None])
        own.append(self._onehot(self.ally_type, self.unit_type_bits))
        if self.obs_timestep_number:
            own.append(np.zeros((na, 1)))
        obs = np.concatenate(
            [
                self._move_obs(),
                en.reshape(na, -1),
                al.reshape(na, -1),
                np.concatenate(own, -1).astype(np.float32),
            ],
            -1,
        ).astype(np.float32)
        obs[~alive_a] = 0.0
        if self.obs_timestep_number:  # SMAC appends the time after the blocks (its size quirk)
            obs = np.concatenate(
                [obs, np.full((na, 1), self._episode_steps / self.episode_limit, np.float32)], -1
            )
        self._store("obs", obs)
        return list(obs)

    def _move_obs(self):
        """SMAC's move features: N/S/E/W availability, then the pathing grid at 8 points around
        the unit and the terrain height there and under it (1 outside the map)."""
        na = self.n_agents
        parts = [self._avail()[:, 2:6].astype(np.float32)]
        if self.obs_pathing_grid or self.obs_terrain_height:
            m = int(self._move_amount)
            dx = np.array([0, 0, 2 * m, -2 * m, m, -m, m, -m, 0])
            dy = np.array([2 * m, -2 * m, 0, 0, m, -m, -m, m, 0])
            seen = self.seen_pos
            px = seen[:na, 0].astype(np.int64)[:, None] + dx
            py = seen[:na, 1].astype(np.int64)[:, None] + dy
            inside = (px >= 0) & (px < self.map_x) & (py >= 0) & (py < self.map_y)
            cx, cy = np.minimum(np.maximum(px, 0), 31), np.minimum(np.maximum(py, 0), 31)
            if self.obs_pathing_grid:
                parts.append(np.where(inside, self.pathing_grid[cx, cy], 1)[:, :8])
            if self.obs_terrain_height:
                parts.append(np.where(inside, self.terrain_height[cx, cy], 1.0))
        return np.concatenate(parts, -1).astype(np.float32)

    def get_obs_agent(self, agent_id):
        return self.get_obs()[agent_id]

    def get_obs_size(self):
        return self.obs_size if self.obs_starcraft else 1

    def get_state(self):
        if self.obs_instead_of_state:
            return np.concatenate(self.get_obs()).astype(np.float32)
        allies, enemies = self._unit_state()
        parts = [allies.reshape(-1), enemies.reshape(-1)]
        if self.state_last_action:
            parts.append(self.last_action.reshape(-1))
        if self.state_timestep_number:
            parts.append(np.array([self._episode_steps / self.episode_limit]))
        return np.concatenate(parts).astype(np.float32)

    def _unit_state(self):
        """SMAC's state rows: allies [n_agents, nf_al_s], enemies [n_enemies, nf_en_s] (dead: 0)."""
        na = self.n_agents
        a_cols = [
            self._ally_health(),
            np.where(
                self.is_medivac[:na],
                self.energy[:na] / 200.0,
                np.maximum(self.cooldown[:na], 0.0) / self.max_cd[:na],
            ),
            (self.pos[:na, 0] - 16.0) / self.max_distance_x,
            (self.pos[:na, 1] - 16.0) / self.max_distance_y,
        ]
        if self.shield_bits_ally:
            a_cols.append(self.sh[:na] / self.sh_max[:na])
        a_cols += self._ally_state_extra()
        ally_types, enemy_types = self._type_onehots()
        allies = np.concatenate([np.stack(a_cols, -1), ally_types], -1)
        allies[~self.alive[:na]] = 0
        e_cols = [
            self.hp[na:] / self.hp_max[na:],
            (self.pos[na:, 0] - 16.0) / self.max_distance_x,
            (self.pos[na:, 1] - 16.0) / self.max_distance_y,
        ]
        if self.shield_bits_enemy:
            e_cols.append(self.sh[na:] / self.sh_max[na:])
        enemies = np.concatenate([np.stack(e_cols, -1), enemy_types], -1)
        enemies[~self.alive[na:]] = 0
        return allies, enemies

    def _ally_health(self):
        return self.hp[: self.n_agents] / self.hp_max[: self.n_agents]

    def _ally_state_extra(self):
        """State columns after an ally's shield (SMACv2's capabilities and view direction)."""
        return []

    def _type_onehots(self):
        bits = self.unit_type_bits
        return self._onehot(self.ally_type, bits), self._onehot(self.enemy_type, bits)

    def get_state_size(self):
        if self.obs_instead_of_state:
            return self.get_obs_size() * self.n_agents
        size = self.n_agents * self.nf_al_s + self.n_enemies * self.nf_en_s
        size += self.n_agents * self.n_actions * self.state_last_action
        return size + int(self.state_timestep_number)

    def get_avail_actions(self):
        return self._avail().tolist()

    def get_avail_agent_actions(self, agent_id):
        return self._avail()[agent_id].tolist()

    def get_env_info(self):
        info = {
            "state_shape": self.get_state_size(),
            # SMAC's get_obs_size() counts the time feature once, inside own_feats, but its
            # observations append it again: with obs_timestep_number they are one longer. The
            # runners need the true length; get_obs_size() keeps SMAC's figure.
            "obs_shape": self.obs_size + int(self.obs_timestep_number) if self.obs_starcraft else 1,
            "n_actions": self.n_actions,
            "n_agents": self.n_agents,
            "n_enemies": self.n_enemies,
            "episode_limit": self.episode_limit,
            "agent_features": self.ally_state_attr_names,
            "enemy_features": self.enemy_state_attr_names,
            "step_fields": step_field_specs(self.step_fields, self.n_agents),
        }
        if not self.obs_timestep_number and self.obs_starcraft:
            info.update(
                smac_entities(
                    self.move_feats,
                    (self.n_enemies, self.nf_en),
                    (self.n_agents - 1, self.nf_al),
                    self.own_feats,
                    self.n_actions_no_attack,
                    self.fixed_healers(),
                )
            )
        return info

    def fixed_healers(self):
        """The agents whose attack slots heal agents (Medivacs), where they keep their place
        from battle to battle (SMAC's fixed teams; SMACv2's drawn teams say none)."""
        return [i for i in range(self.n_agents) if self.is_medivac[i]]
