"""W&B logging in offline mode: the run's file holds the Sacred metrics against t_env, its config,
name and group, and a failed run is marked failed."""

import glob
import importlib.util
import json
import os
import struct
import time

import pytest

from config import load_config
from helpers import read, run_main
from utils.errors import ConfigError


def wandb_records(path, block=32768):
    """Records of a W&B run file (.wandb): a LevelDB-style log of protobuf Records."""
    from wandb.proto import wandb_internal_pb2 as pb

    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B"
    pos, buf = 7, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # block trailer
            pos += left
            continue
        _crc, n, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if n == 0 and kind == 0:  # zero padding at the end of a block
            pos += left
            continue
        buf += data[pos + 7 : pos + 7 + n]
        pos += 7 + n
        if kind in (1, 4):  # a whole record, or the last fragment of one
            record = pb.Record()
            record.ParseFromString(buf)
            buf = b""
            yield record


def read_wandb(results, timeout=30):
    """W&B's service process may still be writing the file's last block (the exit record) when
    finish() has returned: on a busy machine CI once read it before. Wait for that record."""
    deadline = time.time() + timeout
    while True:
        try:
            rows, run, exit_code = read_wandb_once(results)
        except Exception:  # a block still being written
            if time.time() > deadline:
                raise
            exit_code = None
        else:
            if exit_code is not None or time.time() > deadline:
                return rows, run, exit_code
        time.sleep(0.2)


def read_wandb_once(results):
    (path,) = glob.glob(os.path.join(str(results), "wandb", "offline-run-*", "run-*.wandb"))
    rows, run, exit_code = [], None, None
    for r in wandb_records(path):
        kind = r.WhichOneof("record_type")
        if kind == "history":
            rows.append({"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in r.history.item})
        elif kind == "run":
            run = r.run
        elif kind == "exit":
            exit_code = r.exit.exit_code
    return rows, run, exit_code


def test_offline_run_holds_the_sacred_metrics(tmp_path):
    extra = ["use_wandb=True", "wandb_mode=offline", "experiment=wb", "agent=mlp"]
    assert run_main(tmp_path, "iql", extra=extra) == 0
    rows, run, exit_code = read_wandb(tmp_path)
    assert exit_code == 0
    (record,) = glob.glob(os.path.join(str(tmp_path), "sacred", "wb", "mpe", "*", "iql", "[0-9]*"))
    metrics = read(record, "metrics.json")
    for key in ("test_return_mean", "loss", "epsilon"):
        assert [row["t_env"] for row in rows if key in row] == metrics[key]["steps"], key
        assert [row[key] for row in rows if key in row] == pytest.approx(metrics[key]["values"]), key
    assert run.run_group == "wb" and run.display_name.startswith("iql_wb_mpe_simple_spread_v3_seed1_")
    config = {u.key: json.loads(u.value_json) for u in run.config.update}
    assert config["name"] == "iql" and config["agent"] == "mlp" and config["env_args"]["scenario"]


def test_failed_run_is_marked_failed(tmp_path, mock_env):
    with pytest.raises(RuntimeError, match="mock env failure"):
        run_main(tmp_path, "qmix", extra=["env=mock", "env_args.raise_at_t=260", "use_wandb=True"])
    rows, _, exit_code = read_wandb(tmp_path)
    assert exit_code == 1 and any("return_mean" in row for row in rows)


def test_missing_wandb_is_named(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(ConfigError, match="use_wandb=True needs the wandb package: pip install wandb"):
        load_config(["with", "use_wandb=True"])
