"""Checkpoints: <root>/<t_env>/{learner.th, meta.json}, written atomically."""

import io
import json
import os
import re
import shutil
import tempfile
import zipfile

import torch

from utils.errors import ConfigError
from utils.files import current_umask

PARTIAL = re.compile(r"^\.\d+\..+")  # a step folder being written (or left by a killed save)


def save_checkpoint(root, t_env, learner, meta):
    """Write <root>/<t_env>/ whole or not at all. Partial folders left by a killed earlier save
    are removed first; a failed save (a full disk) removes its own and raises OSError."""
    os.makedirs(root, exist_ok=True)
    for name in os.listdir(root):
        if PARTIAL.match(name):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    final = os.path.join(root, str(t_env))
    tmp = tempfile.mkdtemp(prefix=f".{t_env}.", dir=root)
    try:
        # Serialise in memory, then write plain bytes: a full disk gives OSError(ENOSPC) naming
        # the file, not torch's zip writer's "enforce fail ... unexpected pos".
        buf = io.BytesIO()
        torch.save(learner.state_dict(), buf)
        for name, data in (
            ("learner.th", buf.getbuffer()),
            ("meta.json", json.dumps(dict(meta, t_env=t_env), indent=2).encode()),
        ):
            path = os.path.join(tmp, name)
            try:
                with open(path, "wb") as f:
                    f.write(data)
            except OSError as e:
                e.filename = e.filename or path
                raise
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes it 0700
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(tmp, final)  # the step folder appears complete or not at all
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def find_checkpoint(path, load_step=0):
    """The step folder under `path` (itself, or the step closest to load_step; 0 = the latest)."""
    if os.path.isfile(os.path.join(path, "learner.th")):
        return path
    steps = [
        int(d)
        for d in os.listdir(path)
        if d.isdigit() and os.path.isfile(os.path.join(path, d, "learner.th"))
    ]
    if not steps:
        raise ConfigError(f"checkpoint_path={path!r} holds no saved models (no <t_env>/learner.th)")
    step = max(steps) if load_step == 0 else min(steps, key=lambda s: abs(s - load_step))
    return os.path.join(path, str(step))


def check_checkpoint(path, load_step=0):
    """The step folder to load, after checking that its files can be read: refuses a missing
    meta.json and a truncated or foreign learner.th before the run starts."""
    folder = find_checkpoint(path, load_step)
    meta_path = os.path.join(folder, "meta.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise ConfigError(
            f"checkpoint {folder!r} has no meta.json; it was not written by a completed save"
        ) from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"checkpoint {meta_path!r} cannot be read: {e}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("t_env"), int):
        raise ConfigError(f"checkpoint {meta_path!r} does not hold a t_env")
    weights = os.path.join(folder, "learner.th")
    try:
        with zipfile.ZipFile(weights) as z:  # torch.save's format: a zip archive
            bad = z.testzip()
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise ConfigError(f"checkpoint {weights!r} is truncated or not a saved model: {e}") from None
    if bad is not None:
        raise ConfigError(f"checkpoint {weights!r} is corrupt (member {bad})")
    return folder


def load_checkpoint(folder, learner, device):
    try:
        state = torch.load(os.path.join(folder, "learner.th"), map_location=device, weights_only=True)
    except Exception as e:  # torch raises many types for damaged files
        first = (str(e).strip().splitlines() or [""])[0]
        raise ConfigError(f"checkpoint {folder!r}: learner.th cannot be loaded: {first}") from None
    try:
        learner.load_state_dict(state)
    except (RuntimeError, KeyError) as e:  # other networks: a changed agent, hidden_dim, policy_ensemble...
        first = str(e).strip().splitlines()[0]
        raise ConfigError(
            f"checkpoint {folder!r} does not fit this run's networks; load it with the "
            f"settings it was saved with (see its run's config.json): {first}"
        ) from None
    with open(os.path.join(folder, "meta.json")) as f:
        return json.load(f)
