"""Microbenchmark of the pure scheduler core: ctld.sched.cycle.run_cycle(snapshot, now).

    python bench/sched_core.py                        # the default grid (about a minute)
    python bench/sched_core.py --nodes 256 --jobs 10000 --state idle
    python bench/sched_core.py --profile --nodes 256 --jobs 10000 --state idle

Builds Snapshots of N identical nodes (64 CPUs as 2 sockets x 32 cores, 512000 MB, 8 gpu:h100;
two partitions over all of them: "batch" (default) and "gpu") and P pending jobs of mixed shapes
(seeded, so every run sees the same queue), then times whole cycles. Prints, per case: cycles/s,
ms per cycle, pending jobs decided per second, and how many jobs the cycle starts.

Cluster states:
  idle  every node empty: the cycle starts as much as fits (the worst case for placement)
  busy  every CPU of every node held by running jobs: everything pends (Resources, then Priority)
  half  every other node full: some starts, then the partitions block

Job mix (fractions of P): 40% 1 CPU serial; 15% -c 8 with one GPU; 10% -N1 --gpus-per-node=8;
5% -N 2-4 --gpus-per-node=8 --exclusive; 10% -n 16 spread (1..16 nodes); 10% --mem 16G -c 4 in
"gpu"; 5% held (-H); 5% --dependency=afterok on an earlier pending job. `--singleton F` makes a
fraction F of the jobs --dependency=singleton (5 job names per user; `--unique-names`: every job its
own name), a shape that costs a scan of every known job per singleton job.

Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ctld.sched.cycle import run_cycle  # noqa: E402
from ctld.sched.model import (  # noqa: E402
    UNLIMITED,
    Config,
    Dependency,
    DependencySpec,
    Gpu,
    GpuRequest,
    JobRequest,
    JobStatus,
    Node,
    NodeAllocation,
    NodeUsage,
    Partition,
    Phase,
    RunningJob,
    Snapshot,
)

NOW = 1_700_000_000
CPUS = 64
MEM_MB = 512_000
GPUS = 8


def make_nodes(count: int, state: str) -> tuple[Node, ...]:
    gpus = tuple(Gpu(i, "h100") for i in range(GPUS))
    full = NodeUsage(
        cpu_ids=frozenset(range(CPUS)), mem_mb=MEM_MB, gpu_indices=frozenset(range(GPUS)), jobs=1
    )
    nodes = []
    for i in range(count):
        busy = state == "busy" or (state == "half" and i % 2 == 0)
        nodes.append(
            Node(
                name=f"node{i + 1}",
                cpus=CPUS,
                real_memory_mb=MEM_MB,
                gpus=gpus,
                partitions=frozenset({"batch", "gpu"}),
                usage=full if busy else NodeUsage(),
                sockets=2,
                cores_per_socket=CPUS // 2,
                threads_per_core=1,
            )
        )
    return tuple(nodes)


def make_running(nodes: tuple[Node, ...]) -> tuple[RunningJob, ...]:
    """One job holding each full node, ending one second apart from an hour on (as ctld gives them)."""
    return tuple(
        RunningJob(
            job_id=900_000_000 + i,
            nodes=(n.name,),
            end_time=NOW + 3600 + i,
            partition="batch",
            allocation=(
                NodeAllocation(
                    n.name, tuple(sorted(n.usage.cpu_ids)), n.usage.mem_mb, tuple(sorted(n.usage.gpu_indices))
                ),
            ),
        )
        for i, n in enumerate(nodes)
        if n.usage.jobs
    )


def make_jobs(count: int, seed: int, singleton: float, unique_names: bool = False) -> list[JobRequest]:
    rng = random.Random(seed)
    jobs: list[JobRequest] = []
    for k in range(count):
        job_id = 1000 + k
        base = dict(
            job_id=job_id,
            user_id=1000 + rng.randrange(20),
            name=f"u{job_id}" if unique_names else f"j{rng.randrange(5)}",
            submit_time=NOW - count + k,
            partitions=("batch",),
            time_limit_min=rng.choice((30, 60, 240, UNLIMITED)),
        )
        r = rng.random()
        if r < 0.40:
            shape: dict[str, object] = {}
        elif r < 0.55:
            shape = dict(cpus_per_task=8, gpus=GpuRequest(per_node=1))
        elif r < 0.65:
            shape = dict(gpus=GpuRequest(per_node=8), cpus_per_task=16)
        elif r < 0.70:
            n = rng.randint(2, 4)
            shape = dict(min_nodes=n, gpus=GpuRequest(per_node=8), exclusive=True)
        elif r < 0.80:
            shape = dict(num_tasks=16, max_nodes=16)
        elif r < 0.90:
            shape = dict(partitions=("gpu",), mem_per_node_mb=16_000, cpus_per_task=4)
        elif r < 0.95:
            shape = dict(held_user=True)
        else:
            target = 1000 + rng.randrange(max(1, k)) if k else 0
            shape = dict(dependency=DependencySpec((Dependency("afterok", (target,)),))) if target else {}
        if singleton and rng.random() < singleton:
            shape = dict(shape, dependency=DependencySpec((Dependency("singleton"),)))
        jobs.append(JobRequest(**{**base, **shape}))  # type: ignore[arg-type]
    return jobs


def make_snapshot(
    nodes: int, pending: int, state: str, seed: int, singleton: float, unique_names: bool = False
) -> Snapshot:
    node_tuple = make_nodes(nodes, state)
    names = tuple(n.name for n in node_tuple)
    jobs = make_jobs(pending, seed, singleton, unique_names)
    running = make_running(node_tuple)
    statuses = tuple(
        JobStatus(job_id=j.job_id, user_id=j.user_id, name=j.name, phase=Phase.PENDING) for j in jobs
    ) + tuple(JobStatus(job_id=r.job_id, user_id=0, name="bg", phase=Phase.ACTIVE) for r in running)
    return Snapshot(
        nodes=node_tuple,
        partitions=(
            Partition(name="batch", nodes=names, max_time_min=UNLIMITED),
            Partition(name="gpu", nodes=names, max_time_min=UNLIMITED),
        ),
        pending=tuple(jobs),
        running=running,
        jobs=statuses,
        config=Config(def_mem_per_cpu_mb=MEM_MB // CPUS),
    )


def time_cycles(snap: Snapshot, min_time: float, min_reps: int) -> tuple[list[float], int]:
    """Per-cycle wall times (s) over at least min_reps cycles and min_time seconds; and starts."""
    result = run_cycle(snap, NOW)  # warm-up; also checks it works
    starts = len(result.starts)
    times: list[float] = []
    total = 0.0
    gc.collect()
    while len(times) < min_reps or total < min_time:
        t0 = time.perf_counter()
        run_cycle(snap, NOW)
        dt = time.perf_counter() - t0
        times.append(dt)
        total += dt
    return times, starts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="64,256", help="comma-separated node counts")
    ap.add_argument("--jobs", default="1000,10000", help="comma-separated pending-job counts")
    ap.add_argument("--state", default="idle,half,busy", help="comma-separated: idle, half, busy")
    ap.add_argument("--singleton", type=float, default=0.0, help="fraction of --dependency=singleton jobs")
    ap.add_argument("--unique-names", action="store_true", help="every job its own name (with --singleton)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of cycles per case")
    ap.add_argument("--min-reps", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile one cycle per case (top 15)")
    args = ap.parse_args(argv)

    print(f"# python {sys.version.split()[0]}; {CPUS} CPUs, {MEM_MB} MB, {GPUS} GPUs per node")
    print(f"# singleton fraction {args.singleton}; unique names {args.unique_names}; seed {args.seed}")
    header = (
        f"{'nodes':>5} {'pending':>7} {'state':>5} {'starts':>6} {'cycles/s':>9} "
        f"{'ms/cycle':>9} {'min ms':>8} {'jobs/s':>10} {'reps':>4} {'build s':>7}"
    )
    print(header)
    for n in (int(x) for x in args.nodes.split(",")):
        for p in (int(x) for x in args.jobs.split(",")):
            for state in args.state.split(","):
                t0 = time.perf_counter()
                snap = make_snapshot(n, p, state, args.seed, args.singleton, args.unique_names)
                build = time.perf_counter() - t0
                times, starts = time_cycles(snap, args.min_time, args.min_reps)
                med = statistics.median(times)
                print(
                    f"{n:>5} {p:>7} {state:>5} {starts:>6} {1 / med:>9.2f} {med * 1000:>9.1f} "
                    f"{min(times) * 1000:>8.1f} {p / med:>10.0f} {len(times):>4} {build:>7.2f}",
                    flush=True,
                )
                if args.profile:
                    prof = cProfile.Profile()
                    prof.enable()
                    run_cycle(snap, NOW)
                    prof.disable()
                    pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
