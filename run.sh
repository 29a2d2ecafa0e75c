#!/usr/bin/env bash
# Launch one config on several seeds in parallel: a thin front end to src/sweep.py.
set -u

usage() {
  cat <<'USAGE'
usage: ./run.sh ALG ENV N_SEEDS [key=value ...]

Runs `python src/main.py --config=ALG --env-config=ENV with seed=S key=value ...` for
S = SEED_START .. SEED_START+N_SEEDS-1 (SEED_START defaults to 1) through src/sweep.py: as many
at once as the machine has cores (WORKERS to change it), one torch thread each. Sacred records go
to results/sacred/ALG_ENV/..., logs to results/logs/sweeps/ALG_ENV/. Seeds that already have a
COMPLETED record with the same settings are skipped. Exits non-zero if any run failed.

examples:
  ./run.sh qmix mpe 3 t_max=100000
  SEED_START=10 ./run.sh vdn mpe 5 env_args.scenario=simple_spread_v3 runner=parallel batch_size_run=4
USAGE
}

case "${1:-}" in -h|--help) usage; exit 0;; esac
if [ $# -lt 3 ]; then usage >&2; exit 2; fi

alg=$1; env=$2; n=$3; shift 3
case "$n" in ''|*[!0-9]*|0) echo "error: N_SEEDS must be a positive integer, got '$n'" >&2; exit 2;; esac
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python}
start=${SEED_START:-1}
seeds=$(seq -s, "$start" $((start + n - 1)))
exec "$python" "$here/src/sweep.py" --config="$alg" --env-config="$env" --seeds="$seeds" \
  --workers="${WORKERS:-0}" "$@"
