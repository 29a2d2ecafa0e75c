"""ICES's world model (Li et al., ICML 2024): a conditional VAE of the state change s' - s given
the state and the joint action, in plain PyTorch.

Two branches share one decoder p(change | z): `global` conditions on every agent's action,
`local` on the joint action with one agent's action hidden (action code -1, embedded as zeros).
Each branch has a baseline predictor (a deterministic guess of the change, trained by squared
error), a prior p(z | s, a, guess) and a recognition network q(z | s, a, change). The intrinsic
reward compares the two branches' priors: how much hiding agent i's action changes what the
model expects to happen.

Every scale is clamped to at least 0.01 and the predicted means pass through tanh, as in the
authors' code (their pyro CVAE); the ELBO is estimated from one reparameterised sample of z, as
pyro's Trace_ELBO does."""

import math

import torch
import torch.nn as nn

MIN_SCALE = 0.01
HIDDEN = -1  # the action code of an agent whose action the local branch does not see


def mlp(n_in, hidden, n_out):
    return nn.Sequential(
        nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_out)
    )


class ActionCode(nn.Module):
    """Joint action [R, N] (ints, HIDDEN for a hidden one) -> [R, N * embed]."""

    def __init__(self, n_actions, embed_dim):
        super().__init__()
        self.embedding = nn.Embedding(n_actions + 1, embed_dim, padding_idx=0)

    def forward(self, actions):
        return self.embedding(actions + 1).flatten(1)


class Predictor(nn.Module):
    """The baseline: tanh(MLP(s, a)), a deterministic guess of the change."""

    def __init__(self, state_dim, n_agents, n_actions, hidden, embed_dim):
        super().__init__()
        self.code = ActionCode(n_actions, embed_dim)
        self.mlp = mlp(state_dim + n_agents * embed_dim, hidden, state_dim)

    def forward(self, s, a):
        return torch.tanh(self.mlp(torch.cat([s, self.code(a)], dim=-1)))


class Encoder(nn.Module):
    """(s, a, y) -> the mean and scale of a diagonal normal over z."""

    def __init__(self, state_dim, n_agents, n_actions, hidden, embed_dim, z_dim):
        super().__init__()
        self.code = ActionCode(n_actions, embed_dim)
        self.mlp = mlp(2 * state_dim + n_agents * embed_dim, hidden, 2 * z_dim)

    def forward(self, s, a, y):
        mu, log_scale = self.mlp(torch.cat([s, self.code(a), y], dim=-1)).chunk(2, dim=-1)
        return mu, log_scale.exp().clamp(min=MIN_SCALE)


class Decoder(nn.Module):
    """z -> the mean (tanh) and scale of a diagonal normal over the change."""

    def __init__(self, state_dim, hidden, z_dim):
        super().__init__()
        self.mlp = mlp(z_dim, hidden, 2 * state_dim)

    def forward(self, z):
        mu, log_scale = self.mlp(z).chunk(2, dim=-1)
        return torch.tanh(mu), log_scale.exp().clamp(min=MIN_SCALE)


class Branch(nn.Module):
    def __init__(self, *dims, z_dim):
        super().__init__()
        self.baseline = Predictor(*dims)
        self.prior = Encoder(*dims, z_dim)
        self.recognition = Encoder(*dims, z_dim)


def normal_log_prob(x, mu, scale):
    """Summed over the last dimension."""
    return (-((x - mu) ** 2) / (2 * scale**2) - scale.log() - 0.5 * math.log(2 * math.pi)).sum(-1)


class StateChangeModel(nn.Module):
    BRANCHES = ("global", "local")

    def __init__(self, state_dim, n_agents, n_actions, hidden_dim=64, embed_dim=4, z_dim=16):
        super().__init__()
        dims = (state_dim, n_agents, n_actions, hidden_dim, embed_dim)
        self.branches = nn.ModuleDict({name: Branch(*dims, z_dim=z_dim) for name in self.BRANCHES})
        self.decoder = Decoder(state_dim, hidden_dim, z_dim)

    def elbo_parameters(self, branch):
        """What the branch's ELBO trains: its prior and recognition networks and the decoder."""
        b = self.branches[branch]
        return [*b.prior.parameters(), *b.recognition.parameters(), *self.decoder.parameters()]

    def prior(self, branch, s, a):
        """p(z | s, a, baseline guess): (mean, scale) [R, z]; the guess carries no gradient."""
        b = self.branches[branch]
        with torch.no_grad():
            guess = b.baseline(s, a)
        return b.prior(s, a, guess)

    def baseline_errors(self, branch, s, a, change):
        """Squared errors of the baseline's guess, summed over the state: [R]."""
        return ((self.branches[branch].baseline(s, a) - change) ** 2).sum(-1)

    def negative_elbo(self, branch, s, a, change):
        """-ELBO of each row [R]: -log p(change | z) + log q(z) - log p(z), z ~ q(z | s, a, change)."""
        prior_mu, prior_scale = self.prior(branch, s, a)
        mu, scale = self.branches[branch].recognition(s, a, change)
        z = mu + scale * torch.randn_like(mu)
        y_mu, y_scale = self.decoder(z)
        return (
            -normal_log_prob(change, y_mu, y_scale)
            + normal_log_prob(z, mu, scale)
            - normal_log_prob(z, prior_mu, prior_scale)
        )


def normal_divergence(p_mu, p_scale, q_mu, q_scale, log2=False):
    """KL(p || q) of diagonal normals, averaged over the last dimension. log2=True: the scales'
    log ratio in bits while the rest stays in nats, as the authors' code writes it (then it is no
    divergence: it can be negative)."""
    log_ratio = q_scale.log2() - p_scale.log2() if log2 else q_scale.log() - p_scale.log()
    return (log_ratio + (p_scale**2 + (p_mu - q_mu) ** 2) / (2 * q_scale**2) - 0.5).mean(-1)


def hide_each(actions):
    """[R, N] -> [R, N, N]: row i is the joint action with agent i's hidden."""
    n = actions.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=actions.device)
    return torch.where(
        eye, torch.full_like(actions[:, None, :].expand(-1, n, -1), HIDDEN), actions[:, None, :]
    )


def hide_one_at_random(actions):
    """[R, N] -> [R, N] with one agent per row, drawn uniformly, hidden."""
    r, n = actions.shape
    who = torch.randint(n, (r, 1), device=actions.device)
    return actions.scatter(1, who, HIDDEN)
