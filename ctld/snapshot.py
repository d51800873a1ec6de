"""The core's input, built from the cluster state: a pure function of it (no store write, no clock read
beyond the state's `now`). Callers hold the lock (`state.transaction()` or `state.reading()`) and accrue
fair-share usage first (`state.accrue_usage()`) when they want it current."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace

from ctld.decisions import running_view
from ctld.gpus import snapshot_gpus
from ctld.record import JobRecord
from ctld.sched import model as m
from ctld.sched.priority import MULTIFACTOR
from ctld.sched.reservations import is_active
from ctld.state import ClusterState
from shoal.states import ACTIVE_STATES
from shoal.v1 import controller_pb2, jobs_pb2


def usage(state: ClusterState) -> dict[str, m.NodeUsage]:
    """What the active jobs hold on each node."""
    cpu: dict[str, set[int]] = {}
    mem: dict[str, int] = {}
    gpu: dict[str, set[int]] = {}
    excl: set[str] = set()
    count: dict[str, int] = {}
    users: dict[str, set[int]] = {}
    user_excl: set[str] = set()
    for job in state.jobs.values():
        if job.state not in ACTIVE_STATES:
            continue
        for a in job.allocation:
            cpu.setdefault(a.node, set()).update(a.cpu_ids)
            mem[a.node] = mem.get(a.node, 0) + a.mem_mb
            gpu.setdefault(a.node, set()).update(a.gpu_indices)
            count[a.node] = count.get(a.node, 0) + 1
            users.setdefault(a.node, set()).add(job.user_id)
            if not job.oversubscribe:
                excl.add(a.node)
            part = state.partitions.get(job.partition)
            if part is not None and part.exclusive_user:
                user_excl.add(a.node)
    return {
        name: m.NodeUsage(
            cpu_ids=frozenset(cpu.get(name, ())),
            mem_mb=mem.get(name, 0),
            gpu_indices=frozenset(gpu.get(name, ())),
            exclusive=name in excl,
            jobs=count.get(name, 0),
            users=frozenset(users.get(name, ())),
            user_exclusive=name in user_excl,
        )
        for name in state.nodes
    }


def build(
    state: ClusterState,
    pending: Iterable[m.JobRequest],
    *,
    capacity_only: bool = False,
    node_usage: dict[str, m.NodeUsage] | None = None,
) -> m.Snapshot:
    """The core's input. `capacity_only` (the submit-time "could it ever run" question) skips what
    only "now" and "when" need: usage, running jobs and the statuses of every known job.
    `node_usage`: `usage(state)` when the caller has it already."""
    accounting = state.accounting
    pending = tuple(accounting.attach(r, state.jobs.get(r.job_id)) for r in pending)
    if capacity_only:
        node_usage = {name: m.NodeUsage() for name in state.nodes}
    elif node_usage is None:
        node_usage = usage(state)
    nodes = tuple(
        m.Node(
            name=n.conf.name,
            cpus=n.conf.cpus,
            real_memory_mb=n.conf.real_memory,
            gpus=snapshot_gpus(n.info.hardware.gpus, n.gpu_types),
            features=frozenset(n.conf.features),
            weight=n.conf.weight,
            partitions=frozenset(n.info.partitions),
            available=n.available,
            usage=node_usage[n.conf.name],
            sockets=n.conf.sockets,
            cores_per_socket=n.conf.cores_per_socket,
            threads_per_core=n.conf.threads_per_core,
        )
        for n in state.nodes.values()
    )
    running = tuple(
        running_view(
            j,
            assoc_id=accounting.assoc_id(j),
            qos=j.qos,
            priority=j.priority,
            user_id=j.user_id,
            start_time=j.start_time,
            releasing=j.state == jobs_pb2.COMPLETING
            or bool(j.final_state),  # ending (or preempted, in grace)
            suspended=j.state == jobs_pb2.SUSPENDED,
            gang_suspended=j.state == jobs_pb2.SUSPENDED and j.gang_suspended,
        )
        for j in ([] if capacity_only else state.jobs.values())
        if j.state in ACTIVE_STATES
    )
    # statuses serve dependencies and array throttles only: skip the pass over every job otherwise
    needs_statuses = any(r.dependency.terms or r.array_max_running for r in pending)
    statuses = tuple(status(j) for j in state.jobs.values()) if needs_statuses else ()
    multifactor = state.sched_config.priority.type == MULTIFACTOR
    return m.Snapshot(
        nodes=nodes,
        partitions=state.partitions_view,
        pending=tuple(pending),
        running=running,
        jobs=statuses,
        config=state.sched_config,
        accounting=limits_with_usage(state),
        # the submit-time check never ranks jobs: the fair-share factors are a cycle's cost only
        priority_inputs=priority_inputs(state) if multifactor and not capacity_only else None,
        reservations=tuple(reservation(info) for info in state.reservations.values()),
        topology=state.topology,
        qos_preempt=accounting.qos_preempt(),
    )


def priority_inputs(state: ClusterState) -> m.PriorityInputs:
    """Accounting's priorities plus the fair-share factors of the usage accrued so far."""
    accounting = state.accounting
    return replace(accounting.priority_inputs(), fairshare=state.shares.factors(accounting.share_tree()))


def limits_with_usage(state: ClusterState) -> m.AccountingLimits | None:
    """The enforced association/QOS limits with the usage accrued so far (GrpTRESMins, GrpWall)."""
    limits = state.accounting.limits()
    if limits is None:
        return None
    assoc_used, qos_used = state.shares.used_minutes()
    return replace(limits, assoc_used=assoc_used, qos_used=qos_used)


def reservation(info: controller_pb2.ReservationInfo) -> m.Reservation:
    """A reservation as the core sees it."""
    return m.Reservation(
        name=info.name,
        start_time=info.start_time,
        end_time=info.end_time,
        nodes=frozenset(info.nodes),
        flags=frozenset(info.flags),
        utc_offset_s=time.localtime(info.start_time).tm_gmtoff,  # WEEKDAY/WEEKEND: the site's days
    )


def maint_nodes(state: ClusterState, now: int) -> set[str]:
    """Nodes in an active MAINT reservation (shown as MAINT by sinfo and scontrol)."""
    return {
        name
        for info in state.reservations.values()
        if "MAINT" in info.flags and is_active(reservation(info), now)
        for name in info.nodes
    }


def status(job: JobRecord) -> m.JobStatus:
    """What dependencies and array throttles need of a job."""
    state = job.state
    if state == jobs_pb2.PENDING:
        phase = m.Phase.PENDING
    elif state in ACTIVE_STATES:
        phase = m.Phase.ACTIVE
    elif state == jobs_pb2.COMPLETED:
        phase = m.Phase.COMPLETED
    elif state == jobs_pb2.CANCELLED:
        phase = m.Phase.CANCELLED
    else:
        phase = m.Phase.FAILED
    return m.JobStatus(
        job_id=job.job_id,
        user_id=job.user_id,
        name=job.spec.name,
        phase=phase,
        array_job_id=job.array_job_id,
        array_task_id=job.array_task_id,
        end_time=job.end_time,
    )
