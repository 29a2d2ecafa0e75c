import torch
import torch.nn as nn
import torch.nn.functional as F

from utils.errors import ConfigError
from utils.keys import declare_keys

declare_keys(
    "hypernetwork agents (agent=hpn_rnn, deepset_hyper_rnn)",
    (
        "hpn_head_num",
        1,
        "int >= 1",
        "hpn_rnn, deepset_hyper_rnn: heads of their hypernetworks, merged by a softmax-weighted sum "
        "(PyMARL3: 1, 2 on some maps)",
    ),
    (
        "hpn_hyper_dim",
        64,
        "int >= 1",
        "hpn_rnn, deepset_hyper_rnn: hidden width of their hypernetworks",
    ),
)


def entity_slices(input_shape, obs_entities):
    """-> (own feature indices [F] (move, own and whatever follows the observation: last action,
    agent id), {group: (start, count, dim)}) of the agent's input."""
    own, groups, pos = [], {}, 0
    for ent in obs_entities:
        size = ent["count"] * ent["dim"]
        if ent["name"] in ("enemies", "allies"):
            groups[ent["name"]] = (pos, ent["count"], ent["dim"])
        else:
            own.extend(range(pos, pos + size))
        pos += size
    own.extend(range(pos, input_shape))
    return torch.tensor(own, dtype=torch.long), groups


def heal_slots(n_agents, n_slots, n_allies, healers):
    """SMAC's MMM rule, a healer's attack slot j heals agent j, as indices into its observation's
    allies (the other agents in order: agent j at j, or j - 1 past the healer's own place).
    -> (ally [N, slots] long, heals [N, slots] bool: agent i's slot j heals ally[i, j])."""
    slot = torch.arange(n_slots)
    me = torch.arange(n_agents).unsqueeze(1)
    ally = torch.where(slot < me, slot, slot - 1).clamp(0, max(n_allies - 1, 0))
    heals = torch.zeros(n_agents, n_slots, dtype=torch.bool)
    heals[list(healers)] = (slot < n_agents) & (slot != me[list(healers)])
    return ally, heals


def row_agents(inputs, n_agents):
    """Each row's agent, from the one-hot id that ends its input (the same at every step) -> [n]."""
    return inputs[:, 0, -n_agents:].argmax(-1)


def healer_error(agent):
    return ConfigError(
        f"agent={agent} on a map whose Medivacs heal through the attack actions (MMM, MMM2) reads "
        "each row's agent from its id: set obs_agent_id=True"
    )


class Merger(nn.Module):
    """Several heads into one: a softmax-weighted sum over the heads, per feature (one head: as is)."""

    def __init__(self, heads, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1, heads, dim)) if heads > 1 else None

    def forward(self, x):  # [..., heads, dim] -> [..., dim]
        if self.weight is None:
            return x.squeeze(-2)
        return (F.softmax(self.weight, dim=1) * x).sum(-2)


def hypernet(in_dim, hyper_dim, out_dim):
    return nn.Sequential(nn.Linear(in_dim, hyper_dim), nn.ReLU(), nn.Linear(hyper_dim, out_dim))


