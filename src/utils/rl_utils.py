import torch


class RunningMeanStd:
    """Running mean and variance (Chan et al.'s parallel update) over every entry seen, or per
    column with shape=(n,): the statistics then reduce over all leading dims of the inputs.

    unbiased: each batch enters with its sample variance (n - 1 in the denominator), as EPyMARL's
    standardise_rewards / standardise_returns do (torch.var); the running variance then sits
    n/(n-1) above the pooled variance of everything seen, which it equals without the flag."""

    def __init__(self, shape=(), epsilon=1e-4, device="cpu", unbiased=False):
        self.unbiased = unbiased
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = epsilon

    def update(self, x, mask=None):
        """Absorb the entries of x (those where mask is 1, if given) into the statistics."""
        x = x.double()
        if mask is None:
            mask = torch.ones_like(x)
        mask = mask.double().expand_as(x)
        dims = tuple(range(x.dim() - self.mean.dim()))
        batch_count = mask.sum(dims)
        n = batch_count.clamp(min=1.0)  # a column with no entries leaves its statistics as they are
        batch_mean = (x * mask).sum(dims) / n
        denominator = (n - 1).clamp(min=1.0) if self.unbiased else n
        batch_var = (((x - batch_mean) ** 2) * mask).sum(dims) / denominator
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.var = m2 / total
        self.count = total  # a tensor: no host sync in the training step

    def standardise(self, x, mask=None):
        """Absorb x, then return it standardised by the updated statistics, in x's dtype."""
        self.update(x, mask)
        return ((x - self.mean) / torch.sqrt(self.var)).to(x.dtype)

    def state_dict(self):
        count = self.count.tolist() if torch.is_tensor(self.count) else self.count
        return {"mean": self.mean, "var": self.var, "count": count}

    def load_state_dict(self, state):
        self.mean = state["mean"].to(self.mean.device)
        self.var = state["var"].to(self.var.device)
        count = state["count"]
        self.count = (
            torch.tensor(count, dtype=torch.float64, device=self.mean.device)
            if isinstance(count, list)
            else count
        )


# The value an unavailable action gets before a max or argmax over actions: below any real Q.
UNAVAILABLE_Q = -9999999.0


def bootstrap_terminated(batch, episode_limit, time_limit_bootstrap):
    """[B, T, 1] float termination flags for the targets.

    The batch stores true terminations only. With time_limit_bootstrap=False the last step an
    episode can have (t = episode_limit - 1) also ends the bootstrap: the objective is then the
    return within the episode limit (EPyMARL's treatment of MPE)."""
    terminated = batch["terminated"][:, :-1].float()
    if not time_limit_bootstrap and terminated.shape[1] >= episode_limit:
        terminated[:, episode_limit - 1] = 1.0  # beyond the filled steps, the mask removes it
    return terminated


def valid_mask(batch):
    """[B, T, 1] float: 1 for real transitions before (and at) termination, 0 after and in padding."""
    terminated = batch["terminated"][:, :-1].float()
    mask = batch["filled"][:, :-1].float()
    mask[:, 1:] = mask[:, 1:] * (1 - terminated[:, :-1])
    return mask


def alive_mask(batch):
    """[B, T+1, N] 1 while agent i still acts at step t: the step at which it dies is kept, every
    later one is not."""
    dead = batch["indi_terminated"].float()
    alive = torch.ones_like(dead)
    alive[:, 1:] = 1 - dead[:, :-1]
    return alive


def greedy_actions(q, avail):
    """Index [..., 1] of the best available action of Q [..., A] (0 where none is available)."""
    return q.masked_fill(avail == 0, UNAVAILABLE_Q).argmax(dim=-1, keepdim=True)


def bootstrap_actions(online_next, target_next, avail_next, double_q):
    """The actions [B, T, N, 1] whose target values bootstrap: the best available one of the
    online network's Q [B, T, N, A] (double_q), else of the target network's."""
    return greedy_actions(online_next if double_q else target_next, avail_next)


def bootstrap_values(online_next, target_next, avail_next, double_q):
    """Per-agent next-state values [B, T, N]: the target network's values of bootstrap_actions."""
    actions = bootstrap_actions(online_next, target_next, avail_next, double_q)
    return torch.gather(target_next, 3, actions).squeeze(3)


