from utils.registry import Registry

from .episode_runner import EpisodeRunner
from .parallel_runner import ParallelRunner
from .vector_runner import VectorRunner

REGISTRY = Registry("runner", {"episode": EpisodeRunner, "parallel": ParallelRunner, "vector": VectorRunner})
