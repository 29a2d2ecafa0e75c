import numpy as np
import torch

from components.schedules import LinearSchedule
from utils.registry import Registry

REGISTRY = Registry("action_selector")


@REGISTRY.register("epsilon_greedy")
class EpsilonGreedyActionSelector:
    """With probability eps an agent takes a uniformly random available action, else the argmax.

    Selection runs in NumPy on the CPU: the env needs the actions there anyway, and for a few
    agents NumPy's per-call cost is a fraction of torch's. Random draws use numpy.random,
    which the run seeds.
    """

    def __init__(self, args):
        self.schedule = LinearSchedule(args.epsilon_start, args.epsilon_finish,
                                       args.epsilon_anneal_time)
        self.evaluation_epsilon = args.evaluation_epsilon
        self.epsilon = self.schedule.eval(0)

    def select_action(self, agent_inputs, avail_actions, t_env, test_mode=False):
        # agent_inputs: [B, N, A] Q-values; avail_actions: [B, N, A] -> actions [B, N] (int64)
        self.epsilon = self.evaluation_epsilon if test_mode else self.schedule.eval(t_env)
        q = agent_inputs.detach().cpu().numpy()
        avail = avail_actions.cpu().numpy()
        actions = np.where(avail == 0, -np.inf, q).argmax(axis=-1)
        if self.epsilon > 0:
            # One draw per agent for the coin and one per action for a uniform choice among
            # the available ones (argmax of noise in [1, 2) on them, 0 elsewhere).
            r = np.random.random_sample(avail.shape[:-1] + (avail.shape[-1] + 1,))
            random_actions = ((r[..., :-1] + 1.0) * avail).argmax(axis=-1)
            actions = np.where(r[..., -1] < self.epsilon, random_actions, actions)
        return torch.from_numpy(actions).to(agent_inputs.device)
