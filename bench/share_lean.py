"""Does sharing's extra weight lean to one sign of the individual TD error? For each checkpoint of
a q_divide_learner run with sharing (inspire_qmix and its arms, super_qmix), resume it for a few
thousand steps with the learner logging every update, and print the means over those updates:
the agents' utility Q_i, rho (how much the mixer reads them), |delta_i| and |delta_tot|, delta_i's
plain mean and its mean under the extra weight, and their difference (the lean) with a 95% interval
over the updates, also in units of |delta_i|. A positive lean pushes the agents' utilities down on
every update. With --by-event it also splits the lean by the kind of step the extra weight lands on
(the team's last step, a time-limit cut, the agent's own death, a rewarded step, a quiet one): per
kind, its share of the valid agent-steps and of the extra weight, delta_i's mean and skewness
there, and the lean in two parts, from weighting whole kinds of step more (between) and from
picking one tail inside a kind (within); the parts sum to the lean.

    OMP_NUM_THREADS=1 python bench/share_lean.py results/models/<run folder> [...] [--step 300000]
        [--steps 12000] [--by-event]

The resumed run starts with an empty buffer (a final checkpoint keeps none), so its batches are
the last few dozen episodes of the resumed policy, not the 5000-episode buffer of training.
Prints one markdown table row per checkpoint.
"""

import argparse
import contextlib
import glob
import json
import math
import os
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

import torch  # noqa: E402

import main  # noqa: E402
from learners.q_divide_learner import QDivideLearner  # noqa: E402
from utils.checkpoint import check_checkpoint  # noqa: E402
from utils.stats import markdown_table  # noqa: E402

KEYS = ("map_name", "reward_sparse")  # env_args the resumed run must share with the saved one
LOGGED = ("q_taken_mean", "rho_abs_mean", "q_td_error_abs", "mixer_td_error_abs")
RUN_KEYS = ("seed", "schedule_horizon", "share_control", "share_to", "share_weight", "share_rule", "selected")


EVENTS = ("team's last step", "time-limit cut", "own death", "rewarded", "quiet")


def step_kinds(batch, shape):
    """[B, T, N] index into EVENTS of each agent-step, the first that applies."""
    term = batch["terminated"][:, :-1].float()  # [B, T, 1]
    filled = batch["filled"].float()  # an episode of L steps fills slots 0..L (L: the final obs)
    after_next = torch.cat([filled[:, 2:], torch.zeros_like(filled[:, :1])], 1)
    last = filled[:, 1:] * (1 - after_next) * (1 - term)  # step L - 1, not an end: a time-limit cut
    death = batch["indi_terminated"][:, :-1].float()  # [B, T, N]
    rewarded = (batch["reward"][:, :-1] > 0).float()
    kinds = torch.full(shape, len(EVENTS) - 1, dtype=torch.long)  # quiet unless a flag says otherwise
    for k, flag in reversed(list(enumerate((term, last, death, rewarded)))):
        kinds = torch.where(flag.expand(shape) > 0, k, kinds)
    return kinds


def interval(xs):
    """Mean and half-width of a normal 95% interval of the mean over updates (0 for one update).
    Normal, not Student-t as utils.stats: with 100-250 updates they differ by under 1%, and the
    figures recorded in docs/results/skirmish_sharing.md were printed this way."""
    n = len(xs)
    m = sum(xs) / n
    return m, 1.96 * math.sqrt(sum((x - m) ** 2 for x in xs) / max(n - 1, 1) / n)


def interval_text(xs, scale=1.0, digits=4):
    m, h = interval(xs)
    m, h = m / scale, h / scale
    return f"{m:+.{digits}f} [{m - h:+.{digits}f}, {m + h:+.{digits}f}]"


class EventSplit:
    """Wraps QDivideLearner.train to add up, per update, each kind of step's counts, extra weight
    and weighted delta_i (from the update's own tensors in learner.last)."""

    def __init__(self):
        self.updates = []

    def __enter__(self):
        self.train, split = QDivideLearner.train, self

        def train(learner, batch, t_env, episode_num):
            result = split.train(learner, batch, t_env, episode_num)
            split.add(learner.last, batch)
            return result

        QDivideLearner.train = train
        return self

    def __exit__(self, *exc):
        QDivideLearner.train = self.train

    def add(self, last, batch):
        shared = last["shared"]
        if shared is None or shared.extra.sum() <= 0:
            return
        delta, mask, extra = last["delta_i"].cpu(), last["indi_mask"].cpu(), shared.extra.cpu()
        kinds = step_kinds(batch, delta.shape)
        per = []
        for k in range(len(EVENTS)):
            at = (kinds == k).float() * mask
            sums = [(delta**p * at).sum() for p in (0, 1, 2, 3)]  # p = 0: the count
            per.append([*sums, (extra * at).sum(), (extra * delta * at).sum()])
        self.updates.append(torch.tensor(per, dtype=torch.float64))  # [kinds, 6]

    def rows(self):
        """Per kind: its share of the agent-steps and of the extra weight, delta_i's plain mean and
        skewness there, and the lean in two parts that sum to it over the kinds: `between`, from
        weighting the kind more or less than its share of steps ((share of weight - share of steps)
        * plain mean), and `within`, from the weight picking one tail inside the kind (share of
        weight * (weighted mean - plain mean)); each the mean over updates with a 95% interval."""
        u = torch.stack(self.updates)  # [U, K, 6]
        count, s1, s2, s3, mass, wsum = u.unbind(-1)
        total, mass_total = count.sum(1, keepdim=True), mass.sum(1, keepdim=True)
        mean_k = s1 / count.clamp(min=1)
        between = (mass / mass_total - count / total) * mean_k
        within = (wsum - mass * mean_k) / mass_total

        def cell(x):
            return interval_text(x.tolist())

        def skew(c, a, b, d):  # the third standardised moment from the power sums
            c = c.clamp(min=1)
            m = a / c
            var = (b / c - m**2).clamp(min=1e-30)
            return (d / c - 3 * m * b / c + 2 * m**3) / var**1.5

        out = [
            [
                "all", "1.000", "1.000", f"{(s1.sum() / count.sum()).item():+.4f}",
                f"{skew(count.sum(), s1.sum(), s2.sum(), s3.sum()).item():+.2f}",
                cell(between.sum(1)), cell(within.sum(1)),
            ]
        ]  # fmt: skip
        for k, name in enumerate(EVENTS):
            c = count[:, k].sum()
            if c == 0:
                continue
            out.append(
                [
                    name, f"{(c / count.sum()).item():.3f}", f"{(mass[:, k].sum() / mass.sum()).item():.3f}",
                    f"{(s1[:, k].sum() / c).item():+.4f}",
                    f"{skew(c, s1[:, k].sum(), s2[:, k].sum(), s3[:, k].sum()).item():+.2f}",
                    cell(between[:, k]), cell(within[:, k]),
                ]
            )  # fmt: skip
        return out


