"""bench/agent_speed.py: one config measured in-process, on the device asked for."""

import pytest
import torch

from helpers import load_bench
from utils.errors import ConfigError


def load():
    return load_bench("agent_speed")


def test_measure_counts_steps_after_the_buffer_filled_and_names_the_device():
    row = load().measure("differ_qmix", "skirmish", "3m", 40, ["batch_size=2", "buffer_size=4"], "cpu")
    assert row["device"] == "cpu" and row["agent"] == "rnn"
    assert row["env_steps"] >= 40 and row["updates"] >= 1
    assert row["env_steps_per_s"] > 0 and row["update_ms"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_measure_on_cuda_without_a_gpu_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="cpu, auto"):
        load().measure("differ_qmix", "skirmish", "3m", 40, ["batch_size=2"], "cuda")
