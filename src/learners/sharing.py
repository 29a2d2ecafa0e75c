"""Experience sharing between agents in the individual-TD learner (q_divide_learner).

At each update every agent's individual TD errors delta_i [B, T, N] are known. Sharing decides,
independently of DIFFER's selection:

- which of an agent's errors it shares (a share rule of SHARE_RULES: S [B, T, N], how many times
  each sender step is shared; SUPER's quantile, gaussian and stochastic rules, the density rules);
- who receives them (share_to: every living teammate, those the sender sees, those within a
  radius; share_fallback when nobody is in range) and whether each receiver takes one (a receive
  rule of RECEIVE_RULES);
- what a received error does (share_target): `reweight`, the sender's error counts once more per
  receiver (one shared network), or `receiver`, the receiver's own network trains on the sender's
  transition (q_divide_learner computes that term).

The draws come from the sharer's own generator, seeded from the run's seed, so that sharing never
moves the random numbers of the rest of the run: with nobody in range a run equals the run
without sharing. Every rule is vectorised; the loops are over agents, never over samples.
"""

from __future__ import annotations

import math
from functools import cached_property
from types import SimpleNamespace

import torch

from components.schedules import horizon_share, linear
from learners.sharing_rows import (
    ROW_TARGETS,
    manhattan_sight,
    receive_plan,
    share_mean_std_gate,
    share_owner_density,
)
from utils.keys import declare_keys
from utils.registry import registrar

