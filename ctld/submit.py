"""sbatch/salloc/srun's submit: validate, ask the core whether the job could ever run, build its records
(one per array task), and save them before answering; `--test-only` answers when and where instead."""

from __future__ import annotations

import os
from functools import partial

from ctld import jobs as jobrec
from ctld import reservations as resv
from ctld import snapshot
from ctld.errors import DEPENDENCY_PROBLEM, INVALID_PARTITION, RESOURCE_EXHAUSTED, SlurmError
from ctld.record import JobRecord, with_spec
from ctld.sched import cycle as sched_cycle
from ctld.sched import model as m
from ctld.sched import placement as sched_placement
from ctld.sched import reasons
from ctld.sched import submit as sched_submit
from ctld.sched.dependency import status_index
from ctld.sched.limits import effective_time_limit
from ctld.sched.resources import job_cpus, job_gpus, mem_for
from ctld.state import Caller, ClusterState, group_name, user_name
from ctld.validate import validate_spec
from shoal import hostlist
from shoal.arrayspec import parse_array
from shoal.outpath import stream_resolver
from shoal.v1 import controller_pb2, jobs_pb2


def submit(
    state: ClusterState, spec: jobs_pb2.JobSpec, caller: Caller, test_only: bool
) -> controller_pb2.SubmitJobResponse:
    validate_spec(spec, state.submit_limits, state.is_operator(caller))  # before anything is built
    now = state.now()
    with state.transaction() as tx:
        job = _new_job(state, spec, caller, now)
        state.accounting.fill_account(job)  # partition access (AllowAccounts) sees the default account
        _check_dependencies(spec)
        try:
            req = jobrec.job_request(job, state.nodes, state.cfg)
        except ValueError as exc:
            raise SlurmError(str(exc) or "Invalid job specification") from exc
        state.accrue_usage()
        snap = snapshot.build(state, [req], capacity_only=not test_only)
        refusal = sched_submit.check_submission(req, snap)
        if refusal is not None:  # Slurm's first lines, then its message (the commands split them)
            raise SlurmError("\n".join((*refusal.details, refusal.message)))
        if test_only:
            resv.check_job_access(state, job)
            return _test_only(state, req, snap, now)
        task_ids: tuple[int, ...] = ()
        if spec.array:
            try:
                array = parse_array(spec.array, getattr(state.cfg, "max_array_size", 1001))
            except ValueError as exc:
                raise SlurmError(str(exc)) from exc
            task_ids = array.task_ids
            job.array_max_tasks = array.max_running
        count = max(1, len(task_ids))
        if state.jobs.active + count > state.cfg.max_job_count:
            raise SlurmError(
                "Slurm temporarily unable to accept job, sleeping and retrying", RESOURCE_EXHAUSTED
            )
        state.accounting.admit(job, count, state.jobs.queued())
        resv.check_job_access(state, job)  # after admit: the job's account is known
        if req.dependency.terms and not job.held and spec.begin_time <= now:
            # squeue shows why the job waits from the start, as Slurm, not after the first cycle
            statuses = status_index(snapshot.status(j) for j in state.jobs.values())
            job.state_reason = sched_cycle.dependency_reason(req, statuses) or job.state_reason
        if job.state_reason == reasons.NONE and not req.reservation:
            # a partition that cannot take it (PartitionDown ...) is said at once too, as 22.05
            job.state_reason = sched_cycle.open_partitions(req, snap)[1] or job.state_reason
        first = state.next_job_id
        snap_partitions = {p.name: p for p in snap.partitions}
        mem_per_node = _mem_per_node_for_display(req, snap_partitions[req.partitions[0]], snap.config)
        # what every task shows alike (sizes, memory, time limit) is worked out once, on the prototype
        jobrec.describe_request(
            job,
            req,
            mem_per_node,
            jobrec.largest_node_cpus(state.cfg, state.nodes, req.partitions[0]),
            jobrec.usable_node_count(state.cfg, state.nodes, req.partitions[0]),
        )
        if not (job.min_memory_cpu_mb or job.min_memory_node_mb or req.mem_per_node_mb):
            job.min_memory_cpu_mb = state.cfg.def_mem_per_cpu  # what the job gets by default
        job.time_limit_min = effective_time_limit(req, snap_partitions[req.partitions[0]])
        records: list[JobRecord] = []
        for k in range(count):
            rec = job.copy()
            rec.job_id = first + k
            if task_ids:
                rec.array_job_id = first
                rec.array_task_id = task_ids[k]
            records.append(rec)
        streams = stream_resolver(records[0], "%N")  # the patterns read once; %j, %A, %a per task
        for rec in records:
            rec.std_out, rec.std_err, rec.std_in = streams(rec)
        state.next_job_id = first + count
        tx.save(*records)
        tx.set_meta("next_job_id", str(state.next_job_id))
        tx.on_commit(partial(state.jobs.update, {rec.job_id: rec for rec in records}))  # known once durable
    if not job.held:  # a held job cannot start: nothing for a cycle to do until its release wakes one
        state.submitted(bool(spec.batch))
    return controller_pb2.SubmitJobResponse(job_id=first, pending_note=sched_submit.pending_note(req, snap))


