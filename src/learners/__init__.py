from utils.registry import Registry

from .maddpg_learner import MADDPGLearner
from .q_divide_learner import QDivideLearner
from .q_learner import QLearner

REGISTRY = Registry(
    "learner", {"q_learner": QLearner, "maddpg_learner": MADDPGLearner, "q_divide_learner": QDivideLearner}
)
