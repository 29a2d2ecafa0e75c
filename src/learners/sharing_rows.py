"""Sharing as the researcher's published INSPIRE and SUPER code does it (docs/algorithms/
value_based.md, "INSPIRE as published"): received errors are extra rows of the individual TD
errors, placed after the batch's own rows, that enter DIFFER's selection and the loss's count.

- share rule `owner_density` (registered in learners/sharing.py): each owner agent k fits a
  normal to its own errors of the episode; every agent's error is scored under it where k sees
  that agent; the scores, summed over owners, give the draw weights of the episode's entries;
- share rule `mean_std_gate`: an error outside its agent's episode mean +- one standard deviation;
- receive (`share_receive`): which agent's error lands in each extra row;
- share_target `rows` (with the shared errors' gradient) or `detached_rows` (without).

Each place where the published code does something other than what it describes is a named
option; its published value reproduces the code, its default here is the sound version:
share_moments (padded: mean and variance over the padded time axis, zeros included),
share_variance_squared (the variance used where the standard deviation belongs), share_index_map
(published: the flat draw mapped back by a rule that is not the inverse of the flattening),
share_receive (own_if_in_sight: an agent "receives" its own drawn error when it sees a teammate),
share_sight (manhattan: |dx| + |dy| <= share_radius, dead units included, padded steps all in
sight, as their bitmask decodes) and share_ratio_clock (forward_loop: the ratio's schedule read at
the last time index of the agent's forward pass instead of t_env).
"""

from __future__ import annotations

import math

import torch

from learners.selection import per_importance, per_priorities

ROW_TARGETS = ("rows", "detached_rows")
RECEIVE_CHOICES = ("max_in_sight", "own_if_in_sight", "own")


# --- sight -------------------------------------------------------------------------------------


def manhattan_sight(pos, filled, sight_range):
    """pos [B, T, N, 2], filled [B, T] -> sight [B, T, N, N] (k sees j): |dx| + |dy| <= range,
    never oneself, dead units included; a padded step is all ones, as the published learner
    decodes the zero bitmask a padded step stores."""
    d = (pos.unsqueeze(3) - pos.unsqueeze(2)).abs().sum(-1)  # [B, T, N, N]
    n = pos.shape[2]
    others = ~torch.eye(n, dtype=torch.bool, device=pos.device)
    sight = (d <= sight_range) & others
    padded = (filled <= 0)[..., None, None]
    return (sight | padded).to(pos.dtype)


def encode_ally_bitmask(not_in_sight):
    """[..., N, N] bool (1: not in sight, and 1 for oneself) -> [..., N] ints, the first agent in
    the highest bit: the published env's encoding of each agent's row."""
    n = not_in_sight.shape[-1]
    powers = 2 ** torch.arange(n - 1, -1, -1, device=not_in_sight.device)
    return (not_in_sight.long() * powers).sum(-1)


def decode_ally_bitmask(codes, n):
    """[..., N] ints -> sight [..., N, N] (k sees j), decoded and inverted as the published
    learner does."""
    shifts = torch.arange(n - 1, -1, -1, device=codes.device)
    bits = (codes.long().unsqueeze(-1) >> shifts) & 1
    return (bits == 0).to(torch.float32)


# --- owner-summed density -----------------------------------------------------------------------


def episode_moments(x, mask, padded, min_eps):
    """Each (episode, agent)'s mean and variance over time -> [B, N] each. padded: over every
    step of the padded batch, zeros included, unbiased (the published code); else over the valid
    steps. The variance is clamped at min_eps."""
    if padded:
        mean, var = x.mean(1), x.var(1) if x.shape[1] > 1 else torch.zeros_like(x[:, 0])
    else:
        n = mask.sum(1).clamp(min=1.0)
        mean = (x * mask).sum(1) / n
        var = (((x - mean.unsqueeze(1)) * mask) ** 2).sum(1) / n
    return mean, var.clamp(min=min_eps)


def owner_scores(x, mask, sight, args):
    """x = the masked errors [B, T, N], sight [B, T, N_owner, N] -> the draw weights [B, T, N]:
    sum over owners k of the flipped, shifted density of each error under k's normal, where k
    sees the agent, normalised over each episode's steps per agent."""
    padded = args.share_moments == "padded"
    mean, var = episode_moments(x, mask, padded, args.share_min_eps)  # [B, K]
    scale = var * args.share_temperature
    var_used = scale**2 if args.share_variance_squared else var * args.share_temperature**2
    xs = x.unsqueeze(2)  # [B, T, 1, N]: agent j's error at each step
    m, v = mean[:, None, :, None], var_used[:, None, :, None]  # [B, 1, K, 1]
    density = torch.exp(-((xs - m) ** 2) / (2 * v)) / torch.sqrt(2 * math.pi * v)  # [B, T, K, N]
    flipped = -density
    if padded:  # shifted by the minimum over the whole batch, per owner; padded entries scored
        low = flipped.amin(dim=(0, 1, 3), keepdim=True)
        shifted = flipped - low
    else:  # shifted by the minimum over each episode's valid entries; invalid entries 0
        valid = mask.unsqueeze(2).expand_as(flipped) > 0
        big = torch.finfo(flipped.dtype).max
        low = torch.where(valid, flipped, torch.full_like(flipped, big)).amin(dim=(1, 3), keepdim=True)
        shifted = (flipped - low) * valid
    summed = (shifted * sight).sum(2)  # [B, T, N]
    return summed / (summed.sum(1, keepdim=True) + args.share_min_eps)


