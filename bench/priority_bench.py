"""Priority recalculation: priority/multifactor (every factor weighted) for 50,000 pending jobs on 1,000 nodes.

Run from the repository root: `python bench/priority_bench.py`. Prints the best of 3 passes.
"""

from __future__ import annotations

import dataclasses
import sys
import time

sys.path.insert(0, ".")

from ctld.sched.model import Config, PriorityConfig, PriorityInputs  # noqa: E402
from ctld.sched.priority import all_priorities  # noqa: E402
from tests.unit.sched.builders import cluster, job, snapshot  # noqa: E402

JOBS = 50_000


def main() -> None:
    conf = PriorityConfig(
        type="priority/multifactor",
        weight_age=1000,
        weight_fairshare=10000,
        weight_job_size=1000,
        weight_partition=1000,
        weight_qos=1000,
        weight_tres=(("cpu", 1000.0), ("gres/gpu", 2000.0)),
    )
    jobs = [
        dataclasses.replace(
            job(i).tasks(1 + i % 16).gpus_per_node(i % 9).submitted(i).obj(), qos="normal", assoc_id=i % 50
        )
        for i in range(1, JOBS + 1)
    ]
    snap = snapshot(cluster(1000), jobs, config=Config(def_mem_per_cpu_mb=1000, priority=conf))
    inputs = PriorityInputs(qos_priority={"normal": 10}, fairshare={i: 0.5 for i in range(50)})
    snap = dataclasses.replace(snap, priority_inputs=inputs)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        all_priorities(snap, 100_000)
        best = min(best, time.perf_counter() - started)
    print(f"{JOBS} jobs: {best:.3f} s ({best / JOBS * 1e6:.1f} us/job)")


if __name__ == "__main__":
    main()