def lambda_returns(rewards, terminated, mask, target_qs, gamma, td_lambda):
    """TD(lambda) targets [B, T, n] from rewards, terminated, mask [B, T, 1 or n] and bootstrap
    values target_qs [B, T+1, n] (PyMARL2's recursion, as one matrix product over time):

        G[T] = Z[T] * (1 - sum_t d[t])
        G[t] = lambda*gamma*G[t+1] + m[t] * (r[t] + (1 - lambda)*gamma*(1 - d[t])*Z[t+1])
    """
    T = rewards.shape[1]
    c = gamma * td_lambda
    x = mask * (rewards + (1 - td_lambda) * gamma * (1 - terminated) * target_qs[:, 1:])
    g_last = target_qs[:, -1] * (1 - terminated.sum(dim=1))  # [B, n]
    t = torch.arange(T, device=rewards.device)
    offset = t[None, :] - t[:, None]  # k - t
    weights = torch.where(offset >= 0, c ** offset.clamp(min=0).to(x.dtype), torch.zeros((), device=x.device))
    tail = (c ** (T - t).to(x.dtype)).view(1, T, 1)
    return torch.einsum("tk,bkn->btn", weights, x) + tail * g_last[:, None, :]


@torch.no_grad()
def soft_update(target, source, tau):
    """target <- (1 - tau) * target + tau * source, parameter by parameter."""
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.mul_(1.0 - tau).add_(s, alpha=tau)


def make_optimiser(params, args, lr=None):
    # The fused kernels update all parameters in one call: about 15% of a small update's time.
    lr = args.lr if lr is None else lr
    if args.optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, eps=args.optim_eps, fused=True)
    return torch.optim.RMSprop(params, lr=lr, alpha=args.optim_alpha, eps=args.optim_eps, foreach=True)


def gumbel_noise(like):
    """Standard Gumbel samples shaped like `like`."""
    return -torch.log(-torch.log(torch.rand_like(like) + 1e-20) + 1e-20)


def gumbel_softmax(logits, temperature=1.0):
    """Soft Gumbel-softmax sample softmax((logits + g) / temperature): a point of the simplex."""
    return torch.softmax((logits + gumbel_noise(logits)) / temperature, dim=-1)


def gumbel_softmax_st(logits, temperature=1.0):
    """Straight-through Gumbel-softmax: the forward value is a one-hot sample of
    softmax(logits), the gradient is that of the soft sample softmax((logits + g) / temperature)."""
    soft = gumbel_softmax(logits, temperature)
    hard = torch.nn.functional.one_hot(soft.argmax(dim=-1), logits.shape[-1]).to(soft.dtype)
    return hard - soft.detach() + soft


