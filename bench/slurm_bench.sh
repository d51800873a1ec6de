#!/usr/bin/env bash
# Run the real-Slurm benchmark (bench/bench.sh, a copy of /work/shared/realslurm/bench.sh)
# against a fresh local shoal cluster shaped like the reference one
# (4 nodes x 16 CPUs, 64000 MB, 8 gpu:h100), then tear the cluster down.
#
#   bench/slurm_bench.sh [RUNS]          (default 3; PERF.md used 5)
#
# Env: SHOAL_BENCH_DIR  cluster directory (default: fresh mktemp dir, removed at the end
#                       unless SHOAL_BENCH_KEEP=1)
#      PYTHON           the interpreter shoal is installed in (default: python3 on PATH)
#      SHOAL_BENCH_AS_IS=1  keep the caller's Python environment untouched.  By default the
#                       script unsets PYTHONDONTWRITEBYTECODE and points PYTHONPYCACHEPREFIX at
#                       a cache dir (~/.cache/shoal-bench/pycache), so that every command runs
#                       from compiled bytecode as it would from an installed package; without
#                       that (this dev machine sets PYTHONDONTWRITEBYTECODE=1 and the editable
#                       checkout has no __pycache__) every sbatch/squeue recompiles shoal's
#                       modules from source, ~2x slower.
#      N_SEQ N_PAR N_PAR_EACH N_DRAIN N_QUEUE N_LAT   passed through to bench.sh
# Prints bench.sh's summary table on stdout; progress and daemon logs' tails on stderr.
set -uo pipefail
RUNS="${1:-3}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
PY="${PYTHON:-$(command -v python3)}"
# The console scripts live next to the real interpreter (not pyenv's shims, which are
# shell scripts that would add ~50 ms to every command).
PYBIN="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
if [[ -z "${SHOAL_BENCH_AS_IS:-}" ]]; then
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/shoal-bench/pycache}"
  mkdir -p "$PYTHONPYCACHEPREFIX"
fi
DIR="${SHOAL_BENCH_DIR:-$(mktemp -d /tmp/shoalbench.XXXXXX)}"
CLI="$DIR/cli"

cleanup() {
  (cd "$REPO" && "$PY" -m cli.shoal_admin down --dir "$DIR" >&2) || true
  if [[ -z "${SHOAL_BENCH_KEEP:-}" && -z "${SHOAL_BENCH_DIR:-}" ]]; then rm -rf "$DIR"; fi
}
trap cleanup EXIT

cd "$REPO" || exit 1
"$PY" -m cli.shoal_admin up --dir "$DIR" --nodes 4 --cpus-per-node 16 --mem-per-node 64000 \
  --gpus-per-node 8 --gpu-type h100 --no-check >&2 || exit 1
export SLURM_CONF="$DIR/slurm.conf"

mkdir -p "$CLI"
for c in sbatch squeue sinfo scontrol scancel sacct; do
  if [[ -x "$PYBIN/$c" ]]; then ln -sf "$PYBIN/$c" "$CLI/$c"
  else echo "slurm_bench: $c not found in $PYBIN (pip install -e . ?)" >&2; exit 1; fi
done
# `shoal up` runs shoal-dbd (SQLite), so part (b) also polls sacct until all 200 jobs are COMPLETED.
echo "slurm_bench: cluster in $DIR, CLIs in $CLI -> $PYBIN" >&2
echo "slurm_bench: PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-} PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-}" >&2
for c in sbatch squeue sinfo scancel; do "$CLI/$c" --help >/dev/null 2>&1; done  # warm the bytecode cache
echo "slurm_bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -Is)" >&2

CTLD_PIDFILE="$DIR/run/ctld.pid" bash "$HERE/bench.sh" "$CLI" "$RUNS"
rc=$?
echo "slurm_bench: ctld log tail:" >&2
tail -n 5 "$DIR/log/ctld.log" "$DIR/log/ctld.out" 2>/dev/null >&2 || true
exit $rc
