"""bench/agent_speed.py: one config measured in-process, on the device asked for."""

import importlib.util
import os

import pytest
import torch

from utils.errors import ConfigError

HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    path = os.path.join(os.path.dirname(HERE), "bench", "agent_speed.py")
    spec = importlib.util.spec_from_file_location("agent_speed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measure_counts_steps_after_the_buffer_filled_and_names_the_device():
    row = load().measure("differ_qmix", "skirmish", "3m", 40, ["batch_size=2", "buffer_size=4"], "cpu")
    assert row["device"] == "cpu" and row["agent"] == "rnn"
    assert row["env_steps"] >= 40 and row["updates"] >= 1
    assert row["env_steps_per_s"] > 0 and row["update_ms"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_measure_on_cuda_without_a_gpu_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="cpu, auto"):
        load().measure("differ_qmix", "skirmish", "3m", 40, ["batch_size=2"], "cuda")
