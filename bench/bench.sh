#!/usr/bin/env bash
# Copied from /work/shared/realslurm/bench.sh (the script that measured real Slurm 22.05
# in PERF.md).  One change only: when CLI_DIR holds no `sacct` (shoal has no accounting
# yet), part (b) skips the sacct poll and reports n/a for the "all COMPLETED in sacct"
# figure instead of polling for 900 s.  Every measurement is otherwise identical.
#
# Benchmark a Slurm-compatible cluster through its CLIs (sbatch, squeue, sinfo,
# sacct, scancel).  Point it at any implementation by giving the directory that
# holds its CLIs; that directory is put first on PATH.
#
#   bench.sh CLI_DIR [RUNS]           e.g.  bench.sh /usr/bin 3
#
# Env:
#   CTLD_PIDFILE  pid file of the controller, for peak RSS (VmHWM)
#                 (default /run/realslurm/slurmctld.pid = real slurmctld via up.sh)
#   N_SEQ=500 N_PAR_EACH=125 N_PAR=4 N_DRAIN=200 N_QUEUE=500 N_LAT=15
#   BENCH_WORKDIR (default: a fresh mktemp dir; job output files land there)
#
# Measures (medians over RUNS, default 3), in this order: c, a, b, d
#  a) submit throughput: N_SEQ x `sbatch --wrap=true` sequentially, and
#     N_PAR submitters x N_PAR_EACH in parallel (jobs/s, wall clock)
#  b) N_DRAIN trivial jobs: time from first submission until none is left in
#     squeue, and until sacct shows all N_DRAIN COMPLETED
#  c) latency of one `squeue` and one `sinfo` with N_QUEUE held jobs queued
#     (plus the same with an empty queue, for reference)
#  d) controller peak RSS (VmHWM from /proc) after all of the above
# Only jobs it submitted (unique job names bench_*_$$) are waited on/cancelled.
set -uo pipefail

CLI_DIR="${1:?usage: bench.sh CLI_DIR [RUNS]}"
RUNS="${2:-3}"
export PATH="$CLI_DIR:$PATH"
CTLD_PIDFILE="${CTLD_PIDFILE:-/run/realslurm/slurmctld.pid}"
N_SEQ=${N_SEQ:-500}; N_PAR=${N_PAR:-4}; N_PAR_EACH=${N_PAR_EACH:-125}
N_DRAIN=${N_DRAIN:-200}; N_QUEUE=${N_QUEUE:-500}; N_LAT=${N_LAT:-15}
WORK="${BENCH_WORKDIR:-$(mktemp -d /tmp/slurmbench.XXXXXX)}"
mkdir -p "$WORK"; chmod 1777 "$WORK"; cd "$WORK" || exit 1
TAG=$$
HAVE_SACCT=$([[ -x "$CLI_DIR/sacct" ]] && echo "$CLI_DIR/sacct")  # [shoal] only a sacct of the implementation under test

now() { date +%s.%N; }
median() { python3 -c 'import sys,statistics as s; v=[float(x) for x in sys.argv[1:]]; print("%.4f" % s.median(v))' "$@"; }
fmt() { python3 -c 'import sys; print(" ".join("%.3f" % float(x) for x in sys.argv[1:]))' "$@"; }
div() { python3 -c 'import sys; print("%.2f" % (float(sys.argv[1])/float(sys.argv[2])))' "$1" "$2"; }
say() { echo "$*" >&2; }

# wait until no job named $1 is in squeue (bounded: $2 seconds)
drain() {
  local name=$1 limit=${2:-600} t0; t0=$(now)
  while :; do
    [[ -z "$(squeue -h -n "$name" -o %i 2>/dev/null)" ]] && return 0
    python3 -c "import sys; sys.exit(0 if float('$(now)')-float('$t0')<$limit else 1)" || { say "drain $name: timeout"; return 1; }
    sleep 0.2
  done
}

say "CLIs: sbatch=$(command -v sbatch) squeue=$(command -v squeue) sinfo=$(command -v sinfo) sacct=$(command -v sacct)"
say "workdir $WORK, runs $RUNS"

# ------------------------------------------------------------------ c) latency
lat() {  # lat CMD... -> prints N_LAT timings
  local i t0 t1
  for i in $(seq "$N_LAT"); do
    t0=$(now); "$@" >/dev/null 2>&1; t1=$(now)
    python3 -c "print('%.4f'%($t1-$t0))"
  done
}
sq_empty=$(median $(lat squeue)); si_empty=$(median $(lat sinfo))
name=bench_c_${TAG}
t0=$(now)
for _ in $(seq "$N_QUEUE"); do sbatch -H -J "$name" --wrap=true >/dev/null; done
t1=$(now)
held_rate=$(div "$N_QUEUE" "$(python3 -c "print($t1-$t0)")")
say "c) $N_QUEUE held submissions (sbatch -H): $held_rate jobs/s"
inq=$(squeue -h -o %i | wc -l)
known=$(squeue -h -t all -o %i | wc -l)
sq_full=$(median $(lat squeue)); si_full=$(median $(lat sinfo))
sq_full_all=$(median $(lat squeue -a -l))
say "c) controller knows $known jobs (incl. finished, kept MinJobAge)"
say "c) squeue empty ${sq_empty}s, with $inq jobs ${sq_full}s (squeue -a -l ${sq_full_all}s); sinfo empty ${si_empty}s, with $inq jobs ${si_full}s"
scancel -n "$name"
drain "$name" 300