declare_keys(
    "experience sharing between agents (q_divide_learner)",
    (
        "share_rule",
        "none",
        "one of: none, all, quantile, gaussian, stochastic, density, joint_density, owner_density, "
        "mean_std_gate",
        "which of each agent's TD errors it shares: none; all; SUPER's quantile (above the 1-b quantile"
        " of its last share_window |errors|), gaussian (above a normal fitted to that window) or "
        "stochastic (p = min(1, b n |e| / sum|e|)); density / joint_density: the farther from the mean "
        "of the agent's own (or every agent's) error distribution, the likelier; owner_density: the "
        "published INSPIRE's (learners/sharing_rows.py), each owner's episode normal scoring the errors"
        " of the agents it sees, draws per episode; mean_std_gate: the published SUPER's, outside the "
        "episode's mean +- one std",
    ),
    (
        "share_bandwidth",
        0.1,
        "float in [0, 1]",
        "SUPER's b: the share of errors shared (quantile, gaussian, stochastic)",
    ),
    (
        "share_window",
        1500,
        "int >= 2",
        "SUPER's window: each agent's last |errors| that quantile and gaussian fit",
    ),
    (
        "share_gaussian_scale",
        "std",
        "one of: std, variance",
        "gaussian: the normal's scale; variance is SUPER's code's (the variance where the standard "
        "deviation belongs)",
    ),
    (
        "share_temperature",
        1.0,
        "float > 0",
        "density rules: T scales the fitted variance (T^2 sigma^2)",
    ),
    (
        "share_ratio_start",
        0.0,
        "float in [0, 1]",
        "density rules: shares per episode and agent as a share of its valid steps, at t_env = 0",
    ),
    (
        "share_ratio_end",
        0.5,
        "float in [0, 1]",
        "... after share_warm_up_ratio of the schedule horizon",
    ),
    (
        "share_warm_up_ratio",
        0.6,
        "float in [0, 1]",
        "share of the schedule horizon over which the share ratio anneals",
    ),
    (
        "receive_rule",
        "all",
        "one of: all, gaussian_gate, sigmoid_gate",
        "whether a receiver takes a shared error e: always; with p = 1 - exp(-(e - mu)^2 / (2 "
        "sigma^2)); or with p = sigmoid(receive_alpha (|e - mu| - receive_beta sigma)), mu and sigma of"
        " the receiver's own errors",
    ),
    (
        "receive_alpha",
        1.0,
        "float > 0",
        "sigmoid_gate: slope",
    ),
    (
        "receive_beta",
        1.0,
        "float >= 0",
        "sigmoid_gate: offset in standard deviations",
    ),
    (
        "share_to",
        "all",
        "one of: all, sight, radius",
        "receivers: every living teammate; those the sender sees (visible); those closer than "
        "share_radius (pos)",
    ),
    (
        "share_radius",
        9.0,
        "float >= 0",
        "share_to=radius: distance (strictly less) in the env's units (.inf: everyone)",
    ),
    (
        "share_metric",
        "l2",
        "one of: l1, l2",
        "share_to=radius: distance",
    ),
    (
        "share_fallback",
        "drop",
        "one of: drop, nearest, all",
        "a shared error with no receiver in range: not shared; to the nearest living teammate (needs "
        "pos); to every living teammate",
    ),
    (
        "share_target",
        "reweight",
        "one of: reweight, receiver, rows, detached_rows",
        "reweight: one shared network, the sender's error counts once more per receiver; receiver "
        "(agent_param_sharing=False, SUPER's): each receiver's own network trains on the sender's "
        "transition with its own target network; rows / detached_rows (the published SUPER / INSPIRE): "
        "received errors are extra rows after the batch's own, in DIFFER's selection pool and the "
        "loss's count, with or without their gradient",
    ),
    (
        "share_control",
        "none",
        "one of: none, mass",
        "mass: the same extra weight put on randomly chosen valid agent-steps instead (the control for "
        "reweight)",
    ),
    (
        "share_weight",
        1.0,
        "float >= 0",
        "the weight of each shared copy (reweight: added per receiver to the sender's step; receiver: "
        "the receiver's term); the mass control moves the same weight",
    ),
    (
        "share_receive",
        "max_in_sight",
        "one of: max_in_sight, own_if_in_sight, own",
        "rows targets: what lands in agent i's extra row: the largest-magnitude error shared by a "
        "teammate i sees; its own shared error where it sees a teammate (the published INSPIRE's); its "
        "own shared error (the published SUPER's)",
    ),
    (
        "share_sight",
        "visible",
        "one of: visible, manhattan",
        "who sees whom for owner_density and share_receive: the env's visible (SMAC's sight, living "
        "units); the published rule, |dx| + |dy| <= share_radius on pos, dead units included, padded "
        "steps all in sight",
    ),
    (
        "share_moments",
        "valid",
        "one of: valid, padded",
        "owner_density and mean_std_gate: each episode's mean and variance over its valid steps; "
        "padded: over every step of the padded batch, zeros included (the published code's)",
    ),
    (
        "share_variance_squared",
        False,
        None,
        "owner_density: the normal's variance is (T var)^2, the variance where the standard deviation "
        "belongs (the published code's); False: T^2 var",
    ),
    (
        "share_index_map",
        "exact",
        "one of: exact, published",
        "owner_density: a draw from an episode's row-major [T, N] back to (step, agent); published: "
        "step f mod (T-1), agent (f div (T-1)) mod (N-1), which is not the inverse",
    ),
    (
        "share_ratio_clock",
        "t_env",
        "one of: t_env, forward_loop",
        "the share ratio's schedule read at t_env, or at the last time index of the agent's forward "
        "pass (the published code's)",
    ),
    (
        "share_min_eps",
        1e-06,
        "float > 0",
        "owner_density: the floor of the variance and of the normaliser",
    ),
)


SHARE_RULES = {}
RECEIVE_RULES = {}
SHARE_CHOICES = (
    "none", "all", "quantile", "gaussian", "stochastic", "density", "joint_density", "owner_density",
    "mean_std_gate",
)  # fmt: skip
DENSITY_EPSILON = 1e-8  # the researcher's epsilon in P'' / (sum P'' + epsilon)
MIN_VARIANCE = 1e-12