class HPNAgent(nn.Module):
    """The hypernetwork agent of PyMARL3 (Hao et al., ICLR 2023, "Boosting MARL via Permutation
    Invariant and Permutation Equivariant Networks"), on the entity layout the env declares.

    Input layer, permutation invariant: each enemy's (ally's) input weights are made by a
    hypernetwork from that entity's own features, and the entities' embeddings are summed; the
    agent's own features (move and own features, last action, agent id: one linear map, which is
    PyMARL3's linear map plus id and action embeddings) add theirs. hpn_head_num heads are merged
    by a softmax-weighted sum. A GRU follows. Output layer, permutation equivariant: the non-attack
    actions from the hidden state, and the attack action on enemy j from weights a hypernetwork
    makes from enemy j's features. So permuting the enemies in an observation permutes the attack
    values the same way, and permuting the allies changes nothing.

    Where ours differs: the GRU runs a whole sequence at once in training (the same numbers as a
    step-by-step cell), and the hypernetworks' last linear layers are applied after the sums and
    contractions they feed (the same function, without making every entity's weights)."""

    needs_entities = True  # an env that declares obs_entities and action_entities (SMAC-like)
    hyper_input = True  # entity weights from a hypernetwork (HPN) or shared per group (Deep Sets)
    hyper_output = True  # attack values from the enemy's hypernetwork (equivariant) or a linear map
    name = "hpn_rnn"

    def __init__(self, input_shape, args, output_dim=None):
        super().__init__()
        layout, actions = getattr(args, "obs_entities", None), getattr(args, "action_entities", None)
        if not layout or not actions or actions.get("group") != "enemies":
            raise ConfigError(
                f"agent={self.name} needs an env that declares its observation's entities and attack "
                "actions (skirmish, skirmish_v2, sc2, sc2v2 without obs_timestep_number)"
            )
        own, groups = entity_slices(input_shape, layout)
        self.register_buffer("own_index", own, persistent=False)
        self.groups = groups
        self.hidden_dim = h = args.hidden_dim
        self.heads = k = args.hpn_head_num
        hyper = args.hpn_hyper_dim
        n_out = output_dim or args.n_actions
        self.first_attack = actions["first_action"]
        n_enemies = groups["enemies"][1]
        if self.first_attack + n_enemies != n_out:
            raise ConfigError(
                f"agent={self.name}: {n_out} actions are not {self.first_attack} basic ones and one "
                f"attack per enemy ({n_enemies})"
            )
        self.fc_own = nn.Linear(len(own), h)
        if self.hyper_input:
            self.hyper_in = nn.ModuleDict(
                {name: hypernet(dim, hyper, dim * h * k) for name, (_, _, dim) in groups.items()}
            )
            self.merge_in = Merger(k, h)
        else:  # Deep Sets: one weight matrix per entity group (no bias: the own layer has it)
            self.fc_in = nn.ModuleDict(
                {name: nn.Linear(dim, h, bias=False) for name, (_, _, dim) in groups.items()}
            )
        self.rnn = nn.GRU(h, h, batch_first=True)
        if self.hyper_output:
            self.fc_basic = nn.Linear(h, self.first_attack)
            e_dim = groups["enemies"][2]
            self.hyper_out_w = hypernet(e_dim, hyper, h * k)
            self.hyper_out_b = hypernet(e_dim, hyper, k)
            self.merge_out = Merger(k, 1)
        else:  # every action, attacks included, from the hidden state (not equivariant)
            self.fc_out = nn.Linear(h, n_out)
        self._healers(actions.get("healers") or [], args, groups, hyper)

    def _healers(self, healers, args, groups, hyper):
        """SMAC's MMM maps: a Medivac's attack slot j heals agent j. As PyMARL3's HPN does, its
        slots take their values from an ally hypernetwork on the features of the ally that slot
        heals (in its observation the allies are the other agents in order: agent j sits at j,
        or j - 1 after the healer's own place). A row's agent is read from its agent id."""
        self.healers = list(healers) if self.hyper_output else []  # deepset_rnn: no entity outputs
        if not self.healers:
            return
        if not getattr(args, "obs_agent_id", False):
            raise healer_error(self.name)
        a_dim, k, h = groups["allies"][2], self.heads, self.hidden_dim
        self.hyper_heal_w = hypernet(a_dim, hyper, h * k)
        self.hyper_heal_b = hypernet(a_dim, hyper, k)
        self.merge_heal = Merger(k, 1)
        ally, heals = heal_slots(args.n_agents, groups["enemies"][1], groups["allies"][1], self.healers)
        self.register_buffer("heal_ally", ally, persistent=False)
        self.register_buffer("heal_slot", heals, persistent=False)

    def init_hidden(self, n):
        return self.fc_own.weight.new_zeros(n, self.hidden_dim)

    @staticmethod
    def _summed_embeddings(net, feats, width):
        """sum over entities a of feats[a] @ W(feats[a]), where W(f) = (W2 relu(W1 f + b1) + b2) as an
        [e, width] matrix: the hypernetwork's last layer is linear, so the sum over entities is
        taken before it, and no entity's weights are made (the same function, a fraction of the
        work and memory)."""
        first, last = net[0], net[2]
        e = feats.shape[-1]
        z = F.relu(first(feats))  # [n, T, E, hyper]
        outer = torch.einsum("ntae,ntaj->ntej", feats, z)  # [n, T, e, hyper]
        w2 = last.weight.view(e, width, -1)  # [e, width, hyper]
        return torch.einsum("ntej,eoj->nto", outer, w2) + feats.sum(2) @ last.bias.view(e, width)

    def _live_summed_embeddings(self, net, feats, width):
        """_summed_embeddings at the (row, step) places where some entity of the group has
        features. Where all are zero (padded steps, dead agents, nobody in sight) the sum is
        exactly zero, so it is not computed: the same function at a fraction of the work."""
        n, t = feats.shape[:2]
        flat = feats.reshape(n * t, *feats.shape[2:])
        live = flat.flatten(1).ne(0).any(1).nonzero().squeeze(1)
        if len(live) == n * t:
            return self._summed_embeddings(net, feats, width)
        sums = self._summed_embeddings(net, flat[live].unsqueeze(0), width)[0]  # [live, width]
        return flat.new_zeros(n * t, width).index_copy(0, live, sums).view(n, t, width)

    def _entities(self, inputs, name):
        start, count, dim = self.groups[name]
        return inputs[..., start : start + count * dim].unflatten(-1, (count, dim))  # [n, T, E, e]

    def forward(self, inputs, hidden):
        # inputs: [n, T, D]; hidden: [n, H]
        n, t, _ = inputs.shape
        h, k = self.hidden_dim, self.heads
        embedding = self.fc_own(inputs[..., self.own_index])  # [n, T, H]
        if self.hyper_input:
            merged = 0
            for name in self.groups:
                feats = self._entities(inputs, name)  # [n, T, E, e]
                merged = merged + self._live_summed_embeddings(self.hyper_in[name], feats, k * h)
            embedding = embedding + self.merge_in(merged.unflatten(-1, (k, h)))
        else:  # sum over entities of W f = W (sum of f): one matrix product a group
            for name in self.groups:
                embedding = embedding + self.fc_in[name](self._entities(inputs, name).sum(2))
        x = F.relu(embedding)
        if t == 1:  # one step (acting): the cell op avoids nn.GRU's per-call overhead
            rnn = self.rnn
            h_last = torch.gru_cell(
                x[:, 0], hidden, rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0
            )
            h_seq = h_last.unsqueeze(1)
        else:
            h_seq, h_last = self.rnn(x, hidden.unsqueeze(0).contiguous())
            h_last = h_last.squeeze(0)
        if not self.hyper_output:
            return self.fc_out(h_seq), h_last
        basic = self.fc_basic(h_seq)  # [n, T, first_attack]
        enemies = self._entities(inputs, "enemies")
        attack = self._entity_values(self.hyper_out_w, self.hyper_out_b, self.merge_out, enemies, h_seq)
        if self.healers:
            attack = self._heal_values(inputs, h_seq, attack)
        return torch.cat([basic, attack], dim=-1), h_last

    def _heal_values(self, inputs, h_seq, attack):
        """attack [n, T, slots] with the healers' rows' heal slots replaced by the values of the
        allies they heal; only those rows (a tenth on MMM) go through the ally hypernetwork."""
        agent = row_agents(inputs, self.heal_slot.shape[0])  # [n]
        rows = self.heal_slot[agent].any(-1).nonzero().squeeze(1)
        if len(rows) == 0:
            return attack
        allies = self._entities(inputs[rows], "allies")
        heal = self._entity_values(self.hyper_heal_w, self.hyper_heal_b, self.merge_heal, allies, h_seq[rows])
        ally, slots = self.heal_ally[agent[rows]], self.heal_slot[agent[rows]]  # [m, slots]
        healed = torch.gather(heal, 2, ally.unsqueeze(1).expand(-1, heal.shape[1], -1))  # [m, T, slots]
        return attack.index_put((rows,), torch.where(slots.unsqueeze(1), healed, attack[rows]))

    def _entity_values(self, w_net, b_net, merger, feats, h_seq):
        """value[e] = h . W(f_e) + b(f_e), heads merged -> [n, T, E]. h is contracted with the
        weight hypernetwork's last layer first, so no entity's weights are made. An entity whose
        features are all zero (padded steps, dead agents, enemies out of sight)
        has the same W and b as any other such entity, so they are computed once per step and
        the hypernetworks run only on the entities with features."""
        k, h = self.heads, self.hidden_dim
        n, t, count, e = feats.shape
        first, last = w_net[0], w_net[2]
        w2 = last.weight.view(k, h, -1)  # [k, H, hyper]
        g = torch.einsum("nth,khj->ntkj", h_seq, w2)  # [n, T, k, hyper]
        base = h_seq @ last.bias.view(k, h).T  # [n, T, k]
        flat = feats.reshape(-1, e)
        live = flat.ne(0).any(1).nonzero().squeeze(1)
        if len(live) == flat.shape[0]:
            z = F.relu(first(feats))  # [n, T, E, hyper]
            values = torch.einsum("ntej,ntkj->ntek", z, g) + base.unsqueeze(2) + b_net(feats)
        else:
            zero = feats.new_zeros(1, e)
            empty = torch.einsum("j,ntkj->ntk", F.relu(first(zero))[0], g) + base + b_net(zero)[0]
            values = empty.unsqueeze(2).expand(n, t, count, k).reshape(-1, k)
            if len(live):
                step = live // count  # the (row, step) of each entity with features
                z = F.relu(first(flat[live]))  # [L, hyper]
                own = torch.einsum("lj,lkj->lk", z, g.reshape(n * t, k, -1)[step])
                values = values.index_put((live,), own + base.reshape(n * t, k)[step] + b_net(flat[live]))
            values = values.view(n, t, count, k)
        return merger(values.unsqueeze(-1)).squeeze(-1)


class DeepSetAgent(HPNAgent):
    """PyMARL3's deepset_rnn: the Deep Sets input layer (each entity group's features through one
    shared matrix, summed over the group: permutation invariant), the GRU, and one linear map to
    every action's value, attacks included. So permuting the enemies or the allies changes no
    value: an attack value does not follow its enemy (HPN's output layer is what makes it)."""

    hyper_input = hyper_output = False
    name = "deepset_rnn"


class DeepSetHyperAgent(HPNAgent):
    """PyMARL3's deepset_hyper_rnn: the Deep Sets input layer with HPN's output layer (each attack
    value from weights a hypernetwork makes from that enemy's features: equivariant)."""

    hyper_input = False
    name = "deepset_hyper_rnn"