def resume(folder, step, steps, out):
    with open(os.path.join(check_checkpoint(folder, step), "meta.json")) as f:  # main's own choice of step
        meta = json.load(f)
    chosen, cfg = meta["t_env"], meta["config"]
    argv = [f"--config={meta['name']}", f"--env-config={meta['env']}", "with"]
    argv += [f"env_args.{k}={cfg['env_args'][k]}" for k in KEYS if k in cfg["env_args"]]
    argv += [f"{k}={cfg[k]}" for k in RUN_KEYS if cfg.get(k) is not None]
    argv += [
        f"checkpoint_path={folder}", f"load_step={chosen}", f"t_max={chosen + steps}",
        "learner_log_interval=1", f"log_interval={steps}", f"runner_log_interval={steps}",
        f"test_interval={10 * steps}", "test_nepisode=1", "save_model=False",
        f"local_results_path={out}", "torch_threads=1", "use_tensorboard=False",
    ]  # fmt: skip
    if main.main(argv) != 0:
        raise SystemExit(f"{folder}: the resumed run failed ({' '.join(argv)})")
    (metrics,) = glob.glob(os.path.join(out, "sacred", "**", "metrics.json"), recursive=True)
    with open(metrics) as f:
        return chosen, cfg, json.load(f)


def after(metrics, key, start):
    m = metrics.get(key, {"steps": [], "values": []})
    return [v for s, v in zip(m["steps"], m["values"], strict=True) if s > start]


def mean(xs):
    return sum(xs) / len(xs)


LEAN_COLUMNS = (
    "run", "from", "updates", "Q_i", "rho", "\\|delta_i\\|", "\\|delta_tot\\|", "delta_i mean",
    "under the extra weight", "lean [95%]", "lean / \\|delta_i\\|",
)  # fmt: skip
EVENT_COLUMNS = (
    "step", "agent-steps", "extra weight", "delta_i mean", "skewness", "lean: between [95%]",
    "lean: within [95%]",
)  # fmt: skip


def row(folder, chosen, cfg, metrics):
    """The lean table's cells for one resumed run (the first is the run's name)."""
    plain, weighted = after(metrics, "delta_i_mean", chosen), after(metrics, "share_delta_i_mean", chosen)
    if not weighted:
        raise SystemExit(f"{folder}: no update logged share_delta_i_mean (a run without sharing?)")
    n = min(len(plain), len(weighted))
    diff = [w - p for w, p in zip(weighted[-n:], plain[-n:], strict=True)]
    arm = f"{cfg['name']} ({cfg.get('share_control')}, {cfg.get('share_to')}, seed {cfg.get('seed')})"
    logged = {k: mean(after(metrics, k, chosen)) for k in LOGGED}
    scale = max(logged["q_td_error_abs"], 1e-12)  # the lean in units of |delta_i| (sparse rewards' are tiny)
    return [
        arm, f"{chosen // 1000}k", str(n), f"{logged['q_taken_mean']:.2f}", f"{logged['rho_abs_mean']:.3f}",
        f"{logged['q_td_error_abs']:.4f}", f"{logged['mixer_td_error_abs']:.3f}", f"{mean(plain):+.4f}",
        f"{mean(weighted):+.4f}", interval_text(diff), interval_text(diff, scale, digits=2),
    ]  # fmt: skip


def main_(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", help="saved runs (results/models/<run>)")
    p.add_argument("--step", type=int, default=0, help="saved t_env to resume (0: latest; else closest)")
    p.add_argument("--steps", type=int, default=12000, help="env steps to run after it")
    p.add_argument("--by-event", action="store_true", help="also split each lean by kind of step")
    args = p.parse_args(argv)
    rows, splits = [], []
    for folder in args.folders:  # the runs print their own logs; the tables come at the end
        split = EventSplit() if args.by_event else contextlib.nullcontext()
        with tempfile.TemporaryDirectory() as out, split:
            rows.append(row(folder, *resume(folder, args.step, args.steps, out)))
        if args.by_event:
            splits.append((rows[-1][0], split))
    print("\n" + "\n".join(markdown_table(LEAN_COLUMNS, rows)))
    for arm, split in splits:
        print(f"\n{arm}, the lean by kind of step:\n")
        print("\n".join(markdown_table(EVENT_COLUMNS, split.rows())))


if __name__ == "__main__":
    main_()