share_rule = registrar(SHARE_RULES)
receive_rule = registrar(RECEIVE_RULES)
# the published code's rules (learners/sharing_rows.py)
share_rule("owner_density")(share_owner_density)
share_rule("mean_std_gate")(share_mean_std_gate)


def share_ratio(args, t_env):
    """The density rules' share ratio, from share_ratio_start to share_ratio_end over
    share_warm_up_ratio of the schedule horizon."""
    return linear(
        args.share_ratio_start, args.share_ratio_end, horizon_share(args, t_env), args.share_warm_up_ratio
    )


def masked_moments(x, mask, dims):
    """Mean and variance of x over the valid entries along dims (keepdim)."""
    n = mask.sum(dims, keepdim=True).clamp(min=1.0)
    mean = (x * mask).sum(dims, keepdim=True) / n
    var = (((x - mean) * mask) ** 2).sum(dims, keepdim=True) / n
    return mean, var.clamp(min=MIN_VARIANCE)


# --- share rules: (ctx) -> S [B, T, N] ------------------------------------------------------
# ctx: e = |delta| [B, T, N] (0 where invalid), x = delta (signed), mask [B, T, N], args, ratio,
# window (the sharer's running window), generator.


@share_rule("all")
def _share_all(ctx):
    return ctx.mask.clone()


@share_rule("quantile")
def _share_quantile(ctx):
    """SUPER: an error above the (1 - b) quantile of the agent's window of recent |errors|."""
    window = ctx.window.push(ctx.e, ctx.mask)
    thresholds = torch.stack([torch.quantile(w, 1.0 - ctx.args.share_bandwidth) for w in window])
    return (ctx.e > thresholds).to(ctx.e.dtype) * ctx.mask


@share_rule("gaussian")
def _share_gaussian(ctx):
    """SUPER: an error above isf(b) of a normal fitted to the agent's window of |errors|; the
    scale is the standard deviation, or the variance as SUPER's code passes it."""
    window = ctx.window.push(ctx.e, ctx.mask)
    mean = torch.stack([w.mean() for w in window])
    std = torch.stack([w.std(unbiased=False) for w in window])
    scale = std if ctx.args.share_gaussian_scale == "std" else std**2
    z = math.sqrt(2.0) * torch.special.erfinv(torch.tensor(1.0 - 2.0 * ctx.args.share_bandwidth)).item()
    return (ctx.e > mean + z * scale).to(ctx.e.dtype) * ctx.mask


@share_rule("stochastic")
def _share_stochastic(ctx):
    """SUPER: each error with p = min(1, b n |e| / sum |e|), n and the sum over the agent's
    valid steps in the batch."""
    n = ctx.mask.sum((0, 1), keepdim=True)
    total = (ctx.e * ctx.mask).sum((0, 1), keepdim=True).clamp(min=1e-12)
    p = (ctx.args.share_bandwidth * n * ctx.e / total).clamp(max=1.0) * ctx.mask
    return torch.bernoulli(p, generator=ctx.generator)


def _density(x, mean, var, temperature):
    t2v = temperature**2 * var
    return torch.exp(-((x - mean) ** 2) / (2 * t2v)) / torch.sqrt(2 * math.pi * t2v)


def _shifted(neg_density, mask):
    """P'' = P' - min P' over each episode's valid steps (dim 1), 0 where invalid."""
    big = torch.finfo(neg_density.dtype).max
    low = torch.where(mask > 0, neg_density, torch.full_like(neg_density, big)).amin(1, keepdim=True)
    return (neg_density - low) * mask


@share_rule("density")
def _share_density(ctx):
    """The researcher's version 1: P(x) the density of N(mu_i, T^2 sigma_i^2) of agent i's errors
    over the batch; P'' = -P - min(-P) over the episode's steps; share probability
    P'' / (sum_t P'' + eps), drawn ratio * valid steps times per episode and agent."""
    mean, var = masked_moments(ctx.x, ctx.mask, (0, 1))  # [1, 1, N]
    shifted = _shifted(-_density(ctx.x, mean, var, ctx.args.share_temperature), ctx.mask)
    return _draw_steps(shifted, ctx)


