"""Where a training run's time goes (issue 100): one real run of src/main.py in this process with
timers around its parts; prints a table of exclusive seconds, per episode and per update, then one
JSON line.

    OMP_NUM_THREADS=1 python bench/profile_run.py --config=qmix_pymarl --env-config=skirmish with \\
        env_args.map_name=2s3z t_max=30000 torch_threads=1 save_model=False

    python bench/profile_run.py --src /tmp/old/src -- ARGS   # the same run on another checkout

Parts (each timer's time excludes the timers it encloses, so the rows add up to the wall time):
training episodes and test episodes, split into acting (the controller's select_actions), env
step, env observe (obs, state and available actions read for the batch), episode-batch writes and
the runner's own Python; buffer insert; buffer sample (drawing a batch, moving it to the device);
the learner's update split into backward, gradient clipping, optimiser step and the rest (its
forward passes, targets and losses); what is left (logging, checkpoints, the schedule) is "run
loop". Only the episode runner's env time is seen: with the parallel runner the envs step in
worker processes and their time shows as the runner's own (waiting on the pipes).
"""

import argparse
import json
import os
import runpy
import sys
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Timers:
    """Exclusive time per (group, part): a part's time excludes the parts it encloses."""

    def __init__(self):
        self.seconds = defaultdict(float)
        self.calls = defaultdict(int)
        self.stack = []  # [label, start, time taken by enclosed parts]

    def wrap(self, fn, label):
        timers = self

        def timed(*args, **kwargs):
            key = label(args, kwargs) if callable(label) else label
            group = timers.stack[0][0][0] if timers.stack else key[0]
            key = (group or "run loop", key[1])
            timers.stack.append([key, time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                k, start, inner = timers.stack.pop()
                took = time.perf_counter() - start
                timers.seconds[k] += took - inner
                timers.calls[k] += 1
                if timers.stack:
                    timers.stack[-1][2] += took

        timed.__wrapped__ = fn
        return timed


def patch(timers):
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    import run as run_module
    from components.episode_buffer import EpisodeBatch, ReplayBuffer
    from controllers import REGISTRY as mac_REGISTRY
    from learners import REGISTRY as le_REGISTRY
    from runners import REGISTRY as r_REGISTRY
    from runners import base as runner_base

    def own(cls, name):
        return name in vars(cls)

    for cls in set(r_REGISTRY.values()):
        if own(cls, "run"):
            cls.run = timers.wrap(
                cls.run,
                lambda a, kw: (
                    "test episodes"
                    if kw.get("test_mode", a[1] if len(a) > 1 else False)
                    else "training episodes",
                    "runner's own Python",
                ),
            )
    for cls in set(mac_REGISTRY.values()):
        for name in ("select_actions", "env_actions"):
            if own(cls, name):
                setattr(cls, name, timers.wrap(getattr(cls, name), (None, "acting")))
    observe = runner_base.env_data
    timed_observe = timers.wrap(observe, (None, "env observe"))
    for mod in list(sys.modules.values()):
        if mod.__name__.startswith("runners") and getattr(mod, "env_data", None) is observe:
            mod.env_data = timed_observe
    EpisodeBatch.update = timers.wrap(EpisodeBatch.update, (None, "episode-batch writes"))
    ReplayBuffer.insert_episode_batch = timers.wrap(ReplayBuffer.insert_episode_batch, ("buffer", "insert"))
    run_module.draw_batch = timers.wrap(run_module.draw_batch, ("buffer", "sample and to device"))
    for cls in set(le_REGISTRY.values()):
        for name in ("train", "train_aux"):
            if own(cls, name):
                setattr(cls, name, timers.wrap(getattr(cls, name), ("learner", "forward, targets, loss")))
    torch.autograd.backward = timers.wrap(torch.autograd.backward, (None, "backward"))
    torch.nn.utils.clip_grad_norm_ = timers.wrap(torch.nn.utils.clip_grad_norm_, (None, "gradient clipping"))
    starts = {}
    register_optimizer_step_pre_hook(lambda opt, a, kw: starts.__setitem__(id(opt), time.perf_counter()))

    def after_step(opt, a, kw):
        took = time.perf_counter() - starts.pop(id(opt))
        group = timers.stack[0][0][0] if timers.stack else "learner"
        timers.seconds[(group, "optimiser step")] += took
        timers.calls[(group, "optimiser step")] += 1
        if timers.stack:
            timers.stack[-1][2] += took

    register_optimizer_step_post_hook(after_step)


def env_patch(timers):
    from envs import REGISTRY as env_REGISTRY

    for env in ("skirmish", "skirmish_v2", "mpe"):  # the envs that run in this process here
        cls = env_REGISTRY[env].resolve()
        for name, part in (("step", "env step"), ("reset", "env reset")):
            if not hasattr(getattr(cls, name), "__wrapped__"):
                setattr(cls, name, timers.wrap(getattr(cls, name), (None, part)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=os.path.join(ROOT, "src"), help="the src folder to profile")
    opts, rest = parser.parse_known_args()
    if rest and rest[0] == "--":
        rest = rest[1:]
    src = os.path.abspath(opts.src)
    sys.path.insert(0, src)
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

    timers = Timers()
    patch(timers)
    env_patch(timers)
    sys.argv = [os.path.join(src, "main.py"), *rest]
    started = time.perf_counter()
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise
    wall = time.perf_counter() - started

    episodes = timers.calls[("training episodes", "runner's own Python")]
    updates = sum(n for (g, p), n in timers.calls.items() if g == "learner" and p == "forward, targets, loss")
    accounted = sum(timers.seconds.values())
    timers.seconds[("run loop", "logging, checkpoints, setup, the rest")] = wall - accounted
    rows = sorted(timers.seconds.items(), key=lambda kv: (kv[0][0], -kv[1]))
    print(f"\nprofile of {' '.join(rest)}  ({src})")
    print(f"wall {wall:.1f} s; {episodes} training episodes; {updates} updates")
    print(f"{'group':<18} {'part':<38} {'s':>8} {'share':>6} {'ms/episode':>10} {'ms/update':>9}")
    for (group, part), s in rows:
        per_ep = f"{1e3 * s / episodes:.2f}" if episodes and group == "training episodes" else ""
        per_up = f"{1e3 * s / updates:.2f}" if updates and group in ("learner", "buffer") else ""
        print(f"{group:<18} {part:<38} {s:8.2f} {s / wall:6.1%} {per_ep:>10} {per_up:>9}")
    print(
        json.dumps(
            {
                "args": rest,
                "src": src,
                "wall_s": round(wall, 2),
                "training_episodes": episodes,
                "updates": updates,
                "seconds": {f"{g}: {p}": round(s, 3) for (g, p), s in rows},
            }
        )
    )


if __name__ == "__main__":
    main()
