"""Properties of any cycle: capacity is never exceeded and every start is whole (gang allocation)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from ctld.sched.cycle import run_cycle
from ctld.sched.model import Config, GpuRequest, JobRequest, Node, Snapshot
from ctld.sched.resources import node_count_range, total_tasks
from tests.unit.sched.builders import node, snapshot


@st.composite
def nodes(draw: st.DrawFn) -> tuple[Node, ...]:
    count = draw(st.integers(1, 5))
    result = []
    for i in range(count):
        cpus = draw(st.sampled_from([4, 8, 16]))
        gpus = draw(st.integers(0, 4))
        b = node(f"n{i}").cpus(cpus).mem(draw(st.sampled_from([8000, 32000]))).gpus(gpus, "h100")
        used = draw(st.integers(0, cpus))
        b = b.used(cpus=range(used), mem=used * 500, gpus=range(draw(st.integers(0, gpus))))
        if draw(st.booleans()) and draw(st.booleans()):
            b = b.down()
        result.append(b.obj())
    return tuple(result)


@st.composite
def jobs(draw: st.DrawFn, node_count: int) -> list[JobRequest]:
    result = []
    for job_id in range(1, draw(st.integers(1, 8)) + 1):
        fewest = draw(st.integers(1, node_count))
        spread = draw(st.booleans())
        tasks = draw(st.integers(1, 12))
        gpu_kind = draw(st.sampled_from(["none", "per_node", "total", "per_task"]))
        gpu_count = draw(st.integers(1, 3))
        gpus = GpuRequest(
            per_node=gpu_count if gpu_kind == "per_node" else 0,
            total=gpu_count if gpu_kind == "total" else 0,
            per_task=gpu_count if gpu_kind == "per_task" else 0,
        )
        result.append(
            JobRequest(
                job_id=job_id,
                user_id=1000,
                name="j",
                submit_time=job_id,
                partitions=("batch",),
                min_nodes=1 if spread else fewest,
                max_nodes=tasks if spread else 0,
                num_tasks=tasks,
                cpus_per_task=draw(st.integers(1, 3)),
                mem_per_cpu_mb=draw(st.sampled_from([0, 500, 2000])),
                gpus=gpus,
                exclusive=draw(st.integers(0, 4)) == 0,
            )
        )
    return result


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    ns = draw(nodes())
    return snapshot(
        ns, pending=draw(jobs(len(ns))), config=Config(def_mem_per_cpu_mb=draw(st.sampled_from([0, 1000])))
    )


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_cycle_never_exceeds_capacity(snap: Snapshot) -> None:
    result = run_cycle(snap, now=0)
    by_name = {n.name: n for n in snap.nodes}
    cpus: dict[str, list[int]] = defaultdict(list)
    mem: dict[str, int] = defaultdict(int)
    gpus: dict[str, list[int]] = defaultdict(list)
    exclusive: set[str] = set()
    jobs_on: dict[str, int] = defaultdict(int)
    for start in result.starts:
        for alloc in start.allocation:
            node_ = by_name[alloc.node]
            assert node_.available
            cpus[alloc.node].extend(alloc.cpu_ids)
            mem[alloc.node] += alloc.mem_mb
            gpus[alloc.node].extend(alloc.gpu_indices)
            jobs_on[alloc.node] += 1
            if start.exclusive:
                exclusive.add(alloc.node)
    for name, node_ in by_name.items():
        taken_cpus = cpus[name] + list(node_.usage.cpu_ids)
        taken_gpus = gpus[name] + list(node_.usage.gpu_indices)
        assert len(taken_cpus) == len(set(taken_cpus)) and set(taken_cpus) <= set(range(node_.cpus))
        assert mem[name] + node_.usage.mem_mb <= node_.real_memory_mb
        assert len(taken_gpus) == len(set(taken_gpus)) and set(taken_gpus) <= {g.index for g in node_.gpus}
        if name in exclusive:
            assert jobs_on[name] == 1 and node_.usage.jobs == 0


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_every_start_is_whole(snap: Snapshot) -> None:
    result = run_cycle(snap, now=0)
    pending = {j.job_id: j for j in snap.pending}
    for start in result.starts:
        job = pending[start.job_id]
        fewest, most = node_count_range(job)
        names = [a.node for a in start.allocation]
        assert len(names) == len(set(names))
        assert fewest <= len(names) <= most
        tasks = sum(a.tasks for a in start.allocation)
        assert tasks == total_tasks(job, fewest)
        assert all(a.cpus >= a.tasks * job.cpus_per_task for a in start.allocation)
        want_gpus = job.gpus.per_node * len(names) + job.gpus.per_task * tasks + job.gpus.total
        assert start.exclusive or sum(len(a.gpu_indices) for a in start.allocation) == want_gpus
    assert set(result.reasons) | {s.job_id for s in result.starts} == set(pending)
    assert not set(result.reasons) & {s.job_id for s in result.starts}
