from utils.registry import Registry

from .actor_critic_learner import ActorCriticLearner
from .coma_learner import COMALearner
from .ices import ICESLearner
from .maddpg_learner import MADDPGLearner
from .masac_learner import MASACLearner
from .ppo_learner import PPOLearner
from .q_divide_learner import QDivideLearner
from .q_learner import QLearner

REGISTRY = Registry(
    "learner",
    {
        "q_learner": QLearner,
        "maddpg_learner": MADDPGLearner,
        "masac_learner": MASACLearner,
        "q_divide_learner": QDivideLearner,
        "actor_critic_learner": ActorCriticLearner,
        "ppo_learner": PPOLearner,
        "coma_learner": COMALearner,
        "ices_learner": ICESLearner,
    },
)
