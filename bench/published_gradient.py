"""What each sharing arm does to one update of the agent network, against plain DIFFER, on real
skirmish 2s3z batches: the cosine between the arm's agent-network gradient and differ_qmix's on
the same batch, from the same weights and the same random draws, and the ratio of their norms;
with the arm's row diagnostics where it has them. Prints one JSON line per arm.

    python bench/published_gradient.py [--episodes 200] [--warm-updates 100] [--batches 20]

The episodes come from a differ_qmix run on 2s3z trained for --warm-updates updates on them (so
its errors are not those of an untrained network); each arm then gets a copy of those weights.
"""

import argparse
import copy
import json
import os

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import torch

# name -> (command line, offset of the draws' seed): the second control is DIFFER with other PER
# draws, the spread that selection's own randomness gives
ARMS = {
    "differ_qmix (control: 1 and 1)": (["--config=differ_qmix"], 0),
    "differ_qmix, other PER draws": (["--config=differ_qmix"], 1000),
    "inspire_published": (["--config=inspire_published"], 0),
    "super_published": (["--config=super_published"], 0),
    "inspire_qmix joint_density": (["--config=inspire_qmix", "with", "share_rule=joint_density"], 0),
    "inspire_qmix": (["--config=inspire_qmix"], 0),
}
COMMON = ["env_args.map_name=2s3z", "seed=1", "t_max=1000000", "schedule_horizon=2050000"]


def make_args(argv):
    from types import SimpleNamespace

    from config import load_config

    if "with" not in argv:
        argv = [*argv, "with"]
    cfg = load_config([argv[0], "--env-config=skirmish", *argv[1:], *COMMON, "record_fields=[pos, visible]"])
    args = SimpleNamespace(**cfg)
    args.env_args = dict(cfg["env_args"])
    args.device, args.unique_token, args.record = "cpu", "bench", ""
    return args


def captured_gradient(learner, batch, t_env, seed):
    """The agent network's gradient of one update's loss (nothing is stepped for the agent)."""
    grads = {}

    def capture(optimiser, loss, params):
        grads["g"] = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])
        return torch.zeros(())

    learner.step = capture
    torch.manual_seed(seed)
    learner.log_stats_t = -(10**9)  # log every update: the row diagnostics
    learner.train(batch, t_env, 0)
    return grads["g"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--warm-updates", type=int, default=100)
    p.add_argument("--batches", type=int, default=20)
    a = p.parse_args(argv)
    from assembly import build
    from utils.logger import Logger, get_console_logger

    torch.set_num_threads(1)
    base_args = make_args(["--config=differ_qmix"])
    logger = Logger(get_console_logger())
    logger.console_logger.disabled = True
    parts = build(base_args, logger)
    runner, buffer, base = parts.runner, parts.buffer, parts.learner
    while buffer.episodes_in_buffer < a.episodes:
        buffer.insert_episode_batch(runner.run(test_mode=False))
    for _ in range(a.warm_updates):
        base.train(buffer.sample(32, runner.t_env), runner.t_env, 0)
    runner.close_env()
    t_env = 500000  # mid-run: the schedules' values there
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(a.batches):
        torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=g)))
        batches.append(buffer.sample(32, t_env))
    reference = []
    for i, batch in enumerate(batches):
        reference.append(captured_gradient(copy.deepcopy(base), batch, t_env, i))
    for name, (argv, offset) in ARMS.items():
        args = make_args(argv)
        arm = build(args, logger, env_info=parts.env_info, buffer=False).learner
        cos, ratio, stats = [], [], {}
        for i, batch in enumerate(batches):
            learner = copy.deepcopy(arm)
            learner.mac.load_state(base.mac)
            learner.target_mac.load_state(base.target_mac)
            learner.mixer.load_state_dict(base.mixer.state_dict())
            learner.target_mixer.load_state_dict(base.target_mixer.state_dict())
            learner.mixer_optimiser.load_state_dict(base.mixer_optimiser.state_dict())
            learner.logger.stats.clear()  # the copy's own logger
            grad = captured_gradient(learner, batch, t_env, i + offset)
            cos.append(torch.nn.functional.cosine_similarity(grad, reference[i], dim=0).item())
            ratio.append((grad.norm() / reference[i].norm()).item())
            for key, values in learner.logger.stats.items():
                if key.startswith("share_"):
                    stats.setdefault(key, []).append(values[-1][1])
        row = {
            "arm": name,
            "batches": len(batches),
            "cosine_mean": round(sum(cos) / len(cos), 4),
            "cosine_min": round(min(cos), 4),
            "norm_ratio_mean": round(sum(ratio) / len(ratio), 4),
            **{k: round(sum(v) / len(v), 5) for k, v in sorted(stats.items())},
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