def _new_job(state: ClusterState, spec: jobs_pb2.JobSpec, caller: Caller, now: int) -> JobRecord:
    job = JobRecord()
    s = job.spec = with_spec(spec)  # a new record's own copy, filled in before the job is known
    s.name = s.name or "sbatch"
    s.work_dir = s.work_dir or s.submit_dir or "/tmp"
    partition_names = [p for p in s.partition.split(",") if p] if s.partition else []
    if not partition_names:
        default = state.cfg.default_partition
        if default is None:
            raise SlurmError("No partition specified or system default partition")
        partition_names = [default.name]
    for name in partition_names:
        if name not in state.partitions:
            raise SlurmError(INVALID_PARTITION)
    job.partition = ",".join(partition_names)
    job.user_id = caller.uid
    job.group_id = caller.gid
    job.user_name = user_name(caller.uid)
    job.group_name = group_name(caller.gid)
    job.state = jobs_pb2.PENDING
    job.state_reason = reasons.NONE
    job.submit_time = now
    job.eligible_time = max(now, s.begin_time)
    job.accrue_time = now
    job.time_limit_min = s.time_limit_min
    job.requeue = s.requeue == 1 or (s.requeue < 0 and state.cfg.job_requeue != 0)  # -1: JobRequeue decides
    job.account = s.account
    job.qos = s.qos or "normal"
    job.held = s.hold
    job.batch_flag = 1 if s.batch else 0
    job.array_task_id = -1
    job.alloc_node_sid = f"{s.submit_host or caller.host}:{os.getpid()}"
    job.std_in = s.std_in or "/dev/null"
    if s.hold:
        job.state_reason = reasons.HELD_USER
    elif s.begin_time > now:  # squeue shows it from the start, as 22.05 (measured), not after a cycle
        job.state_reason = reasons.BEGIN_TIME
    if s.switches:  # the wait for them is at most SchedulerParameters max_switch_wait, as Slurm
        longest = state.sched_config.max_switch_wait_s
        s.switch_wait_s = longest if s.switch_wait_s < 0 else min(s.switch_wait_s, longest)
    return job


def _check_dependencies(spec: jobs_pb2.JobSpec) -> None:
    """Refuse only a dependency that does not parse: as 22.05, an id the controller does not know
    (never used, or purged) is accepted and counts as a finished job (ctld/sched/dependency.py)."""
    if not spec.dependency:
        return
    try:
        jobrec.referenced_job_ids(spec)
    except ValueError as exc:
        raise SlurmError(DEPENDENCY_PROBLEM) from exc


def _mem_per_node_for_display(req: m.JobRequest, part: m.Partition, config: m.Config) -> int:
    """Memory per node the pending job asks (ReqTRES), by the core's rules; 0 = a whole node."""
    nodes = max(1, req.min_nodes)
    cpus = -(-job_cpus(req) // nodes)
    gpus = -(-job_gpus(req) // nodes)
    mem = mem_for(req, cpus, m.Node(name="", cpus=cpus, real_memory_mb=0), part, config, gpus)
    return max(0, mem)


def _test_only(
    state: ClusterState, req: m.JobRequest, snap: m.Snapshot, now: int
) -> controller_pb2.SubmitJobResponse:
    found = sched_placement.earliest_start(req, snap, now)
    if found is None:
        raise SlurmError("Requested node configuration is not available")
    start_time, start = found
    return controller_pb2.SubmitJobResponse(
        job_id=state.next_job_id,
        test_start_time=start_time,
        test_cpus=sum(a.cpus for a in start.allocation),
        test_nodes=hostlist.collect(a.node for a in start.allocation),
        test_partition=start.partition,
    )
