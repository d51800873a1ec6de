"""GPU selection: how long the core takes to place GPU jobs, and how much fragmentation it leaves.

    python bench/gpu_select_bench.py                  # both parts, seed 1 (about a minute)
    python bench/gpu_select_bench.py --nodes 256 --jobs 1000 --stream 4000 --seed 7

Nodes are the shipped fake DGX H100 description (8 GPUs on NVSwitch, pairs per PCIe switch,
2 NUMA nodes) run through noded's discovery and ctld's snapshot conversion, as in a live cluster.

1. Time: one scheduling cycle (run_cycle) over N empty nodes and P pending GPU jobs of 1, 2, 4 or
   8 GPUs (-c 4 each), and the same with every node half used. Prints ms per cycle and per job.
2. Fragmentation: a seeded stream of 1/2/4/8-GPU jobs (weights 40/30/20/10 %), each lasting
   N to 3N ticks (about 65 % of the GPUs busy), arrives one per tick; a job that does not fit at
   once is turned away. Compared:
   shoal's placement (topology-aware GPU choice, best-fit node packing), first fit (the first
   node in order with enough free GPUs, lowest GPU indices) and spread (the node with the most
   free GPUs, Kubernetes' default LeastAllocated score). Prints the mean share of nodes with
   all 8 GPUs free, and how many 8-GPU jobs were turned away.

Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ctld.sched.cycle import run_cycle  # noqa: E402
from ctld.sched.model import GpuRequest, JobRequest, Node, NodeUsage, Partition, Snapshot, Start  # noqa: E402
from ctld.sched.placement import Overlay, place  # noqa: E402
from tests.unit.gpu.fixtures import described_node  # noqa: E402

SIZES = (1, 2, 4, 8)
WEIGHTS = (40, 30, 20, 10)


def cluster(count: int) -> tuple[Node, ...]:
    base = described_node("dgx0", "dgx_h100")
    return tuple(dataclasses.replace(base, name=f"dgx{i:03d}") for i in range(count))


def gpu_job(job_id: int, gpus: int) -> JobRequest:
    return JobRequest(
        job_id=job_id,
        user_id=1000,
        name=f"j{job_id}",
        submit_time=job_id,
        partitions=("gpu",),
        cpus_per_task=4,
        mem_per_node_mb=16000,
        gpus=GpuRequest(per_node=gpus),
        time_limit_min=60,
    )


def snapshot(nodes: tuple[Node, ...], pending: tuple[JobRequest, ...]) -> Snapshot:
    part = Partition(name="gpu", nodes=tuple(n.name for n in nodes))
    return Snapshot(nodes=nodes, partitions=(part,), pending=pending, running=(), jobs=())


def time_cycles(count: int, jobs: int, seed: int) -> None:
    rng = random.Random(seed)
    pending = tuple(gpu_job(i, rng.choices(SIZES, WEIGHTS)[0]) for i in range(1, jobs + 1))
    empty = cluster(count)
    half = tuple(
        dataclasses.replace(
            n,
            usage=NodeUsage(
                cpu_ids=frozenset(range(0, 112, 2)),
                mem_mb=1000,
                gpu_indices=frozenset(rng.sample(range(8), 4)),
                jobs=1,
            ),
        )
        for n in empty
    )
    for label, nodes in (("empty", empty), ("half used", half)):
        snap = snapshot(nodes, pending)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            result = run_cycle(snap, now=1000)
            times.append(time.perf_counter() - t0)
        best = min(times)
        print(
            f"cycle  nodes={count} pending={jobs} {label:9s}: {best * 1000:8.1f} ms/cycle "
            f"{best / jobs * 1e6:7.1f} us/job  starts={len(result.starts)}"
        )


def first_fit(free: list[list[int]], gpus: int) -> tuple[int, list[int]] | None:
    for i, node_free in enumerate(free):
        if len(node_free) >= gpus:
            return i, sorted(node_free)[:gpus]
    return None


def spread(free: list[list[int]], gpus: int) -> tuple[int, list[int]] | None:
    """Kubernetes' default LeastAllocated scoring: the node with the most free GPUs."""
    fits = [i for i, node_free in enumerate(free) if len(node_free) >= gpus]
    if not fits:
        return None
    i = max(fits, key=lambda n: len(free[n]))
    return i, sorted(free[i])[:gpus]


def stream(count: int, length: int, seed: int) -> None:
    rng = random.Random(seed)
    arrivals = [(rng.choices(SIZES, WEIGHTS)[0], rng.randint(count, 3 * count)) for _ in range(length)]
    for policy in ("shoal", "first-fit", "spread"):
        nodes = list(cluster(count))
        part = Partition(name="gpu", nodes=tuple(n.name for n in nodes))
        free = [list(range(8)) for _ in nodes]
        ending: dict[int, list[tuple[int, list[int]]]] = {}
        whole: list[float] = []
        turned_away = {s: 0 for s in SIZES}
        for tick, (gpus, duration) in enumerate(arrivals):
            for node, indices in ending.pop(tick, []):
                free[node].extend(indices)
            chosen: tuple[int, list[int]] | None
            if policy == "first-fit":
                chosen = first_fit(free, gpus)
            elif policy == "spread":
                chosen = spread(free, gpus)
            else:
                current = tuple(
                    dataclasses.replace(
                        n,
                        usage=NodeUsage(gpu_indices=frozenset(set(range(8)) - set(f)), jobs=int(len(f) < 8)),
                    )
                    for n, f in zip(nodes, free, strict=True)
                )
                start = place(gpu_job(tick, gpus), part, snapshot(current, ()), Overlay())
                chosen = None
                if isinstance(start, Start):
                    alloc = start.allocation[0]
                    chosen = (
                        next(i for i, n in enumerate(nodes) if n.name == alloc.node),
                        list(alloc.gpu_indices),
                    )
            if chosen is None:
                turned_away[gpus] += 1
            else:
                node, indices = chosen
                for index in indices:
                    free[node].remove(index)
                ending.setdefault(tick + duration, []).append((node, indices))
            if tick >= length // 4:
                whole.append(sum(1 for f in free if len(f) == 8) / count)
        print(
            f"stream nodes={count} jobs={length} {policy:9s}: whole-free nodes {statistics.mean(whole) * 100:5.1f} % "
            f"(mean after warm-up), turned away: 8-GPU {turned_away[8]}, all {sum(turned_away.values())}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=256)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--stream", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    time_cycles(args.nodes, args.jobs, args.seed)
    stream(args.nodes, args.stream, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