# ------------------------------------------------------------------ a) submit
seq_rates=(); par_rates=()
for r in $(seq "$RUNS"); do
  name=bench_a_seq_${TAG}_$r
  t0=$(now)
  for _ in $(seq "$N_SEQ"); do sbatch -J "$name" --wrap=true >/dev/null || say "sbatch failed"; done
  t1=$(now)
  rate=$(div "$N_SEQ" "$(python3 -c "print($t1-$t0)")")
  seq_rates+=("$rate"); say "a) run $r sequential: $N_SEQ jobs in $(python3 -c "print('%.2f'%($t1-$t0))") s = $rate jobs/s"
  drain "$name" 900

  name=bench_a_par_${TAG}_$r
  t0=$(now)
  for p in $(seq "$N_PAR"); do
    ( for _ in $(seq "$N_PAR_EACH"); do sbatch -J "$name" --wrap=true >/dev/null || echo "sbatch failed" >&2; done ) &
  done
  wait
  t1=$(now)
  total=$((N_PAR * N_PAR_EACH))
  rate=$(div "$total" "$(python3 -c "print($t1-$t0)")")
  par_rates+=("$rate"); say "a) run $r parallel x$N_PAR: $total jobs in $(python3 -c "print('%.2f'%($t1-$t0))") s = $rate jobs/s"
  drain "$name" 900
done

# ------------------------------------------------------------------ b) drain
drain_q=(); drain_acct=()
for r in $(seq "$RUNS"); do
  name=bench_b_${TAG}_$r
  t0=$(now)
  for _ in $(seq "$N_DRAIN"); do sbatch -J "$name" --wrap=true >/dev/null; done
  tsub=$(now)
  drain "$name" 900
  t1=$(now)
  # accounting: all N_DRAIN jobs COMPLETED in sacct
  # [shoal] no sacct on PATH: skip the accounting poll (reported as n/a)
  while [[ -n "$HAVE_SACCT" ]]; do
    # (note: real sacct returns nothing for `-s CD` unless -E is given too)
    c=$(sacct -n -X -P -S now-7200 --name "$name" -o State 2>/dev/null | grep -c '^COMPLETED')
    (( c >= N_DRAIN )) && break
    python3 -c "import sys; sys.exit(0 if float('$(now)')-float('$t0')<900 else 1)" || { say "sacct wait timeout ($c)"; break; }
    sleep 0.2
  done
  t2=$(now)
  dq=$(python3 -c "print('%.3f'%($t1-$t0))"); da=$(python3 -c "print('%.3f'%($t2-$t0))")
  [[ -n "$HAVE_SACCT" ]] || da="n/a"  # [shoal]
  drain_q+=("$dq"); drain_acct+=("$da")
  say "b) run $r: submit took $(python3 -c "print('%.2f'%($tsub-$t0))") s; all $N_DRAIN gone from squeue after $dq s; all COMPLETED in sacct after $da s"
done

# ------------------------------------------------------------------ d) RSS
hwm="n/a"; rss="n/a"
if [[ -r "$CTLD_PIDFILE" ]]; then
  pid=$(cat "$CTLD_PIDFILE")
  hwm=$(awk '/^VmHWM/{print $2" "$3}' /proc/"$pid"/status 2>/dev/null)
  rss=$(awk '/^VmRSS/{print $2" "$3}' /proc/"$pid"/status 2>/dev/null)
fi
say "d) controller (pid file $CTLD_PIDFILE): VmHWM $hwm, VmRSS now $rss"

# ------------------------------------------------------------------ summary
cat <<EOF
metric	median	runs
a_submit_seq_jobs_per_s	$(median "${seq_rates[@]}")	$(fmt "${seq_rates[@]}")
a_submit_seq_held_jobs_per_s	$held_rate	(one run of $N_QUEUE x sbatch -H, during c)
a_submit_par${N_PAR}_jobs_per_s	$(median "${par_rates[@]}")	$(fmt "${par_rates[@]}")
b_${N_DRAIN}_jobs_until_squeue_empty_s	$(median "${drain_q[@]}")	$(fmt "${drain_q[@]}")
b_${N_DRAIN}_jobs_until_sacct_all_completed_s	$([[ -n "$HAVE_SACCT" ]] && median "${drain_acct[@]}" || echo "n/a")	$([[ -n "$HAVE_SACCT" ]] && fmt "${drain_acct[@]}" || echo "(no sacct: skipped)")
c_squeue_latency_s_with_${inq}_jobs	$sq_full	(${N_LAT} calls; controller knew $known jobs)
c_sinfo_latency_s_with_${inq}_jobs	$si_full	(${N_LAT} calls)
c_squeue_a_l_latency_s_with_${inq}_jobs	$sq_full_all	(${N_LAT} calls)
c_squeue_latency_s_empty	$sq_empty	(${N_LAT} calls)
c_sinfo_latency_s_empty	$si_empty	(${N_LAT} calls)
d_ctld_peak_rss	$hwm	(VmHWM; VmRSS now $rss)
EOF
rm -rf "$WORK" 2>/dev/null
