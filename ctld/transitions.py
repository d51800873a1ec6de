"""A job's state changes that several lifecycles share: end it, requeue it, lose it with a node, and
terminate it on its other nodes. Called inside `state.transaction()`; the caller saves the job."""

from __future__ import annotations

import logging

from ctld import gpu_idle, job_hooks, job_suspend
from ctld import jobs as jobrec
from ctld import nodes as noderec
from ctld.record import JobRecord, JobState, with_spec
from ctld.sched import reasons
from ctld.state import ClusterState, Transaction
from shoal.v1 import jobs_pb2

log = logging.getLogger("shoal.ctld")

# the Reason an ended job keeps, by how it ended
ENDED_REASONS: dict[int, str] = {
    jobs_pb2.TIMEOUT: reasons.TIME_LIMIT,
    jobs_pb2.NODE_FAIL: reasons.NODE_DOWN,
    jobs_pb2.FAILED: reasons.NON_ZERO_EXIT_CODE,
    jobs_pb2.OUT_OF_MEMORY: reasons.OUT_OF_MEMORY,
}
PREEMPT_REQUEUE_DELAY_S = 5  # a requeued preempted job's BeginTime: after this many seconds


def finish(
    state: ClusterState, job: JobRecord, end: JobState, exit_code: int, exit_signal: int, now: int
) -> None:
    """The job ends as `end` (a JobState) at `now`."""
    job_suspend.settle(job, now)  # ended while suspended: that time is not run time
    job.state = end
    job.final_state = jobs_pb2.JOB_STATE_UNSPECIFIED
    job.exit_code = exit_code
    job.exit_signal = exit_signal
    job.end_time = now
    reason = ENDED_REASONS.get(end, reasons.NONE)
    if end == jobs_pb2.FAILED and exit_signal and not exit_code:
        reason = reasons.RAISED_SIGNAL
    if end == jobs_pb2.CANCELLED and job.gpu_idle_cancelled:
        reason = gpu_idle.REASON  # shoal_gpu_idle_cancel ended it
    job.state_reason = reason
    end_job_steps(job, end, now)
    noderec.note_job_ended(state.nodes, state.jobs.values(), job, now)  # LastBusyTime
    job_hooks.epilog_slurmctld(state.cfg, job)  # on a thread of its own


def end_by_node_failure(state: ClusterState, tx: Transaction, job: JobRecord, now: int) -> None:
    """A node of the job failed: a batch job that may be requeued (JobRequeue, --requeue) runs
    again (its lost run recorded NODE_FAIL), any other ends NODE_FAIL, as in Slurm."""
    if job.batch_flag and job.requeue:
        log.warning("job %d requeued after the failure of its node", job.job_id)
        requeue(state, tx, job, state.now(), ended_as=jobs_pb2.NODE_FAIL, ended_at=now)
    else:
        finish(state, job, jobs_pb2.NODE_FAIL, 0, 0, now)


def requeue(
    state: ClusterState,
    tx: Transaction,
    job: JobRecord,
    now: int,
    ended_as: JobState = jobs_pb2.JOB_STATE_UNSPECIFIED,
    ended_at: int = 0,
    ran: bool = True,
) -> None:
    """Back to pending (reason BeginTime, Restarts+1) with a new submit time, as Slurm: accounting
    then keeps each run as its own record (`sacct -D`), recorded in this same transaction; `ended_as`
    is the state of the run that just ended at `ended_at` (REQUEUED, PREEMPTED, NODE_FAIL; 0 = it was
    already recorded as finished); `ran=False`: that run never reached its node (no start, no `.batch`
    in its record). As 22.05, the job may start again only cred_expire + 1 s later (AuthInfo's,
    120 s by default: EligibleTime=requeue+121 s on the real one, whatever requeued it); a preempted
    job waits at least PREEMPT_REQUEUE_DELAY_S, so the job that preempted it takes the room first."""
    delay = requeue_wait_s(state.cfg.cred_expire, ended_as)
    job_suspend.settle(job, ended_at or now)
    if ended_as:
        end_job_steps(job, jobs_pb2.CANCELLED, ended_at or now)
        run = job.copy()
        run.state = ended_as
        run.final_state = jobs_pb2.JOB_STATE_UNSPECIFIED
        run.end_time = ended_at or now
        if not ran:
            run.start_time = 0
        tx.record_run(run)
    del job.steps[:]
    job.derived_exit_code = job.derived_exit_signal = 0  # the next run's steps' own
    job.prolog_pending = []
    job.next_step_id = 0
    job.submit_time = max(now, job.submit_time + 1)  # a new accounting record even within the second
    job.preempt_time = 0
    job.preempt_eligible_time = 0
    job.state = jobs_pb2.PENDING
    job.final_state = jobs_pb2.JOB_STATE_UNSPECIFIED
    job.restarts += 1
    if not job.held:  # requeuehold's reason (held before its run ended) stays
        job.state_reason = reasons.BEGIN_TIME
    job.eligible_time = now + delay
    job.warn_signal_sent = False
    job.suspend_time = job.suspended_secs = job.pre_suspend_secs = 0  # the next run's own
    job.gang_suspended = False
    job.spec = with_spec(job.spec, begin_time=now + delay)
    jobrec.clear_allocation(job)


