"""The scheduler core at the issue's scale: 10,000 pending jobs on 1,000 nodes of 8 GPUs.

    python bench/sched_scale.py                 # idle, half, busy; about a minute
    python bench/sched_scale.py --state half --reps 1 --profile

Prints, per cluster state, the CPU time (time.process_time: one core, whatever else the machine
runs) of one main pass (`run_cycle` under sched/builtin: the builtin scheduler's pass over the
queue) and of one backfill pass (`run_backfill` over what that main pass left, with slurm.conf's
defaults: bf_max_job_test=500, bf_window=1 day, bf_resolution=60 s), best of --reps; then the
priority recalculation (`all_priorities`, priority/multifactor with every factor weighted) for
50,000 pending jobs. Cluster and queue are bench/sched_core.py's (seeded): nodes of 64 CPUs,
512,000 MB and 8 gpu:h100; a mixed queue of 1-CPU, 1-GPU, 8-GPU, 2-4 node exclusive, spread,
memory-bound, held and dependent jobs; "half" = every other node held by a running job, "busy" =
every node held (the running jobs end one second apart from an hour on).

Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sched_core import NOW, make_jobs, make_snapshot  # noqa: E402

from ctld.sched.backfill import BackfillResult, run_backfill  # noqa: E402
from ctld.sched.cycle import queue_order_key, run_cycle  # noqa: E402
from ctld.sched.model import CycleResult, PriorityConfig, PriorityInputs, Snapshot  # noqa: E402
from ctld.sched.priority import all_priorities  # noqa: E402

MULTIFACTOR = PriorityConfig(
    type="priority/multifactor",
    weight_age=1000,
    weight_assoc=100,
    weight_fairshare=10000,
    weight_job_size=1000,
    weight_partition=1000,
    weight_qos=1000,
    weight_tres=(("cpu", 1000.0), ("gres/gpu", 2000.0)),
)


def cpu_seconds(fn: Callable[[], object], reps: int) -> tuple[float, object]:
    """The best CPU time of `reps` calls, and the last call's result."""
    best = float("inf")
    result: object = None
    for _ in range(reps):
        started = time.process_time()
        result = fn()
        best = min(best, time.process_time() - started)
    return best, result


def passes(snap: Snapshot, reps: int, profile: bool) -> tuple[float, float, CycleResult, BackfillResult]:
    """(main pass s, backfill pass s, the main pass's result, the backfill pass's result)."""
    builtin = dataclasses.replace(snap, config=dataclasses.replace(snap.config, scheduler="sched/builtin"))
    main_s, main = cpu_seconds(lambda: run_cycle(builtin, NOW), reps)
    assert isinstance(main, CycleResult)
    parts = {part.name: part for part in snap.partitions}
    queue = sorted(snap.pending, key=lambda job: queue_order_key(job, parts, NOW, snap.config))

    def backfill() -> object:
        return run_backfill(snap, NOW, queue, main.starts, main.verdicts, Counter())

    bf_s, found = cpu_seconds(backfill, reps)
    if profile:
        prof = cProfile.Profile()
        prof.runcall(lambda: run_cycle(builtin, NOW))
        prof.runcall(backfill)
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(20)
    assert isinstance(found, BackfillResult)
    return main_s, bf_s, main, found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--state", default="idle,half,busy")
    ap.add_argument("--priority-jobs", type=int, default=50_000, help="0 skips the priority figure")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="cProfile one main and one backfill pass (top 20)")
    args = ap.parse_args(argv)

    print(
        f"# python {sys.version.split()[0]}; {args.nodes} nodes x 8 GPUs; {args.jobs} pending; CPU s, best of {args.reps}"
    )
    print(f"{'state':>5} {'main ms':>8} {'starts':>6} {'backfill ms':>11} {'bf starts':>9} {'planned':>7}")
    for state in args.state.split(","):
        snap = make_snapshot(args.nodes, args.jobs, state, args.seed, 0.0)
        snap = dataclasses.replace(snap, config=dataclasses.replace(snap.config, scheduler="sched/backfill"))
        main_s, bf_s, main_result, found = passes(snap, args.reps, args.profile)
        print(
            f"{state:>5} {main_s * 1000:>8.0f} {len(main_result.starts):>6} {bf_s * 1000:>11.0f} "
            f"{len(found.starts):>9} {len(found.planned):>7}",
            flush=True,
        )
    if args.priority_jobs:
        jobs = tuple(
            dataclasses.replace(j, qos="normal", assoc_id=j.job_id % 50)
            for j in make_jobs(args.priority_jobs, args.seed, 0.0)
        )
        snap = make_snapshot(args.nodes, 1, "idle", args.seed, 0.0)
        snap = dataclasses.replace(
            snap,
            pending=jobs,
            config=dataclasses.replace(snap.config, priority=MULTIFACTOR),
            priority_inputs=PriorityInputs(
                qos_priority={"normal": 10},
                assoc_priority={i: i for i in range(50)},
                fairshare={i: i / 50 for i in range(50)},
            ),
        )
        prio_s, _ = cpu_seconds(lambda: all_priorities(snap, NOW), args.reps)
        print(
            f"priority recalculation, {len(jobs)} jobs: {prio_s * 1000:.0f} ms ({prio_s / len(jobs) * 1e6:.1f} us/job)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
