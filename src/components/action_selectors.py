"""Exploration: how a controller turns its network outputs into the actions it plays.

Every selector is built as Selector(args, form), where form is the run's action form
(components/action_forms.py), and offers
    select_action(outputs, avail, t_env, test_mode=False, bs=slice(None)) -> actions
    start_episode(batch_size, n_agents, device)   (a new batch of episodes begins)
"""

import numpy as np
import torch

from components.schedules import LinearSchedule
from utils.registry import Registry
from utils.rl_utils import gumbel_noise

REGISTRY = Registry("action_selector")


class Selector:
    def __init__(self, args, form=None):
        self.args = args
        self.form = form

    def start_episode(self, batch_size, n_agents, device):
        pass


def greedy_np(q, avail):
    """The best available action per agent: [..., A] values and availability -> [...]."""
    return np.where(avail == 0, -np.inf, q).argmax(axis=-1)


def uniform_available_np(noise, avail):
    """A uniform choice among the available actions from uniform noise in [0, 1), [..., A]."""
    return ((noise + 1.0) * avail).argmax(axis=-1)


@REGISTRY.register("epsilon_greedy")
class EpsilonGreedyActionSelector(Selector):
    """With probability eps an agent takes a uniformly random available action, else the argmax.

    Selection runs in NumPy on the CPU: the env needs the actions there anyway, and for a few
    agents NumPy's per-call cost is a fraction of torch's. Random draws use numpy.random,
    which the run seeds. Q-values on a GPU are selected there with the same rule and torch's
    generator, so that acting for an env on the GPU (VMAS) reads nothing back to the host.
    """

    def __init__(self, args, form=None):
        super().__init__(args, form)
        self.schedule = LinearSchedule(args.epsilon_start, args.epsilon_finish, args.epsilon_anneal_time)
        self.evaluation_epsilon = args.evaluation_epsilon
        self.epsilon = self.schedule.eval(0)

    def select_action(self, agent_inputs, avail_actions, t_env, test_mode=False, bs=None):
        # agent_inputs: [B, N, A] Q-values; avail_actions: [B, N, A] -> actions [B, N] (int64)
        self.epsilon = self.evaluation_epsilon if test_mode else self.schedule.eval(t_env)
        if agent_inputs.device.type != "cpu":
            return self._select_on_device(agent_inputs, avail_actions)
        q = agent_inputs.detach().cpu().numpy()
        avail = avail_actions.cpu().numpy()
        actions = greedy_np(q, avail)
        if self.epsilon > 0:
            # One draw per agent for the coin and one per action for a uniform choice among
            # the available ones (argmax of noise in [1, 2) on them, 0 elsewhere).
            r = np.random.random_sample(avail.shape[:-1] + (avail.shape[-1] + 1,))
            random_actions = uniform_available_np(r[..., :-1], avail)
            actions = np.where(r[..., -1] < self.epsilon, random_actions, actions)
        return torch.from_numpy(actions).to(agent_inputs.device)

    def _select_on_device(self, q, avail):
        actions = q.detach().masked_fill(avail == 0, -float("inf")).argmax(dim=-1)
        if self.epsilon > 0:
            r = torch.rand((*avail.shape[:-1], avail.shape[-1] + 1), device=q.device)
            random_actions = ((r[..., :-1] + 1.0) * avail).argmax(dim=-1)
            actions = torch.where(r[..., -1] < self.epsilon, random_actions, actions)
        return actions


@REGISTRY.register("gumbel")
class GumbelSampleSelector(Selector):
    """Discrete actors: the action is a sample of softmax(logits) (Gumbel-max) in training; the
    argmax in tests, or a sample too with test_greedy=False (as EPyMARL)."""

    def select_action(self, outputs, avail, t_env, test_mode=False, bs=None):
        logits = outputs.masked_fill(avail == 0, -float("inf"))
        if not test_mode or not self.args.test_greedy:
            logits = logits + gumbel_noise(logits)
        return logits.argmax(dim=-1)


@REGISTRY.register("soft_gumbel")
class SoftGumbelSelector(Selector):
    """The paper's MPE actor: soft Gumbel-softmax samples in training, softmax(logits) in tests."""

    def select_action(self, outputs, avail, t_env, test_mode=False, bs=None):
        return self.form.policy_actions(outputs, avail, sample=not test_mode)


@REGISTRY.register("policy_sample")
class PolicySampleSelector(Selector):
    """Stochastic actors (SAC's squashed Gaussian): a sample of the policy in training, its
    deterministic action (tanh of the mean) in tests."""

    def select_action(self, outputs, avail, t_env, test_mode=False, bs=None):
        if test_mode:
            return self.form.greedy(outputs, avail)
        return self.form.sample(outputs, avail)[0]


@REGISTRY.register("gaussian")
class GaussianNoiseSelector(Selector):
    """Bounded continuous actors: the deterministic action plus noise of act_noise (annealed)
    half ranges, clipped to the bounds; uniform random actions for the first start_steps env
    steps; the deterministic action in tests."""

    def __init__(self, args, form=None):
        super().__init__(args, form)
        self.scale = LinearSchedule(args.act_noise_start, args.act_noise_finish, args.act_noise_anneal_time)

    def select_action(self, outputs, avail, t_env, test_mode=False, bs=slice(None)):
        if test_mode:
            return self.form.greedy(outputs, avail)
        low, high = self.form.bounds(outputs)
        if t_env < self.args.start_steps:
            actions = low + torch.rand_like(outputs) * (high - low)
        else:
            scale = self.scale.eval(t_env) * (high - low) / 2
            noisy = self.form.greedy(outputs, avail) + scale * self.noise(outputs, bs, t_env)
            actions = torch.minimum(torch.maximum(noisy, low), high)
        return actions * avail  # padded action dimensions stay 0

    def noise(self, like, bs, t_env):
        return torch.randn_like(like)


@REGISTRY.register("ornstein_uhlenbeck")
class OrnsteinUhlenbeckSelector(GaussianNoiseSelector):
    """As gaussian, with temporally correlated noise: an OU process per agent and action
    dimension, restarted at 0 each episode, x <- x - theta x + sigma xi (it moves an agent
    consistently for several steps, so exploration covers more ground); off after
    ou_stop_episode episodes' steps."""

    def __init__(self, args, form=None):
        super().__init__(args, form)
        self.state = None  # [batch, N, A]
        self.stop = None if args.ou_stop_episode is None else args.ou_stop_episode * args.episode_limit

    def start_episode(self, batch_size, n_agents, device):
        self.state = torch.zeros(batch_size, n_agents, len(self.args.action_low), device=device)

    def noise(self, like, bs, t_env):
        if self.stop is not None and t_env >= self.stop:
            return torch.zeros_like(like)
        x = self.state[bs]  # the rows of the episodes being played
        x = x - self.args.ou_theta * x + self.args.ou_sigma * torch.randn_like(like)
        self.state[bs] = x
        return x
