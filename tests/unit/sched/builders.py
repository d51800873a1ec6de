"""Fluent builders for the scheduler core's snapshot: `node("n1").cpus(16).gpus(8, "h100").obj()`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ctld.sched.dependency import parse_dependency
from ctld.sched.model import (
    UNLIMITED,
    Config,
    Gpu,
    GpuRequest,
    JobRequest,
    JobStatus,
    Node,
    NodeUsage,
    Partition,
    Phase,
    RunningJob,
    Snapshot,
)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._node = Node(name=name, cpus=16, real_memory_mb=64000)

    def _set(self, **changes: object) -> NodeBuilder:
        self._node = dataclasses.replace(self._node, **changes)  # type: ignore[arg-type]
        return self

    def cpus(self, count: int) -> NodeBuilder:
        return self._set(cpus=count)

    def mem(self, mb: int) -> NodeBuilder:
        return self._set(real_memory_mb=mb)

    def gpus(self, count: int, type: str = "") -> NodeBuilder:
        return self._set(gpus=tuple(Gpu(i, type) for i in range(count)))

    def features(self, *names: str) -> NodeBuilder:
        return self._set(features=frozenset(names))

    def weight(self, weight: int) -> NodeBuilder:
        return self._set(weight=weight)

    def down(self) -> NodeBuilder:
        return self._set(available=False)

    def cores(self, sockets: int, cores_per_socket: int, threads_per_core: int) -> NodeBuilder:
        return self._set(
            sockets=sockets, cores_per_socket=cores_per_socket, threads_per_core=threads_per_core
        )

    def used(
        self, cpus: Iterable[int] = (), mem: int = 0, gpus: Iterable[int] = (), exclusive: bool = False
    ) -> NodeBuilder:
        cpu_ids = frozenset(cpus)
        gpu_ids = frozenset(gpus)
        jobs = 1 if (cpu_ids or mem or gpu_ids or exclusive) else 0
        return self._set(usage=NodeUsage(cpu_ids, mem, gpu_ids, exclusive, jobs))

    def obj(self) -> Node:
        return self._node


class JobBuilder:
    def __init__(self, job_id: int) -> None:
        self._job = JobRequest(
            job_id=job_id, user_id=1000, name=f"job{job_id}", submit_time=job_id, partitions=("batch",)
        )

    def _set(self, **changes: object) -> JobBuilder:
        self._job = dataclasses.replace(self._job, **changes)  # type: ignore[arg-type]
        return self

    def nodes(self, fewest: int, most: int = 0) -> JobBuilder:
        return self._set(min_nodes=fewest, max_nodes=most)

    def most_nodes(self, count: int) -> JobBuilder:
        """-N A-B as the controller passes it: start on up to `count` nodes when they are free."""
        return self._set(spread_nodes=count)

    def tasks(self, count: int, spread: bool = False) -> JobBuilder:
        """-n; `spread` = no -N given (the controller then lets the job use up to n nodes)."""
        return self._set(num_tasks=count, max_nodes=count if spread else self._job.max_nodes)

    def tasks_per_node(self, count: int) -> JobBuilder:
        return self._set(ntasks_per_node=count)

    def cpus_per_task(self, count: int) -> JobBuilder:
        return self._set(cpus_per_task=count)

    def mem(self, mb: int) -> JobBuilder:
        return self._set(mem_per_node_mb=mb)

    def mem_per_cpu(self, mb: int) -> JobBuilder:
        return self._set(mem_per_cpu_mb=mb)

    def gpus_per_node(self, count: int, type: str = "") -> JobBuilder:
        return self._set(gpus=GpuRequest(per_node=count, type=type))

    def gpus(self, total: int, type: str = "") -> JobBuilder:
        return self._set(gpus=GpuRequest(total=total, type=type))

    def gpus_per_task(self, count: int, type: str = "") -> JobBuilder:
        return self._set(gpus=GpuRequest(per_task=count, type=type))

    def time(self, minutes: int) -> JobBuilder:
        return self._set(time_limit_min=minutes)

    def nodelist(self, *names: str) -> JobBuilder:
        return self._set(required_nodes=frozenset(names))

    def exclude(self, *names: str) -> JobBuilder:
        return self._set(excluded_nodes=frozenset(names))

    def features(self, *names: str) -> JobBuilder:
        return self._set(features=frozenset(names))

    def exclusive(self) -> JobBuilder:
        return self._set(exclusive=True)

    def partition(self, *names: str) -> JobBuilder:
        return self._set(partitions=names)

    def begin(self, when: int) -> JobBuilder:
        return self._set(begin_time=when)

    def hold(self) -> JobBuilder:
        return self._set(held_user=True)

    def admin_hold(self) -> JobBuilder:
        return self._set(held_admin=True)

    def depends(self, text: str) -> JobBuilder:
        return self._set(dependency=parse_dependency(text))

    def array(self, array_job_id: int, task_id: int, max_running: int = 0) -> JobBuilder:
        return self._set(array_job_id=array_job_id, array_task_id=task_id, array_max_running=max_running)

    def user(self, uid: int) -> JobBuilder:
        return self._set(user_id=uid)

    def name(self, name: str) -> JobBuilder:
        return self._set(name=name)

    def nice(self, value: int) -> JobBuilder:
        return self._set(nice=value)

    def priority(self, value: int) -> JobBuilder:
        return self._set(admin_priority=value)

    def switches(self, count: int, wait_s: int = -1) -> JobBuilder:
        return self._set(max_switches=count, switch_wait_s=wait_s)

    def submitted(self, when: int) -> JobBuilder:
        return self._set(submit_time=when)

    def obj(self) -> JobRequest:
        return self._job


def node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def job(job_id: int) -> JobBuilder:
    return JobBuilder(job_id)


def partition(name: str = "batch", nodes: Iterable[str] = (), **changes: object) -> Partition:
    return dataclasses.replace(Partition(name=name, nodes=tuple(nodes)), **changes)  # type: ignore[arg-type]


def status(job_id: int, phase: Phase, **changes: object) -> JobStatus:
    base = JobStatus(job_id=job_id, user_id=1000, name=f"job{job_id}", phase=phase)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def running(job_id: int, nodes: Iterable[str], end_time: int, **changes: object) -> RunningJob:
    return dataclasses.replace(RunningJob(job_id, tuple(nodes), end_time), **changes)  # type: ignore[arg-type]


def cluster(count: int = 4, prefix: str = "node", **kw: int | str) -> tuple[Node, ...]:
    """`count` identical nodes like the reference cluster: 16 CPUs, 64000 MB, 8 H100s each."""
    gpus = int(kw.get("gpus", 8))
    return tuple(
        node(f"{prefix}{i}")
        .cpus(int(kw.get("cpus", 16)))
        .mem(int(kw.get("mem", 64000)))
        .gpus(gpus, str(kw.get("gpu_type", "h100")))
        .obj()
        for i in range(1, count + 1)
    )


def snapshot(
    nodes: Iterable[Node] = (),
    pending: Iterable[JobRequest] = (),
    partitions: Iterable[Partition] | None = None,
    running: Iterable[RunningJob] = (),
    jobs: Iterable[JobStatus] = (),
    config: Config | None = None,
) -> Snapshot:
    """A snapshot; without partitions, one "batch" partition holds every node (MaxTime=UNLIMITED)."""
    node_tuple = tuple(nodes)
    parts = (
        tuple(partitions)
        if partitions is not None
        else (Partition(name="batch", nodes=tuple(n.name for n in node_tuple), max_time_min=UNLIMITED),)
    )
    return Snapshot(
        nodes=node_tuple,
        partitions=parts,
        pending=tuple(pending),
        running=tuple(running),
        jobs=tuple(jobs),
        config=config or Config(def_mem_per_cpu_mb=1000),
    )
