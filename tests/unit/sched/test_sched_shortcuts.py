"""The scheduler's shortcuts decide nothing: node indexes, the "same request already failed" memo,
backfill's incrementally grown timeline states, and one answer for an array's tasks asking alike.

`placement.SHORTCUTS` off, every job scans every candidate node as written in placement.py and
backfill builds each window's overlay afresh from every hold; on, nodes that cannot hold the job's
smallest slot are skipped, a request shape that failed on an unchanged overlay is answered from
the memo, and windows share and grow their overlays. Over random clusters (GPU types, weights, features,
down nodes, partly used nodes, running jobs with ends, ExclusiveUser, a reservation) and queues of many identical shapes (so the
memo is hit), and runs of an array's tasks asking alike (ctld/sched/siblings.py), both schedulers
must give the same starts, reasons and planned starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from ctld.sched import placement
from ctld.sched.cycle import run_cycle
from ctld.sched.model import (
    UNLIMITED,
    Config,
    GpuRequest,
    JobRequest,
    Node,
    NodeAllocation,
    NodeUsage,
    Partition,
    Reservation,
    RunningJob,
    Snapshot,
)
from tests.unit.sched.builders import node

NOW = 100_000


@contextmanager
def shortcuts(on: bool) -> Iterator[None]:
    """All shortcuts on (the indexes even for these few nodes), or all off."""
    before = placement.SHORTCUTS, placement.INDEX_MIN_NODES
    placement.SHORTCUTS, placement.INDEX_MIN_NODES = on, 1
    try:
        yield
    finally:
        placement.SHORTCUTS, placement.INDEX_MIN_NODES = before


@st.composite
def nodes(draw: st.DrawFn) -> tuple[Node, ...]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        cpus = draw(st.sampled_from([2, 4, 8]))
        gpu_count = draw(st.sampled_from([0, 2, 4]))
        built = (
            node(f"n{i}")
            .cpus(cpus)
            .mem(draw(st.sampled_from([4000, 16000])))
            .gpus(gpu_count, draw(st.sampled_from(["", "a100", "h100"])))
            .weight(draw(st.sampled_from([1, 1, 5])))
            .features(*draw(st.sampled_from([(), ("ib",)])))
        )
        if draw(st.integers(0, 7)) == 0:
            built = built.down()
        used_cpus = draw(st.integers(0, cpus))
        used_gpus = draw(st.integers(0, gpu_count))
        if used_cpus or used_gpus:
            built = built.used(range(used_cpus), 500 * used_cpus, range(used_gpus))
        out.append(built.obj())
    return tuple(out)


def requests(draw: st.DrawFn, count: int, names: list[str]) -> list[JobRequest]:
    """A few shapes, each repeated, so identical requests meet the same overlay."""
    shapes = [draw(shape_of(names)) for _ in range(draw(st.integers(1, 4)))]
    jobs = []
    for job_id in range(1, count + 1):
        base = draw(st.sampled_from(shapes))
        limit = draw(st.sampled_from([base.time_limit_min, base.time_limit_min, 5, 30, 120]))
        jobs.append(
            dataclasses.replace(
                base,
                job_id=job_id,
                submit_time=job_id,
                user_id=draw(st.sampled_from([1, 2])),
                time_limit_min=limit,
            )
        )
    if draw(st.booleans()):  # a run of tasks of one array, most asking alike (the siblings shortcut)
        first = count + 1
        base = dataclasses.replace(draw(st.sampled_from(shapes)), array_job_id=first, submit_time=first)
        for task in range(draw(st.integers(2, 30))):
            limit = draw(st.sampled_from([base.time_limit_min] * 4 + [5]))
            held = draw(st.integers(0, 9)) == 0
            jobs.append(
                dataclasses.replace(
                    base, job_id=first + task, array_task_id=task, time_limit_min=limit, held_user=held
                )
            )
    return jobs


@st.composite
def shape_of(draw: st.DrawFn, names: list[str]) -> JobRequest:
    spread = draw(st.booleans())
    fewest = draw(st.integers(1, 3))
    tasks = draw(st.integers(1, 6))
    gpu_kind = draw(st.sampled_from(["none", "none", "per_node", "total", "per_task"]))
    gpu_count = draw(st.integers(1, 3))
    gpus = GpuRequest(
        per_node=gpu_count if gpu_kind == "per_node" else 0,
        total=gpu_count if gpu_kind == "total" else 0,
        per_task=1 if gpu_kind == "per_task" else 0,
        type=draw(st.sampled_from(["", "", "h100"])) if gpu_kind != "none" else "",
    )
    return JobRequest(
        job_id=0,
        user_id=1,
        name="j",
        submit_time=0,
        partitions=draw(st.sampled_from([("batch",), ("small",), ("small", "batch")])),
        min_nodes=1 if spread else fewest,
        max_nodes=tasks if spread else 0,
        num_tasks=tasks,
        cpus_per_task=draw(st.sampled_from([1, 1, 2])),
        mem_per_cpu_mb=draw(st.sampled_from([0, 500])),
        gpus=gpus,
        time_limit_min=draw(st.sampled_from([5, 60, UNLIMITED])),
        exclusive=draw(st.integers(0, 5)) == 0,
        excluded_nodes=frozenset(draw(st.sampled_from([(), names[:1]]))),
        features=frozenset(draw(st.sampled_from([(), (), ("ib",)]))),
        required_nodes=frozenset(draw(st.sampled_from([(), (), (), names[-1:]]))),
    )


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    cluster = draw(nodes())
    names = [n.name for n in cluster]
    running = tuple(
        RunningJob(
            9000 + i,
            (n.name,),
            NOW + draw(st.integers(1, 7200)),
            "batch",
            (
                NodeAllocation(
                    n.name, tuple(sorted(n.usage.cpu_ids)), n.usage.mem_mb, tuple(sorted(n.usage.gpu_indices))
                ),
            ),
        )
        for i, n in enumerate(cluster)
        if n.usage != NodeUsage() and draw(st.booleans())
    )
    config = Config(
        def_mem_per_cpu_mb=draw(st.sampled_from([0, 1000])),
        scheduler=draw(st.sampled_from(["sched/builtin", "sched/backfill"])),
        bf_reservations=draw(st.sampled_from([0, 1])),
        bf_max_job_array_resv=draw(st.sampled_from([20, 2, 0])),
    )
    reservations = tuple(
        Reservation(
            name="r",
            start_time=(begin := NOW + draw(st.sampled_from([-600, 0, 1800, 7200]))),
            end_time=begin + draw(st.sampled_from([600, 3600, 86400])),
            nodes=frozenset(names[: draw(st.integers(1, len(names)))]),
            flags=frozenset(draw(st.sampled_from([(), ("MAINT",), ("FLEX",)]))),
        )
        for _ in range(draw(st.integers(0, 1)))
    )
    pending = requests(draw, draw(st.integers(1, 20)), names)
    if reservations:
        pending = [dataclasses.replace(j, reservation=draw(st.sampled_from(["", "", "r"]))) for j in pending]
    return Snapshot(
        nodes=cluster,
        partitions=(
            Partition(name="batch", nodes=tuple(names), max_time_min=UNLIMITED),
            Partition(
                name="small",
                nodes=tuple(names[: max(1, len(names) // 2)]),
                max_time_min=UNLIMITED,
                exclusive_user=draw(st.booleans()),
            ),
        ),
        pending=tuple(pending),
        running=running,
        jobs=(),
        config=config,
        reservations=reservations,
    )


@settings(max_examples=400, deadline=None)
@given(snapshots())
def test_shortcuts_change_no_decision(snap: Snapshot) -> None:
    with shortcuts(False):
        plain = run_cycle(snap, NOW)
    with shortcuts(True):
        fast = run_cycle(snap, NOW)
    assert fast.starts == plain.starts
    assert fast.reasons == plain.reasons
    assert fast.planned == plain.planned