@share_rule("joint_density")
def _share_joint_density(ctx):
    """The researcher's version 2: agent i's error under every agent j's distribution,
    sum_j P''_j, then as version 1."""
    mean, var = masked_moments(ctx.x, ctx.mask, (0, 1))  # [1, 1, N]
    dens = _density(ctx.x.unsqueeze(-1), mean.unsqueeze(2), var.unsqueeze(2), ctx.args.share_temperature)
    mask4 = ctx.mask.unsqueeze(-1)  # [B, T, N_i, 1]
    shifted = _shifted(-dens, mask4).sum(-1)  # [B, T, N_i]
    return _draw_steps(shifted, ctx)


def share_probabilities(shifted, mask):
    """P'' [B, T, N] -> each step's share probability within its episode and agent."""
    return shifted / (shifted.sum(1, keepdim=True) + DENSITY_EPSILON) * mask


def _draw_steps(shifted, ctx):
    """Round(ratio * valid steps) draws with replacement per (episode, agent) from the share
    probabilities; -> how often each step was drawn."""
    probs = share_probabilities(shifted, ctx.mask)
    b, t, n = probs.shape
    rows = probs.permute(0, 2, 1).reshape(b * n, t)  # [B * N, T]
    counts_per_row = torch.round(ctx.ratio * ctx.mask.permute(0, 2, 1).reshape(b * n, t).sum(1)).long()
    counts_per_row = torch.where(rows.sum(1) > 0, counts_per_row, torch.zeros_like(counts_per_row))
    most = int(counts_per_row.max().item()) if rows.numel() else 0
    if most == 0:
        return torch.zeros_like(probs)
    safe = torch.where(rows.sum(1, keepdim=True) > 0, rows, torch.ones_like(rows))
    draws = torch.multinomial(safe, most, replacement=True, generator=ctx.generator)  # [B * N, most]
    keep = (torch.arange(most, device=rows.device) < counts_per_row[:, None]).to(probs.dtype)
    counts = torch.zeros_like(rows).scatter_add_(1, draws, keep)
    return counts.view(b, n, t).permute(0, 2, 1)


# --- receive rules: (e [B, T, N_send], mask, args) -> p [B, T, Ns, Nr], or None (no gate) ---


def receiver_moments(x, mask):
    """Each receiver's own error mean and standard deviation over the batch, [1, 1, 1, N_recv]."""
    mean, var = masked_moments(x, mask, (0, 1))
    return mean.unsqueeze(2), var.sqrt().unsqueeze(2)


@receive_rule("all")
def _receive_all(x, mask, args):
    return None  # no gate: nothing to compute


@receive_rule("gaussian_gate")
def _receive_gaussian(x, mask, args):
    """Far from the receiver's own errors, likelier taken: 1 - exp(-(e - mu_j)^2 / (2 sigma_j^2))."""
    mean, std = receiver_moments(x, mask)
    return 1.0 - torch.exp(-((x.unsqueeze(-1) - mean) ** 2) / (2 * std**2))


@receive_rule("sigmoid_gate")
def _receive_sigmoid(x, mask, args):
    """P = sigmoid(alpha (|e - mu_j| - beta sigma_j))."""
    mean, std = receiver_moments(x, mask)
    return torch.sigmoid(args.receive_alpha * ((x.unsqueeze(-1) - mean).abs() - args.receive_beta * std))


class Window:
    """Each agent's last `size` |errors|, for SUPER's quantile and gaussian rules."""

    def __init__(self, n_agents, size):
        self.values = [torch.zeros(0) for _ in range(n_agents)]
        self.size = size

    def push(self, e, mask):
        """Add the batch's valid |errors| (in episode and step order) -> each agent's window."""
        for i in range(len(self.values)):  # agents, not samples
            fresh = e[..., i][mask[..., i] > 0].detach()
            self.values[i] = torch.cat([self.values[i].to(fresh.device), fresh])[-self.size :]
        return [v if v.numel() else torch.zeros(1, device=e.device) for v in self.values]

    def state_dict(self):
        return {"values": [v.cpu() for v in self.values]}

    def load_state_dict(self, state):
        self.values = [v.clone() for v in state["values"]]


