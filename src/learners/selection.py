"""DIFFER's selection of individual experiences: weights W [B, T, N] from |delta_i| and a mask.

Every mode is vectorised (no Python loop over samples) and creates tensors on the input's device.
"""

import torch

MODES = ("all", "greedy", "greedy_weight", "PER", "PER_hard", "PER_weight")
LEGACY_PER_BETA = 0.401  # the reference's legacy PER: its memory is rebuilt each call at 0.4 + 0.001


def selected_ratio(args, t_env):
    """kappa: warm-up from selected_ratio_start to selected_ratio_end over warm_up_ratio of t_max."""
    if not args.warm_up:
        return args.selected_ratio
    progress = t_env / args.t_max if args.t_max > 0 else 1.0
    if args.warm_up_ratio <= 0 or progress > args.warm_up_ratio:
        return args.selected_ratio_end
    return (
        args.selected_ratio_start
        + (args.selected_ratio_end - args.selected_ratio_start) * progress / args.warm_up_ratio
    )


def per_beta(args, t_env):
    """Importance-weight exponent, annealed over t_max and clamped to [beta_start, beta_end]."""
    beta = args.beta_start + (args.beta_end - args.beta_start) * t_env / max(args.t_max, 1)
    lo, hi = sorted((args.beta_start, args.beta_end))
    return min(max(beta, lo), hi)


def selection_weights(e, mask, mode, ratio, alpha=0.6, epsilon=0.01, beta=0.6, generator=None):
    """e = |delta_i * M| [B, T, N] (0 where mask is 0), mask M [B, T, N] -> W [B, T, N]."""
    if mode == "all":
        return torch.ones_like(e)
    valid = int(mask.sum().item())  # one host sync per update
    n_sel = int(valid * ratio)
    if n_sel <= 0 or valid <= 0:
        return torch.zeros_like(e)
    flat = e.reshape(-1)
    if mode in ("greedy", "greedy_weight"):
        pivot = torch.topk(flat, n_sel, sorted=False).values.min()
        chosen = (e >= pivot).to(e.dtype)
        if mode == "greedy":
            return chosen
        w = (e - pivot) * chosen
        top = w.max()
        return chosen if top <= 0 else w / top
    if mode in ("PER_hard", "PER_weight"):
        p = (e + epsilon * mask).pow(alpha) * (mask > 0)
        probs = (p / p.sum()).reshape(-1)
        idx = torch.multinomial(probs, n_sel, replacement=True, generator=generator)
        counts = torch.bincount(idx, minlength=probs.numel()).view_as(e).to(e.dtype)
        if mode == "PER_hard":
            return counts
        w = (1.0 / (probs.view_as(e) * e.numel() + 1e-8)).pow(beta) * mask
        return counts * (w / w.max())
    if mode == "PER":
        # Legacy semantics, vectorised: priority |delta|, stratified proportional sampling
        # (one uniform draw in each of n_sel equal slices of the total priority), IS weight
        # (P_j / P_min)^(-beta) with P_min over the positive priorities.
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
    raise ValueError(f"unknown selected mode {mode!r}; valid choices: {', '.join(MODES)}")
