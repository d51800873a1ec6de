"""scontrol suspend/resume: a running job stopped in place and continued, as Slurm 22.05 does it.

A suspended job keeps its allocation (CPUs, memory, GPUs: no gang scheduling), its processes are
frozen on every node of the job (noded.suspend), and the time it spends suspended is neither run
time (squeue TIME, RunTime, sacct Elapsed) nor counted against its time limit: EndTime moves by it
on resume. Measured on the real 22.05: SuspendTime= is the latest suspend or resume, SecsPreSuspend=
the run seconds before the latest suspension."""

from __future__ import annotations

from functools import partial

from ctld.errors import (
    ACCESS_DENIED,
    ALREADY_DONE,
    FAILED_PRECONDITION,
    JOB_PENDING,
    PERMISSION_DENIED,
    SlurmError,
)
from ctld.record import JobRecord
from ctld.state import ClusterState, Transaction
from shoal.states import FINISHED_STATES, run_seconds
from shoal.v1 import jobs_pb2

ACTIONS = ("suspend", "resume")
NOT_SUSPENDED = "Job is not suspended"
# what 22.05 answers `scontrol suspend|resume` for a job id it does not know (measured)
UNKNOWN_JOB = "Unexpected message received"


def suspend_or_resume(
    state: ClusterState, tx: Transaction, job: JobRecord, action: str, operator: bool, now: int
) -> None:
    """One job of `scontrol suspend|resume`: operators only, a running (or suspended) job only."""
    if not operator:
        raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
    if job.state == jobs_pb2.PENDING:
        raise SlurmError(JOB_PENDING, FAILED_PRECONDITION)
    if job.state in FINISHED_STATES or job.state == jobs_pb2.COMPLETING or job.final_state:
        raise SlurmError(ALREADY_DONE, FAILED_PRECONDITION)
    if action == "suspend":
        if job.state == jobs_pb2.RUNNING:  # a second suspend is no error (22.05's answer)
            suspend(state, tx, job, now)
    elif job.state != jobs_pb2.SUSPENDED:
        raise SlurmError(NOT_SUSPENDED, FAILED_PRECONDITION)
    else:
        resume(state, tx, job, now)


def suspend(state: ClusterState, tx: Transaction, job: JobRecord, now: int) -> None:
    job.pre_suspend_secs = run_seconds(job, now)
    job.state = jobs_pb2.SUSPENDED
    job.suspend_time = now
    _tell_nodes(state, tx, job, True)


def resume(state: ClusterState, tx: Transaction, job: JobRecord, now: int) -> None:
    settle(job, now)
    job.state = jobs_pb2.RUNNING
    job.gang_suspended = False
    _tell_nodes(state, tx, job, False)


def settle(job: JobRecord, now: int) -> None:
    """Count the suspension now ending (resume, or the job's end while suspended): the job's EndTime
    moves by it, and it is not run time."""
    if job.state != jobs_pb2.SUSPENDED:
        return
    paused = max(now - job.suspend_time, 0)
    job.suspended_secs += paused
    if job.end_time > 0:
        job.end_time += paused
    job.suspend_time = now
    job.state = jobs_pb2.RUNNING
    job.gang_suspended = False


def limit_reached(job: JobRecord, now: int) -> bool:
    """Past the time limit in run time (suspended time does not count)."""
    return job.time_limit_min >= 0 and now >= job.start_time + job.time_limit_min * 60 + job.suspended_secs


def _tell_nodes(state: ClusterState, tx: Transaction, job: JobRecord, stop: bool) -> None:
    for name in sorted({a.node for a in job.allocation} | ({job.batch_host} if job.batch_host else set())):
        node = state.nodes.get(name)
        if node is not None:
            tx.after(partial(state.actions.suspend, node.info, job.job_id, stop))
