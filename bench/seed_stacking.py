"""What training K seeds as one batched computation could buy on this machine (issue 100): the
learner's and the actor's cost for K seeds done one after another against done at once.

    OMP_NUM_THREADS=1 python bench/seed_stacking.py [--seeds 5] [--steps 91] [--threads 1]

Stacked seeds have separate weights, so their matrix products are batched (bmm over K weight
sets); the ideal bound of that is one product over K times the rows with shared weights. Three
measurements, one JSON line each:
  matmul: a GRU step's product at QMIX's sizes (32 episodes x 5 agents, hidden 64, 3 gates):
          K products one after another, one bmm over K weight sets, one product of K x rows.
  update: a qmix_pymarl update (GRU agent) on a 2s3z-sized batch of 32 episodes, K times, against
          one update on 32 K episodes (shared weights: cheaper than or equal to stacking).
  acting: the controller's select_actions for one env, K times, against once for K envs.
"""

import argparse
import json
import os
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402


def per_call_s(fn, repeat, warm=3):
    for _ in range(warm):
        fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def build_parts(batch_episodes, steps, agent):
    from types import SimpleNamespace

    from assembly import build
    from config import load_config
    from utils.logger import Logger, get_console_logger

    cfg = load_config(["--config=qmix_pymarl", "--env-config=skirmish", "with", "seed=0", f"agent={agent}"])
    args = SimpleNamespace(**cfg)
    args.device, args.unique_token, args.t_max = "cpu", "bench", 2050000
    args.batch_size_run = batch_episodes
    info = dict(n_agents=5, n_actions=11, state_shape=120, obs_shape=80, episode_limit=steps)
    torch.manual_seed(0)
    return build(args, Logger(get_console_logger()), env_info=info, buffer=False)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=91, help="episode length of the update's batch")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--agent", default="rnn")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    k = a.seeds

    rows, hidden = 32 * 5, 64
    x, w = torch.randn(rows, hidden), torch.randn(hidden, 3 * hidden)
    xs, ws, x_all = (
        torch.randn(k, rows, hidden),
        torch.randn(k, hidden, 3 * hidden),
        torch.randn(k * rows, hidden),
    )
    one = per_call_s(lambda: x @ w, 400)
    line = {
        "measure": "matmul",
        "seeds": k,
        "threads": a.threads,
        "one_after_another_us": round(1e6 * k * one, 1),
        "bmm_us": round(1e6 * per_call_s(lambda: torch.bmm(xs, ws), 400), 1),
        "shared_weights_us": round(1e6 * per_call_s(lambda: x_all @ w, 400), 1),
    }
    print(json.dumps(line), flush=True)

    from update_time import make_batch

    small = make_batch(32, a.steps, 5, 80, 120, 11)
    big = make_batch(32 * k, a.steps, 5, 80, 120, 11)
    learner = build_parts(1, a.steps, a.agent).learner
    one = per_call_s(lambda: learner.train(small, 0, 0), 8)
    together = per_call_s(lambda: learner.train(big, 0, 0), 3)
    print(
        json.dumps(
            {
                "measure": "update",
                "seeds": k,
                "threads": a.threads,
                "agent": a.agent,
                "batch": f"32 episodes x {a.steps} steps x 5 agents",
                "one_after_another_ms": round(1e3 * k * one, 1),
                "one_batch_of_all_ms": round(1e3 * together, 1),
                "ratio": round(together / (k * one), 2),
            }
        ),
        flush=True,
    )

    def acting_s(n_envs, repeat=300):
        mac = build_parts(n_envs, a.steps, a.agent).mac
        batch = make_batch(n_envs, a.steps, 5, 80, 120, 11)
        mac.init_hidden(n_envs)
        step = [0]

        def act():
            with torch.no_grad():
                mac.select_actions(batch, t_ep=step[0] % a.steps, t_env=0)
            step[0] += 1

        return per_call_s(act, repeat)

    one, together = acting_s(1), acting_s(k)
    print(
        json.dumps(
            {
                "measure": "acting",
                "seeds": k,
                "threads": a.threads,
                "one_after_another_us": round(1e6 * k * one, 1),
                "one_call_for_all_us": round(1e6 * together, 1),
                "ratio": round(together / (k * one), 2),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