class Shared(SimpleNamespace):
    """One update's sharing: senders S [B, T, N], receivers R [B, T, N_send, N_recv] (0/1, gates
    drawn), extra [B, T, N] = S * receivers per step * share_weight, and its statistics, computed
    when read (the learners read them only when they log, so other updates pay neither their sums
    nor, on a GPU, the host syncs of their emptiness checks)."""

    @cached_property
    def stats(self):
        shared = self.senders > 0
        nobody = shared & (self.in_range.sum(-1) == 0)  # shared, nobody in range: the fallback's
        n_shared = shared.sum()
        # over the shared steps whose sender has a living teammate (with none, "all in range" is
        # empty, and range could not have mattered)
        with_mates = shared & (self.living.sum(-1) > 0)
        everyone = (self.in_range == self.living).all(-1) & with_mates
        stats = {
            "share_fraction": n_shared / self.mask.sum().clamp(min=1.0),
            "share_extra_weight": self.extra.sum(),
        }
        # a rate over the shared steps is not logged when there are none (not a rate of 0)
        if n_shared > 0:
            stats["share_receivers_mean"] = self.receivers.sum(-1)[shared].sum() / n_shared
            stats["share_fallback_rate"] = nobody.sum() / n_shared
        if with_mates.any():
            stats["share_all_in_range"] = everyone.sum() / with_mates.sum()
        return stats


class SharedRows(SimpleNamespace):
    """One update's sharing as extra rows (learners/sharing_rows.py): senders S [B, T, N], and for
    each extra row the agent whose error it holds (source) and whether it holds one (has)."""

    @cached_property
    def stats(self):
        return {"share_fraction": (self.senders > 0).sum() / self.mask.sum().clamp(min=1.0)}


def uses_sight(args):
    """Whether these settings read who sees whom."""
    target = getattr(args, "share_target", "reweight")
    receive = getattr(args, "share_receive", "max_in_sight")
    return args.share_rule == "owner_density" or (target in ROW_TARGETS and receive != "own")


