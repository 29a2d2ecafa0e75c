from utils.registry import Registry

from .q_learner import QLearner

REGISTRY = Registry("learner", {"q_learner": QLearner})
