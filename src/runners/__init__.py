from utils.registry import Registry

from .episode_runner import EpisodeRunner
from .parallel_runner import ParallelRunner

REGISTRY = Registry("runner", {"episode": EpisodeRunner, "parallel": ParallelRunner})
