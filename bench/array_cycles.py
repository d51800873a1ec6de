"""ctld's scheduling of one big array in one process: cycles, and CPU per task, from submit to drained.

    python bench/array_cycles.py [--tasks 1001] [--batch 8] [--sched-params bf_interval=30] [--profile]

The real Controller and SQLite state store (tests/unit/ctld/harness.py; the node agents are data) on
4 nodes of 16 CPUs, as the real Slurm here: one `sbatch -a 0-(N-1) --wrap=true`-like array, then
completions arrive `--batch` at a time, each burst followed by one scheduling cycle, as the wakes of
ctld's scheduler loop do when tasks end at once, until every task has ended. Prints the cycles run,
their CPU (in all, per cycle, per task) and, with `--profile`, where it went (cProfile). Figures go to
bench/README.md (issue 19).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from submit_path import limits  # noqa: E402

from shoal.v1 import jobs_pb2  # noqa: E402
from tests.unit.ctld.harness import Harness, cluster, job  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1001, help="tasks in the array")
    ap.add_argument("--batch", type=int, default=8, help="completions between two cycles")
    ap.add_argument("--profile", action="store_true", help="cProfile the cycles")
    ap.add_argument("--sched-params", default="", help="slurm.conf SchedulerParameters (e.g. bf_interval=30)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="array_cycles.") as tmp:
        builder = (
            cluster()
            .nodes(4, cpus=16, mem=64000)
            .set(  # as the real Slurm's slurm.conf here
                MaxArraySize=max(1001, args.tasks + 1),
                SchedulerType="sched/backfill",
                SelectType="select/cons_tres",
                SelectTypeParameters="CR_Core_Memory",
                DefMemPerCPU=1000,
                PriorityType="priority/multifactor",
                PriorityWeightAge=1000,
                PriorityWeightFairshare=10000,
                PriorityWeightJobSize=1000,
                PriorityWeightPartition=1000,
                AccountingStorageType="accounting_storage/slurmdbd",
                AccountingStorageEnforce="associations",
                **({"SchedulerParameters": args.sched_params} if args.sched_params else {}),
            )
        )
        h = Harness.of(builder, Path(tmp))
        h.ctl.accounting.push(limits())  # the association cache as dbd pushes it
        arr = job().name("bench_array").time(1)
        arr.spec.array = f"0-{args.tasks - 1}"
        t = time.process_time()
        start_clock = h.clock()
        h.submit(arr)
        submit_s = time.process_time() - t
        profiler = cProfile.Profile() if args.profile else None
        cycles, sched_s, other_s = 0, 0.0, 0.0

        def cycle() -> None:
            nonlocal cycles, sched_s
            if profiler:
                profiler.enable()
            t = time.process_time()
            h.schedule()
            sched_s += time.process_time() - t
            if profiler:
                profiler.disable()
            cycles += 1

        cycle()
        while True:
            running = [j.job_id for j in h.ctl.jobs.values() if j.state == jobs_pb2.RUNNING]
            if not running:
                break
            for start in range(0, len(running), args.batch):
                t = time.process_time()
                for job_id in running[start : start + args.batch]:
                    h.finish(job_id)
                other_s += time.process_time() - t
                h.advance(0.05)
                cycle()
        left = sum(1 for j in h.ctl.jobs.values() if j.state == jobs_pb2.PENDING)
        print(
            f"# {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.2f}; {args.tasks} tasks, "
            f"completions {args.batch} per cycle; {left} left pending; "
            f"SchedulerParameters={args.sched_params or '(null)'}"
        )
        print(f"array submission: {1000 * submit_s:.1f} ms CPU")
        print(
            f"cycles: {cycles}, {sched_s:.2f} s CPU in all, {1000 * sched_s / cycles:.1f} ms per cycle, "
            f"{1000 * sched_s / args.tasks:.2f} ms per task; completions {1000 * other_s / args.tasks:.2f} ms per task"
        )
        print(
            f"backfill passes: {h.ctl.state.backfill_passes} over {h.clock() - start_clock:.1f} s (the harness clock)"
        )
        if profiler:
            stats = pstats.Stats(profiler)
            stats.sort_stats("cumulative").print_stats(35)
            stats.sort_stats("tottime").print_stats(20)
        h.ctl.store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
