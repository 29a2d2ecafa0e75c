import math

import torch
import torch.nn as nn

from modules.agents.hpn_agent import heal_slots, healer_error, row_agents
from utils.errors import ConfigError
from utils.keys import declare_keys

declare_keys(
    "transformer agent (agent=transformer)",
    (
        "transformer_embed_dim",
        32,
        "int >= 1",
        "transformer agent: token width (divisible by transformer_n_head)",
    ),
    (
        "transformer_n_head",
        4,
        "int >= 1",
        "transformer agent: attention heads",
    ),
    (
        "transformer_n_layers",
        2,
        "int >= 1",
        "transformer agent: encoder layers",
    ),
    (
        "transformer_token_dim",
        6,
        "int >= 1",
        "transformer agent: features per token when the env declares no entities",
    ),
)


def head_count_error(emb, heads):
    """The refusal message for a width torch's attention cannot split over `heads`, else None."""
    if emb % heads == 0:
        return None
    divisors = ", ".join(str(d) for d in range(1, emb + 1) if emb % d == 0)
    return (
        f"transformer_embed_dim={emb} is not divisible by transformer_n_head={heads}; "
        f"valid transformer_n_head values for it: {divisors}"
    )


def token_layout(input_shape, obs_entities, token_dim):
    """-> (index [K, d] into the input padded with one zero at position input_shape,
    group id [K] of each token, own token index or None, {group name: [token indices]}).

    obs_entities: [{"name", "count", "dim"}, ...] covering the observation in order (from the
    env); inputs beyond the observation (last action, agent id) become one "extra" token.
    Without a layout the input is cut into ceil(D / token_dim) chunks, each its own group
    (so each gets its own position embedding)."""
    pad = input_shape  # index of the appended zero
    tokens, groups, names = [], [], {}
    if obs_entities:
        pos = 0
        for g, ent in enumerate(obs_entities):
            for _ in range(ent["count"]):
                names.setdefault(ent["name"], []).append(len(tokens))
                tokens.append(list(range(pos, pos + ent["dim"])))
                groups.append(g)
                pos += ent["dim"]
        if pos < input_shape:
            names["extra"] = [len(tokens)]
            tokens.append(list(range(pos, input_shape)))
            groups.append(len(obs_entities))
    else:
        for k in range(math.ceil(input_shape / token_dim)):
            tokens.append(list(range(k * token_dim, min((k + 1) * token_dim, input_shape))))
            groups.append(k)
    width = max(len(t) for t in tokens)
    index = torch.tensor([t + [pad] * (width - len(t)) for t in tokens], dtype=torch.long)
    own = names.get("own", [None])[0]
    return index, torch.tensor(groups, dtype=torch.long), own, names


class TransformerAgent(nn.Module):
    """Entity transformer agent in the spirit of UPDeT (Hu et al. 2021).

    The observation becomes tokens (one per entity when the env declares `obs_entities`,
    else fixed chunks of transformer_token_dim features), each embedded by one shared linear
    map plus a learned embedding of its entity group (for chunks: of its position). A hidden
    token carries memory: its output at one step is the next step's hidden state.
    transformer_n_layers of torch's encoder layers follow. With `action_entities` from the env
    (StarCraft attack actions), the actions aimed at entity j are read from entity j's token
    and the others from the own token; otherwise all outputs come from the hidden token."""

    def __init__(self, input_shape, args, output_dim=None):
        super().__init__()
        emb, heads = args.transformer_embed_dim, args.transformer_n_head
        if message := head_count_error(emb, heads):
            raise ConfigError(message)
        self.emb = emb
        self.n_out = output_dim or args.n_actions
        layout = getattr(args, "obs_entities", None)
        index, groups, own, names = token_layout(input_shape, layout, args.transformer_token_dim)
        self.register_buffer("index", index, persistent=False)
        self.register_buffer("groups", groups, persistent=False)
        self.embed = nn.Linear(index.shape[1], emb)
        self.group_embed = nn.Embedding(int(groups.max()) + 1, emb)
        layer = nn.TransformerEncoderLayer(emb, heads, dim_feedforward=4 * emb, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, args.transformer_n_layers, enable_nested_tensor=False)
        self.entity_actions = None
        action_entities = getattr(args, "action_entities", None)
        if action_entities and own is not None and action_entities["group"] in names:
            first = action_entities["first_action"]
            targets = names[action_entities["group"]]
            if first + len(targets) == self.n_out:
                self.entity_actions = (own, first, targets)
        if self.entity_actions is not None:
            own, first, targets = self.entity_actions
            self.register_buffer("targets", torch.tensor(targets), persistent=False)
            self.basic_head = nn.Linear(emb, first)
            self.entity_head = nn.Linear(emb, 1)
        else:
            self.head = nn.Linear(emb, self.n_out)
        self.healers = list((action_entities or {}).get("healers") or []) if self.entity_actions else []
        if self.healers:  # MMM's Medivacs: slot j heals agent j, read from that ally's token
            if not getattr(args, "obs_agent_id", False):
                raise healer_error("transformer")
            allies = names["allies"]
            ally, heals = heal_slots(args.n_agents, len(self.entity_actions[2]), len(allies), self.healers)
            self.register_buffer("ally_tokens", torch.tensor(allies), persistent=False)
            self.register_buffer("heal_ally", ally, persistent=False)
            self.register_buffer("heal_slot", heals, persistent=False)
            self.heal_head = nn.Linear(emb, 1)

    def init_hidden(self, n):
        return self.embed.weight.new_zeros(n, self.emb)

    def forward(self, inputs, hidden):
        # inputs: [n, T, D]; hidden: [n, emb]. The recurrence runs step by step over T; every
        # step handles all rows at once.
        n, t, _ = inputs.shape
        x = torch.cat([inputs, inputs.new_zeros(n, t, 1)], dim=-1)[..., self.index]  # [n, T, K, d]
        tokens = self.embed(x) + self.group_embed(self.groups)  # [n, T, K, emb]
        agent = row_agents(inputs, self.heal_slot.shape[0]) if self.healers else None
        outs = []
        # unbind, not tokens[:, s]: each select's backward would write a zero tensor the size of
        # all T steps, so the backward pass grew with T squared.
        for step in tokens.unbind(1):
            seq = self.encoder(torch.cat([step, hidden.unsqueeze(1)], dim=1))
            hidden = seq[:, -1]
            outs.append(self._heads(seq, agent))
        return torch.stack(outs, dim=1), hidden

    def _heads(self, seq, agent=None):
        if self.entity_actions is None:
            return self.head(seq[:, -1])
        own = self.entity_actions[0]
        basic = self.basic_head(seq[:, own])
        entity = self.entity_head(seq[:, self.targets]).squeeze(-1)
        if agent is not None:  # a Medivac's slots: the ally each heals
            heal = self.heal_head(seq[:, self.ally_tokens]).squeeze(-1)  # [n, allies]
            entity = torch.where(self.heal_slot[agent], torch.gather(heal, 1, self.heal_ally[agent]), entity)
        return torch.cat([basic, entity], dim=-1)
