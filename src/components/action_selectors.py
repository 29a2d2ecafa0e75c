import torch
from torch.distributions import Categorical

from components.schedules import LinearSchedule
from utils.registry import Registry

REGISTRY = Registry("action_selector")


@REGISTRY.register("epsilon_greedy")
class EpsilonGreedyActionSelector:
    """With probability eps an agent takes a uniformly random available action, else the argmax."""

    def __init__(self, args):
        self.schedule = LinearSchedule(args.epsilon_start, args.epsilon_finish,
                                       args.epsilon_anneal_time)
        self.evaluation_epsilon = args.evaluation_epsilon
        self.epsilon = self.schedule.eval(0)

    def select_action(self, agent_inputs, avail_actions, t_env, test_mode=False):
        # agent_inputs: [B, N, A] Q-values; avail_actions: [B, N, A]
        self.epsilon = self.evaluation_epsilon if test_mode else self.schedule.eval(t_env)
        masked_q = agent_inputs.masked_fill(avail_actions == 0, -float("inf"))
        greedy = masked_q.argmax(dim=-1)
        if self.epsilon <= 0:
            return greedy
        random_actions = Categorical(avail_actions.float()).sample()
        pick_random = torch.rand(greedy.shape, device=greedy.device) < self.epsilon
        return torch.where(pick_random, random_actions, greedy)
