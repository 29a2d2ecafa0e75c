"""The same training run alone and beside one busy process, for several torch thread counts.

    python bench/load.py [--steps 20000] [--threads 0,1,2] [--busy spin|train] [--repeat 1]
        [-- key=value ...]

Each cell is the wall time of `python src/main.py --config=qmix --env-config=mpe with
t_max=<steps> torch_threads=<n> ...` (start-up included), run as a subprocess; "beside busy" runs
it while another process keeps one core busy: `spin` is a Python loop, `train` a second QMIX run
with torch_threads=1. Prints a table and one JSON line. On a machine with more cores than two,
`--busy-procs` sets how many busy processes to start (one per core but one is the shared case).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = os.path.join(ROOT, "src", "main.py")
SPIN = "while True:\n    pass\n"


def qmix_command(results, *overrides):
    return [
        sys.executable,
        MAIN,
        "--config=qmix",
        "--env-config=mpe",
        "with",
        f"local_results_path={results}",
        *overrides,
    ]


def timed_run(steps, threads, extra, results):
    cmd = qmix_command(
        results,
        f"t_max={steps}",
        f"torch_threads={threads}",
        "seed=1",
        "test_interval=10000",
        "test_nepisode=32",
        f"log_interval={max(steps, 1)}",
        *extra,
    )
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env())
    return time.perf_counter() - start


def clean_env():
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)  # torch_threads=0 must mean torch's own default
    return env


def start_busy(kind, results, n):
    procs = []
    for _ in range(n):
        if kind == "spin":
            cmd = [sys.executable, "-c", SPIN]
        else:
            cmd = qmix_command(results, "t_max=100000000", "torch_threads=1")
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(5 if kind == "train" else 1)  # let a training run get past its start-up
    return procs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--threads", default="0,1,2")
    p.add_argument("--busy", choices=["spin", "train"], default="spin")
    p.add_argument("--busy-procs", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("extra", nargs="*", help="key=value overrides for the timed run")
    a = p.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    out = {"steps": a.steps, "busy": a.busy, "cores": os.cpu_count(), "alone": {}, "beside": {}}
    with tempfile.TemporaryDirectory() as results:
        for _ in range(a.repeat):
            for n in threads:
                out["alone"].setdefault(n, []).append(timed_run(a.steps, n, a.extra, results))
            busy = start_busy(a.busy, results, a.busy_procs)
            try:
                for n in threads:
                    out["beside"].setdefault(n, []).append(timed_run(a.steps, n, a.extra, results))
            finally:
                for b in busy:
                    b.terminate()
                    b.wait()
    print(f"QMIX on simple_spread_v3, {a.steps} steps, {os.cpu_count()} cores, busy={a.busy} x{a.busy_procs}")
    print("| torch_threads | alone (s) | beside busy (s) | slowdown |")
    print("|---|---|---|---|")
    for n in threads:
        alone, beside = min(out["alone"][n]), min(out["beside"][n])
        print(f"| {n} | {alone:.1f} | {beside:.1f} | {beside / alone:.2f}x |")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