def requeue_wait_s(cred_expire: int, ended_as: int) -> int:
    """Seconds a requeued job waits before it is eligible again (see requeue)."""
    wait = cred_expire + 1
    return max(wait, PREEMPT_REQUEUE_DELAY_S) if ended_as == jobs_pb2.PREEMPTED else wait


def terminate_elsewhere(
    state: ClusterState, tx: Transaction, job: JobRecord, reason: str, kill_wait: int | None = None
) -> None:
    """TerminateJob on every node of the job but the batch host of a launched script (that one gets its own call):
    ends the step tasks there (SIGKILL after `kill_wait`, default KillWait)."""
    wait = state.cfg.kill_wait if kill_wait is None else kill_wait
    for a in job.allocation:
        if a.node == job.batch_host and waits_for_script(job):
            continue
        node = state.nodes.get(a.node)
        if node is not None and node.available:
            state.terminate(tx, node, job.job_id, wait, reason)


def waits_for_script(job: JobRecord) -> bool:
    """A batch job whose script was launched: it ends when its batch host reports the script's end.
    Until then (PrologFlags=Alloc: its Prologs still run) it ends at once, as an allocation does, and
    its batch host is terminated like its other nodes."""
    return bool(job.batch_flag) and not job.prolog_pending


def end_step(step: jobs_pb2.JobStep, end: JobState, exit_code: int, exit_signal: int, now: int) -> None:
    """A step ended; the caller saves its job, whose transaction queues the step's accounting record."""
    step.state = end
    step.exit_code = exit_code
    step.exit_signal = exit_signal
    step.end_time = now
    step.launch.ClearField("environment")  # not needed once it ran (and it is the bulk of a step)


def end_job_steps(job: JobRecord, end: JobState, now: int) -> None:
    """The job ended: steps still running end with it (CANCELLED, TIMEOUT, NODE_FAIL ...)."""
    step_state = end if end not in (jobs_pb2.COMPLETED, jobs_pb2.FAILED) else jobs_pb2.CANCELLED
    for step in job.steps:
        if step.state == jobs_pb2.RUNNING:
            end_step(step, step_state, 0, 9 if step_state == jobs_pb2.CANCELLED else 0, now)


def cancel_step(job: JobRecord, step: jobs_pb2.JobStep, now: int) -> None:
    """One step was cancelled (scancel J.S): CANCELLED 0:9 now, as Slurm records it."""
    end_step(step, jobs_pb2.CANCELLED, 0, 9, now)
    derive_exit(job, step)


def derive_exit(job: JobRecord, step: jobs_pb2.JobStep) -> None:
    """DerivedExitCode (sacct, scontrol show job -d): the highest wait status (code, then signal) of the
    job's steps that ended on their own or were cancelled alone; not the batch step, nor steps ended
    with their job (22.05, measured: steps 1:0, 0:15, 2:0 give 2:0; a lone 0:9 gives 0:9; a job
    cancelled with its step running keeps 0:0)."""
    if (step.exit_code, step.exit_signal) > (job.derived_exit_code, job.derived_exit_signal):
        job.derived_exit_code, job.derived_exit_signal = step.exit_code, step.exit_signal
