"""DIFFER's selection of individual experiences: weights W [B, T, N] from |delta_i| and a mask.

Each mode is a rule in RULES (name -> rule(e, mask, n_sel, alpha, epsilon, beta, generator)), so a
new one is one function and one decorator. Every rule is vectorised (no Python loop over samples)
and creates tensors on the input's device.
"""

import torch

from components.schedules import horizon, horizon_share, linear
from utils.keys import declare_keys
from utils.registry import registrar

declare_keys(
    "DIFFER (q_divide_learner): selection of individual experiences",
    (
        "selected",
        "greedy",
        None,
        "all, greedy, greedy_weight, PER, PER_hard or PER_weight",
    ),
    (
        "selected_ratio",
        0.9,
        "float in [0, 1]",
        "share of valid agent-steps selected (when selected_warm_up is False)",
    ),
    (
        "selected_warm_up",
        True,
        None,
        "anneal the ratio from selected_ratio_start to selected_ratio_end",
    ),
    (
        "selected_ratio_start",
        0.8,
        "float in [0, 1]",
        "ratio at t_env = 0 (selected_warm_up)",
    ),
    (
        "selected_ratio_end",
        1.0,
        "float in [0, 1]",
        "ratio after selected_warm_up_ratio of the schedule horizon (selected_warm_up)",
    ),
    (
        "selected_warm_up_ratio",
        0.6,
        "float in [0, 1]",
        "share of the schedule horizon over which the ratio anneals",
    ),
    (
        "selected_alpha",
        0.6,
        "float > 0",
        "PER priority exponent: p = (|delta_i| + selected_epsilon)^alpha",
    ),
    (
        "selected_epsilon",
        0.01,
        "float >= 0",
        "PER priority floor for valid samples",
    ),
    (
        "selected_beta_start",
        0.6,
        "float in [0, 1]",
        "PER importance-weight exponent at t_env = 0",
    ),
    (
        "selected_beta_end",
        1.0,
        "float in [0, 1]",
        "PER importance-weight exponent at schedule_horizon",
    ),
)


LEGACY_PER_BETA = 0.401  # the reference's legacy PER: its memory is rebuilt each call at 0.4 + 0.001
RULES = {}
rule = registrar(RULES)


def selected_ratio(args, t_env):
    """kappa: warm-up from selected_ratio_start to selected_ratio_end over selected_warm_up_ratio of the
    schedule horizon."""
    if not args.selected_warm_up:
        return args.selected_ratio
    return linear(
        args.selected_ratio_start,
        args.selected_ratio_end,
        horizon_share(args, t_env),
        args.selected_warm_up_ratio,
    )


def per_beta(args, t_env):
    """DIFFER's importance-weight exponent, from selected_beta_start to selected_beta_end over
    the schedule horizon."""
    return linear(args.selected_beta_start, args.selected_beta_end, t_env, horizon(args))


def selection_weights(e, mask, mode, ratio, alpha=0.6, epsilon=0.01, beta=0.6, generator=None):
    """e = |delta_i * M| [B, T, N] (0 where mask is 0), mask M [B, T, N] -> W [B, T, N] by the
    rule RULES[mode], over n_sel = int(valid * ratio) selections."""
    if mode not in RULES:
        raise ValueError(f"unknown selected mode {mode!r}; valid choices: {', '.join(RULES)}")
    if mode == "all":
        return torch.ones_like(e)
    valid = int(mask.sum().item())  # one host sync per update
    n_sel = int(valid * ratio)
    if n_sel <= 0 or valid <= 0:
        return torch.zeros_like(e)
    return RULES[mode](e, mask, n_sel, alpha, epsilon, beta, generator)


@rule("all")
def _all(e, mask, n_sel, alpha, epsilon, beta, generator):
    return torch.ones_like(e)


def _top(e, n_sel):
    """The n_sel largest entries (ties at the pivot all chosen) and the pivot."""
    pivot = torch.topk(e.reshape(-1), n_sel, sorted=False).values.min()
    return (e >= pivot).to(e.dtype), pivot


@rule("greedy")
def _greedy(e, mask, n_sel, alpha, epsilon, beta, generator):
    return _top(e, n_sel)[0]


@rule("greedy_weight")
def _greedy_weight(e, mask, n_sel, alpha, epsilon, beta, generator):
    chosen, pivot = _top(e, n_sel)
    w = (e - pivot) * chosen
    top = w.max()
    return chosen if top <= 0 else w / top


def per_priorities(e, mask, alpha, epsilon):
    """PER_weight's priorities (|delta| + epsilon)^alpha on the valid entries, 0 elsewhere."""
    return (e + epsilon * mask).pow(alpha) * (mask > 0)


def per_importance(probs, e, mask, beta):
    """PER_weight's importance weights (N P)^-beta over their maximum, N the entries of e."""
    w = (1.0 / (probs.view_as(e) * e.numel() + 1e-8)).pow(beta) * mask
    return w / w.max()


def _per_counts(e, mask, n_sel, alpha, epsilon, generator):
    p = per_priorities(e, mask, alpha, epsilon)
    probs = (p / p.sum()).reshape(-1)
    idx = torch.multinomial(probs, n_sel, replacement=True, generator=generator)
    return torch.bincount(idx, minlength=probs.numel()).view_as(e).to(e.dtype), probs


@rule("PER_hard")
def _per_hard(e, mask, n_sel, alpha, epsilon, beta, generator):
    return _per_counts(e, mask, n_sel, alpha, epsilon, generator)[0]


@rule("PER_weight")
def _per_weight(e, mask, n_sel, alpha, epsilon, beta, generator):
    counts, probs = _per_counts(e, mask, n_sel, alpha, epsilon, generator)
    return counts * per_importance(probs, e, mask, beta)


@rule("PER")
def _per_legacy(e, mask, n_sel, alpha, epsilon, beta, generator):
    """Legacy semantics, vectorised: priority |delta|, stratified proportional sampling (one
    uniform draw in each of n_sel equal slices of the total priority), IS weight
    (P_j / P_min)^(-beta) with P_min over the positive priorities."""
    flat = e.reshape(-1)
    p = flat * (mask.reshape(-1) > 0)
    total = p.sum()
    if total <= 0:
        return torch.zeros_like(e)
    cum = torch.cumsum(p, 0)
    u = torch.rand(n_sel, device=e.device, dtype=e.dtype, generator=generator)
    points = (torch.arange(n_sel, device=e.device, dtype=e.dtype) + u) * (total / n_sel)
    # right=True never lands on a zero-priority entry (its cumulative sum equals the one
    # before); the clamp catches rounding at the top end (cum.argmax() = last positive entry).
    idx = torch.minimum(torch.searchsorted(cum, points, right=True), cum.argmax())
    counts = torch.bincount(idx, minlength=p.numel()).to(e.dtype)
    probs = p / total
    p_min = probs[probs > 0].min()
    w = torch.where(probs > 0, (probs / p_min).pow(-LEGACY_PER_BETA), torch.zeros_like(probs))
    return (counts * w).view_as(e)


MODES = tuple(RULES)