def draws_per_episode(t, n, ratio):
    """The published count: max(int((T - 1)(N - 1) ratio), 1)."""
    return max(int((t - 1) * (n - 1) * ratio), 1)


def draw_without_replacement(weights, k, generator):
    """weights [B, M] >= 0 -> [B, k] indices drawn without replacement in proportion to the
    weights (Gumbel top-k: the same law as drawing one at a time), and [B, k] whether each draw
    is real (a row with fewer than k positive weights draws fewer)."""
    u = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype)
    gumbel = -torch.log(-torch.log(u.clamp(min=1e-20)))
    keys = torch.where(weights > 0, weights.log() + gumbel, torch.full_like(weights, -math.inf))
    k = min(k, weights.shape[1])
    top = keys.topk(k, dim=1)
    return top.indices, torch.isfinite(top.values)


def unflatten(index, t, n, published):
    """A flat index into an episode's row-major [T, N] -> (step, agent). published: step =
    f mod (T - 1), agent = (f div (T - 1)) mod (N - 1), as the published code maps it."""
    if not published:
        return index // n, index % n
    return index % max(t - 1, 1), (index // max(t - 1, 1)) % max(n - 1, 1)


def share_owner_density(ctx):
    """The published INSPIRE's sharing: per episode, draws_per_episode entries without
    replacement in proportion to owner_scores, mapped back to (step, agent)."""
    b, t, n = ctx.x.shape
    senders = torch.zeros_like(ctx.x)
    if n < 2 or t < 1:
        return senders  # nobody to share with
    x = ctx.x * ctx.mask
    scores = owner_scores(x, ctx.mask, ctx.sight, ctx.args)
    k = draws_per_episode(t, n, ctx.ratio)
    index, real = draw_without_replacement(scores.reshape(b, t * n), k, ctx.generator)
    step, agent = unflatten(index, t, n, ctx.args.share_index_map == "published")
    rows = torch.arange(b, device=x.device).unsqueeze(1).expand_as(index)
    senders[rows[real], step[real], agent[real]] = 1.0  # a repeated entry is shared once
    return senders


def share_mean_std_gate(ctx):
    """The published SUPER's gate: an error outside its (episode, agent) mean +- one standard
    deviation over time (share_moments=padded: over the padded steps, unbiased, zeros included)."""
    x = ctx.x * ctx.mask
    if ctx.args.share_moments == "padded":
        mean = x.mean(1, keepdim=True)
        std = x.std(1, keepdim=True) if x.shape[1] > 1 else torch.zeros_like(mean)
    else:
        mean, var = episode_moments(x, ctx.mask, False, 0.0)
        mean, std = mean.unsqueeze(1), var.sqrt().unsqueeze(1)
    return ((x >= mean + std) | (x <= mean - std)).to(x.dtype) * (x != 0)


# --- receiving ------------------------------------------------------------------------------------


def receive_plan(x, senders, sight, how):
    """Which agent's error lands in each extra row: -> (source [B, T, N] long, has [B, T, N]).
    max_in_sight: agent i takes the largest-magnitude error shared at that step by a teammate
    it sees; own_if_in_sight (the published INSPIRE): its own shared error, where it sees at
    least one teammate; own (the published SUPER): its own shared error."""
    n = x.shape[-1]
    own = torch.arange(n, device=x.device).expand_as(x)
    shared = senders > 0
    if how == "own":
        return own, shared
    others = ~torch.eye(n, dtype=torch.bool, device=x.device)
    sees = (sight > 0) & others  # [B, T, N_recv, N_send]
    if how == "own_if_in_sight":
        return own, shared & sees.any(-1)
    offered = sees & shared.unsqueeze(2)  # receiver i, sender c
    size = torch.where(offered, x.abs().unsqueeze(2).expand_as(offered), torch.full_like(sight, -1.0))
    best = size.max(-1)
    return best.indices, best.values >= 0


def gather_rows(delta, source, has, detached):
    """The extra rows [B, T, N]: delta's entries at (b, t, source), 0 where nothing is received;
    without their gradient where detached."""
    rows = torch.gather(delta, 2, source) * has.to(delta.dtype)
    return rows.detach() if detached else rows


def expected_selection_weights(e, mask, ratio, alpha, epsilon, beta):
    """PER_weight's expected weights E[W] [.., N] (draw count times normalised importance
    weight), without drawing: what received rows change in the real rows' weights can be logged
    without moving any random stream."""
    p = per_priorities(e, mask, alpha, epsilon)
    total = p.sum()
    if total <= 0:
        return torch.zeros_like(e)
    probs = p / total
    n_sel = int(int(mask.sum().item()) * ratio)
    return n_sel * probs * per_importance(probs, e, mask, beta)
