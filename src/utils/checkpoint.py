"""Checkpoints: <root>/<t_env>/{learner.th, meta.json}, written atomically."""
import json
import os
import shutil
import tempfile

import torch

from utils.errors import ConfigError


def save_checkpoint(root, t_env, learner, meta):
    os.makedirs(root, exist_ok=True)
    final = os.path.join(root, str(t_env))
    tmp = tempfile.mkdtemp(prefix=f".{t_env}.", dir=root)
    torch.save(learner.state_dict(), os.path.join(tmp, "learner.th"))
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(dict(meta, t_env=t_env), f, indent=2)
    if os.path.exists(final):
        shutil.rmtree(final)
    os.rename(tmp, final)  # the step folder appears complete or not at all
    return final


def find_checkpoint(path, load_step=0):
    """The step folder under `path` (itself, or the step closest to load_step; 0 = the latest)."""
    if os.path.isfile(os.path.join(path, "learner.th")):
        return path
    steps = [int(d) for d in os.listdir(path)
             if d.isdigit() and os.path.isfile(os.path.join(path, d, "learner.th"))]
    if not steps:
        raise ConfigError(f"checkpoint_path={path!r} holds no saved models (no <t_env>/learner.th)")
    step = max(steps) if load_step == 0 else min(steps, key=lambda s: abs(s - load_step))
    return os.path.join(path, str(step))


def load_checkpoint(folder, learner, device):
    state = torch.load(os.path.join(folder, "learner.th"), map_location=device, weights_only=True)
    try:
        learner.load_state_dict(state)
    except (RuntimeError, KeyError) as e:  # other networks: a changed agent, hidden_dim, policy_ensemble...
        first = str(e).strip().splitlines()[0]
        raise ConfigError(f"checkpoint {folder!r} does not fit this run's networks; load it with the "
                          f"settings it was saved with (see its run's config.json): {first}") from None
    with open(os.path.join(folder, "meta.json")) as f:
        return json.load(f)
