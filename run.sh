#!/usr/bin/env bash
# Launch one config on several seeds in parallel, each in the background with its own log.
set -u

usage() {
  cat <<'USAGE'
usage: ./run.sh ALG ENV N_SEEDS [key=value ...]

Runs `python src/main.py --config=ALG --env-config=ENV with seed=S key=value ...` for
S = SEED_START .. SEED_START+N_SEEDS-1 (SEED_START defaults to 1), all at once, each in the
background. Logs go to results/logs/ALG_ENV_seedS.log; Sacred records to results/sacred/.
Waits for every run and exits non-zero if any failed.

examples:
  ./run.sh qmix mpe 3 t_max=100000
  SEED_START=10 ./run.sh vdn mpe 5 env_args.scenario=simple_spread_v3 runner=parallel batch_size_run=4
USAGE
}

case "${1:-}" in -h|--help) usage; exit 0;; esac
if [ $# -lt 3 ]; then usage >&2; exit 2; fi

alg=$1; env=$2; n=$3; shift 3
case "$n" in ''|*[!0-9]*) echo "error: N_SEEDS must be a positive integer, got '$n'" >&2; exit 2;; esac
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python}
start=${SEED_START:-1}
mkdir -p "$here/results/logs"
# Several runs share the cores: one torch thread each avoids threads spinning against each other.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

pids=(); logs=()
for ((i = 0; i < n; i++)); do
  seed=$((start + i))
  log="$here/results/logs/${alg}_${env}_seed${seed}.log"
  "$python" "$here/src/main.py" --config="$alg" --env-config="$env" with seed="$seed" "$@" >"$log" 2>&1 &
  pids+=($!); logs+=("$log")
  echo "seed $seed: pid $! -> $log"
done

failed=0
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    echo "done:   ${logs[$i]}"
  else
    echo "FAILED: ${logs[$i]} (exit $?)"; failed=1
  fi
done
exit $failed