class Sharer:
    """Sharing's state (its generator, SUPER's windows) and one update's share weights."""

    def __init__(self, args, n_agents, device):
        self.args, self.n_agents = args, n_agents
        self.generator = torch.Generator(device=device)
        seed = args.seed if isinstance(getattr(args, "seed", None), int) else 0
        self.generator.manual_seed((seed * 1000003 + 7919) % (2**63))
        self.window = Window(n_agents, args.share_window)

    def state_dict(self):
        return {"generator": self.generator.get_state(), **self.window.state_dict()}

    def load_state_dict(self, state):
        self.generator.set_state(state["generator"])
        self.window.load_state_dict(state)

    def share(self, delta, mask, batch, t_env):
        """delta [B, T, N] (the individual TD errors), mask [B, T, N] (valid and alive) -> Shared."""
        args = self.args
        x = delta.detach()
        e = x.abs() * mask
        # the published code reads the ratio's schedule at its forward loop's last time index
        clock = delta.shape[1] if getattr(args, "share_ratio_clock", "t_env") == "forward_loop" else t_env
        ctx = SimpleNamespace(
            e=e, x=x, mask=mask, args=args, ratio=share_ratio(args, clock), window=self.window,
            generator=self.generator, sight=self.sight(batch) if uses_sight(args) else None,
        )  # fmt: skip
        senders = SHARE_RULES[args.share_rule](ctx)
        if getattr(args, "share_target", "reweight") in ROW_TARGETS:
            source, has = receive_plan(x * mask, senders, ctx.sight, args.share_receive)
            return SharedRows(senders=senders, source=source, has=has, mask=mask)
        living = self._living(mask)  # [B, T, Ns, Nr]: j != i, j valid and alive
        in_range = self._in_range(batch, living)
        n_range = in_range.sum(-1)
        shared = senders > 0
        nobody = shared & (n_range == 0)
        receivers = torch.where(nobody.unsqueeze(-1), self._fallback(batch, living), in_range)
        gate = RECEIVE_RULES[args.receive_rule](x, mask, args)
        if gate is not None:
            receivers = receivers * torch.bernoulli(
                gate.clamp(0.0, 1.0) * receivers, generator=self.generator
            )
        receivers = receivers * shared.unsqueeze(-1).to(receivers.dtype)
        extra = senders * receivers.sum(-1)
        if args.share_weight != 1.0:
            extra = extra * args.share_weight
        if args.share_control == "mass":
            extra = self._scatter_randomly(extra, mask)
        return Shared(
            senders=senders, receivers=receivers, extra=extra, mask=mask, living=living, in_range=in_range
        )

    def sight(self, batch):
        """[B, T, N, N]: agent k sees agent j (share_sight: the env's visible, or the published
        Manhattan rule on pos)."""
        if getattr(self.args, "share_sight", "visible") == "manhattan":
            filled = batch["filled"][:, :-1, 0]
            return manhattan_sight(batch["pos"][:, :-1], filled, self.args.share_radius)
        return batch["visible"][:, :-1].float()

    def _living(self, mask):
        n = self.n_agents
        others = 1.0 - torch.eye(n, device=mask.device, dtype=mask.dtype)
        return mask.unsqueeze(-1) * mask.unsqueeze(-2) * others  # sender valid, receiver alive

    def _in_range(self, batch, living):
        to = self.args.share_to
        if to == "all":
            return living
        if to == "sight":  # visible[b, t, i, j]: sender i sees teammate j
            return living * batch["visible"][:, :-1].to(living.dtype)
        return living * (self._distances(batch) < self.args.share_radius).to(living.dtype)

    def _distances(self, batch):
        pos = batch["pos"][:, :-1]  # [B, T, N, 2]
        diff = pos.unsqueeze(3) - pos.unsqueeze(2)  # [B, T, Ns, Nr, 2]
        if self.args.share_metric == "l1":
            return diff.abs().sum(-1)
        return diff.pow(2).sum(-1).sqrt()

    def _fallback(self, batch, living):
        rule = self.args.share_fallback
        if rule == "drop":
            return torch.zeros_like(living)
        if rule == "all":
            return living
        d = torch.where(living > 0, self._distances(batch), torch.full_like(living, float("inf")))
        nearest = torch.zeros_like(living).scatter_(-1, d.argmin(-1, keepdim=True), 1.0)
        return nearest * living

    def _scatter_randomly(self, extra, mask):
        """The same extra weights, each moved to a valid agent-step drawn at random (the mass
        control: the weight without the selection)."""
        flat, valid = extra.reshape(-1), (mask.reshape(-1) > 0).nonzero().squeeze(1)
        order = torch.randperm(len(valid), generator=self.generator, device=self.generator.device)
        out = torch.zeros_like(flat)
        out[valid[order.to(valid.device)]] = flat[valid]
        return out.view_as(extra)


def needed_fields(config):
    """The step fields sharing reads with these settings."""
    if config.get("share_rule", "none") == "none":
        return set()
    if config["share_target"] in ROW_TARGETS or config["share_rule"] == "owner_density":
        if not uses_sight(SimpleNamespace(**config)):
            return set()
        return {"pos"} if config["share_sight"] == "manhattan" else {"visible"}
    fields = {"sight": {"visible"}, "radius": {"pos"}}.get(config["share_to"], set())
    if config["share_fallback"] == "nearest":
        fields = fields | {"pos"}
    return set(fields)