# --- policy-gradient learners ----------------------------------------------------------------
def masked_mean(x, mask):
    """sum(x * mask) / sum(mask), mask broadcast to x; 0 when the mask is empty."""
    mask = mask.expand_as(x)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def masked_mean_std(x, mask):
    """Mean and population std of the entries of x where mask is 1."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return mean, var.sqrt()


def nstep_returns(rewards, terminated, mask, values, gamma, n):
    """n-step returns [B, T, n_cols]: for each valid t, with e the first index after t where the
    window of n transitions or the episode ends,

        G[t] = sum_{k=t}^{e-1} gamma^(k-t) r[k]  +  gamma^(e-t) (1 - d[e-1]) V[e]

    rewards [B, T, n_cols]; terminated, mask [B, T, 1 or n_cols]; values [B, T+1, n_cols].
    A loop over the n offsets (not over batch or time): each adds one shifted term."""
    T = rewards.shape[1]
    m = mask.expand_as(rewards)
    d = terminated.expand_as(rewards)
    pad = lambda x: torch.cat([x, x.new_zeros(x.shape[0], n + 1, *x.shape[2:])], dim=1)  # noqa: E731
    r, mp, dp, vp = pad(rewards * m), pad(m), pad(d), pad(values[:, 1:])
    returns = torch.zeros_like(rewards)
    for j in range(n):  # transition t+j of the window
        returns = returns + gamma**j * r[:, j : j + T]
        # the window ends after transition t+j: it was valid, and it is the n-th or the last one
        ends = mp[:, j : j + T] * (1.0 if j == n - 1 else 1 - mp[:, j + 1 : j + 1 + T])
        returns = returns + gamma ** (j + 1) * ends * (1 - dp[:, j : j + T]) * vp[:, j : j + T]
    return returns * m


def gae(rewards, terminated, mask, values, next_values, gamma, lam):
    """GAE(lambda) advantages and lambda-returns [B, T, n_cols].

    delta[t] = r[t] + gamma (1 - d[t]) Vb[t+1] - V[t], masked; A[t] = sum_k (gamma lam)^(k-t)
    delta[k] along the episode (one matrix product over time); G = A + V. values: V [B, T, n]
    (the critic at step t); next_values: Vb [B, T+1, n] (the bootstrap source)."""
    T = rewards.shape[1]
    m = mask.expand_as(rewards)
    delta = (rewards + gamma * (1 - terminated) * next_values[:, 1:] - values) * m
    t = torch.arange(T, device=rewards.device)
    offset = t[None, :] - t[:, None]  # k - t
    c = gamma * lam
    weights = torch.where(
        offset >= 0, (c ** offset.clamp(min=0).to(delta.dtype)), torch.zeros((), device=delta.device)
    )
    advantages = torch.einsum("tk,bkn->btn", weights, delta) * m
    return advantages, (advantages + values) * m


def huber(e, delta):
    """0.5 e^2 where |e| <= delta, delta (|e| - delta / 2) beyond."""
    a = e.abs()
    return torch.where(a <= delta, 0.5 * e**2, delta * (a - 0.5 * delta))


def ppo_clip_objective(logp, logp_old, advantages, eps):
    """Per-entry clipped surrogate min(rho A, clip(rho, 1 - eps, 1 + eps) A) and the ratio rho."""
    ratio = torch.exp(logp - logp_old)
    return torch.min(ratio * advantages, ratio.clamp(1 - eps, 1 + eps) * advantages), ratio


class ValueNorm:
    """Statistics of value targets: the critic learns normalise(G), values are denormalised
    wherever they enter a return or an advantage.

    ema (MAPPO): scalar debiased moving averages of mean and mean square, rate beta, one update
    per call, variance floored at 1e-2. running (EPyMARL's standardise_returns): per-agent
    (column) running mean and variance of every target seen (RunningMeanStd per column)."""

    def __init__(self, mode, n_cols, beta=0.99999, device="cpu"):
        self.mode = mode
        self.beta = beta
        if mode == "running":
            self.rms = RunningMeanStd(shape=(n_cols,), device=device, unbiased=True)
            return
        zero = lambda: torch.zeros((), dtype=torch.float64, device=device)  # noqa: E731
        self.mean, self.sq, self.weight = zero(), zero(), zero()  # E[x], E[x^2], debiasing weight

    def update(self, x, mask):
        """Absorb the entries of x [..., n_cols] where mask is 1."""
        if self.mode == "running":
            self.rms.update(x, mask)
            return
        x = x.double()
        mask = mask.double().expand_as(x)
        count = mask.sum().clamp(min=1.0)
        b = self.beta
        self.mean = b * self.mean + (1 - b) * (x * mask).sum() / count
        self.sq = b * self.sq + (1 - b) * (x**2 * mask).sum() / count
        self.weight = b * self.weight + (1 - b)

    def stats(self):
        """-> mean, std used for (de)normalising."""
        if self.mode == "running":
            return self.rms.mean, self.rms.var.clamp(min=1e-8).sqrt()
        w = self.weight.clamp(min=1e-5)
        mean, sq = self.mean / w, self.sq / w
        return mean, (sq - mean**2).clamp(min=1e-2).sqrt()

    def normalise(self, x):
        mean, std = self.stats()
        return ((x - mean) / std).to(x.dtype)

    def denormalise(self, y):
        mean, std = self.stats()
        return (y * std + mean).to(y.dtype)

    def state_dict(self):
        if self.mode == "running":
            return self.rms.state_dict()
        return {"mean": self.mean, "sq": self.sq, "weight": self.weight}

    def load_state_dict(self, state):
        if self.mode == "running":
            self.rms.load_state_dict(state)
            return
        for k in ("mean", "sq", "weight"):
            setattr(self, k, state[k].to(self.mean.device))
