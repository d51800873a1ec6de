"""A job's life after submit: its end (batch report, failed launch), cancel and signal, time limits,
--signal warnings, and forgetting it after MinJobAge.

Each entry point is one transaction of the cluster state; node calls (terminate, signal) go out after
it commits. Submit is ctld/submit.py, hold/release/requeue/update/top ctld/job_update.py, starting
ctld/applier.py.
"""

from __future__ import annotations

import logging
from functools import partial

from ctld import job_hooks, job_suspend, transitions
from ctld.errors import (
    ACCESS_DENIED,
    ALREADY_DONE,
    FAILED_PRECONDITION,
    INVALID_JOB_ID,
    NOT_FOUND,
    NOT_NOW,
    PERMISSION_DENIED,
)
from ctld.job_select import filtered, job_id_str, select
from ctld.record import JobRecord
from ctld.sched import reasons
from ctld.state import Caller, ClusterState, Transaction
from ctld.transitions import end_by_node_failure, finish, requeue, terminate_elsewhere, waits_for_script
from shoal.states import ACTIVE_STATES, FINISHED_STATES
from shoal.v1 import controller_pb2, jobs_pb2

log = logging.getLogger("shoal.ctld")

PENDING = jobs_pb2.PENDING
RUNNING = jobs_pb2.RUNNING
COMPLETING = jobs_pb2.COMPLETING


# ------------------------------------------------------------------ the end of a run
def launch_failed(
    state: ClusterState, job_id: int, message: str, node_down: bool, requeue_job: bool = False
) -> None:
    """A LaunchBatch RPC failed: requeue when the node is unreachable (or `requeue_job`: PrologSlurmctld
    failed), else fail the job."""
    with state.transaction() as tx:
        job = state.jobs.get(job_id)
        if job is None or job.state != RUNNING:
            return
        if node_down or requeue_job:
            node = state.nodes.get(job.batch_host)
            if node is not None and node_down:
                node.info.not_responding = True
            log.warning("launch of job %d on %s failed (%s); requeued", job_id, job.batch_host, message)
            requeue(
                state, tx, job, state.now(), ended_as=jobs_pb2.NODE_FAIL if node_down else jobs_pb2.REQUEUED
            )
        else:
            log.warning("launch of job %d failed: %s", job_id, message)
            finish(state, job, jobs_pb2.FAILED, exit_code=1, exit_signal=0, now=state.now())
        tx.save(job)
    state.wake.set()


def complete_batch(state: ClusterState, req: controller_pb2.CompleteBatchRequest) -> None:
    """noded reports the end of a batch script (or that its node lost it)."""
    with state.transaction() as tx:
        job = state.jobs.get(req.job_id)
        if job is None or job.state not in ACTIVE_STATES:
            return  # already handled (a replayed report after a noded restart)
        if req.run != job.restarts:
            # a late report of an earlier run (it was requeued meanwhile, e.g. as NODE_FAIL): the
            # run now going on is not the one that ended
            log.info(
                "job %d: ignoring the end of run %d (run %d is current)", job.job_id, req.run, job.restarts
            )
            return
        now = req.end_time or state.now()
        job.batch_usage.CopyFrom(req.usage)  # the .batch step's MaxRSS/TotalCPU in accounting
        # final_state: what the controller ended it as (cancel, time limit, requeue, preemption)
        if job.final_state == jobs_pb2.REQUEUED:
            ended_as = jobs_pb2.PREEMPTED if job.preempt_time else jobs_pb2.REQUEUED
            requeue(state, tx, job, state.now(), ended_as=ended_as, ended_at=now)
        elif job.final_state:
            finish(state, job, job.final_state, req.exit_code, req.exit_signal, now)
        elif req.prolog_failed:  # ctld.job_hooks: requeued held (its node is drained below)
            requeue(state, tx, job, state.now(), ended_as=jobs_pb2.REQUEUED, ended_at=now)
            if "nohold_on_prolog_fail" not in state.cfg.scheduler_parameters:
                job_hooks.hold_requeued(job)
        elif req.node_fail:
            log.warning("job %d lost with node %s: %s", job.job_id, req.node, req.message)
            end_by_node_failure(state, tx, job, now)
        elif req.launch_failed:
            log.warning("job %d failed to launch on %s: %s", job.job_id, req.node, req.message)
            # noded's exit_signal: 53 when the output/error file could not be opened (22.05's 0:53)
            finish(
                state,
                job,
                jobs_pb2.FAILED,
                req.exit_code or (0 if req.exit_signal else 1),
                req.exit_signal,
                now,
            )
            if req.exit_signal:
                job.state_reason = reasons.LAUNCH_FAILURE
        elif req.oom:
            finish(state, job, jobs_pb2.OUT_OF_MEMORY, req.exit_code, req.exit_signal, now)
        elif req.exit_code == 0 and req.exit_signal == 0:
            finish(state, job, jobs_pb2.COMPLETED, 0, 0, now)
        else:
            finish(state, job, jobs_pb2.FAILED, req.exit_code, req.exit_signal, now)
        tx.save(job)
        terminate_elsewhere(state, tx, job, "complete")
        # and on the batch host: nothing of an ended job may run on (a no-op when it has ended
        # there; a requeued one was terminated before, and its next run must not be hit)
        host = state.nodes.get(req.node)
        if host is not None and (req.prolog_failed or req.epilog_failed):
            reason = job_hooks.PROLOG_ERROR if req.prolog_failed else job_hooks.EPILOG_ERROR
            job_hooks.drain(host.info, reason, now, req.hook_message or req.message)
            tx.save_node(host)
        if (
            job.state in FINISHED_STATES
            and host is not None
            and host.registered
            and not host.info.not_responding
        ):
            state.terminate(tx, host, job.job_id, state.cfg.kill_wait, "ended")
    state.batch_ended()


# ------------------------------------------------------------------ cancel / signal
def signal_jobs(
    state: ClusterState, req: controller_pb2.SignalJobsRequest, caller: Caller
) -> controller_pb2.SignalJobsResponse:
    """scancel: cancel or signal the named (or filtered) jobs; one result per job that could not be."""
    out = controller_pb2.SignalJobsResponse()
    now = state.now()
    with state.transaction() as tx:
        filters = bool(
            req.filter_user or req.name or req.states or req.partition or req.account or req.nodelist
        )
        groups: list[tuple[str, list[JobRecord]]]
        if req.job_ids:
            groups = select(state, req.job_ids)
            if filters:
                allowed = {j.job_id for j in filtered(state, req)}
                groups = [(t, [j for j in js if j.job_id in allowed]) for t, js in groups]
        else:
            groups = [(str(j.job_id), [j]) for j in filtered(state, req)]
        for text, found in groups:
            if not found:
                if not filters:
                    out.results.add(job_id=text, code=NOT_FOUND, message=INVALID_JOB_ID)
                continue
            live = [j for j in found if j.state not in FINISHED_STATES]
            if live and len(found) > 1:
                found = live  # an array's finished tasks are skipped, as Slurm does
            step = text.partition(".")[2]
            for job in found:
                code, message = _signal_one(state, tx, job, req, caller, now, step)
                if code:  # named as asked: scancel words a step's refusal "job step id J.S"
                    out.results.add(
                        job_id=job_id_str(job) + (f".{step}" if step else ""), code=code, message=message
                    )
                else:
                    tx.save(job)
    state.wake.set()
    return out


def _signal_one(
    state: ClusterState,
    tx: Transaction,
    job: JobRecord,
    req: controller_pb2.SignalJobsRequest,
    caller: Caller,
    now: int,
    step: str = "",
) -> tuple[int, str]:
    if not state.may_manage(caller, job):  # its owner, an operator, a coordinator of its account
        return PERMISSION_DENIED, ACCESS_DENIED
    if job.state in FINISHED_STATES or job.state == COMPLETING:
        if step:  # 22.05: a step of an ended job is an unknown one (scancel exits 1, not silent)
            return NOT_FOUND, INVALID_JOB_ID
        return FAILED_PRECONDITION, ALREADY_DONE
    sig = req.signal
    if step.isdigit() and job.state != PENDING:
        _signal_step(state, tx, job, int(step), sig, now)
        return 0, ""
    if step == "extern":
        return 0, ""
    batch_only = req.batch_only or step == "batch"
    if batch_only and sig == 0:
        sig = 9  # as Slurm: `scancel -b` alone kills the batch shell (the job ends FAILED 0:9)
    if job.state == PENDING:
        if sig not in (0, 9):
            return FAILED_PRECONDITION, NOT_NOW
        if job.held or job.state_reason in (reasons.DEPENDENCY, reasons.DEPENDENCY_NEVER):
            job.eligible_time = 0  # never eligible: EligibleTime=Unknown, and sacct's windows skip it
        finish(state, job, jobs_pb2.CANCELLED, 0, 0, now)
        job.cancelled_by_uid = caller.uid
        job.cancelled_by = str(caller.uid)
        return 0, ""
    if sig == 0 or (sig == 9 and not batch_only):
        cancel_running(state, tx, job, caller.uid, now)
        return 0, ""
    signal_job(state, tx, job, sig, batch_only, req.full)
    return 0, ""


def cancel_running(
    state: ClusterState, tx: Transaction, job: JobRecord, uid: int, now: int, reason: str = "cancel"
) -> None:
    """End a running job as CANCELLED by `uid` (scancel; shoal_gpu_idle_cancel: reason "gpu_idle", which
    noded tells the job's stderr): SIGTERM, KillWait, SIGKILL on its nodes; a batch job is COMPLETING
    until its script is gone."""
    job_suspend.settle(job, now)  # a suspended job is thawed on its nodes to die (noded)
    job.cancelled_by_uid = uid
    job.cancelled_by = str(uid)
    terminate_elsewhere(state, tx, job, reason)
    if not waits_for_script(job):  # no batch script to wait for: an allocation ends at once
        finish(state, job, jobs_pb2.CANCELLED, 0, 0, now)
        return
    job.state = COMPLETING
    job.final_state = jobs_pb2.CANCELLED
    job.end_time = now
    state.terminate(tx, state.nodes[job.batch_host], job.job_id, state.cfg.kill_wait, reason)


def _signal_step(
    state: ClusterState, tx: Transaction, job: JobRecord, step_id: int, sig: int, now: int
) -> None:
    """`scancel [-s SIG] J.S`: that step's tasks on its nodes; the job runs on. Without a signal the
    step ends CANCELLED (SIGTERM, KillWait, SIGKILL). A step that does not run is no error (Slurm's)."""
    step = next((s for s in job.steps if s.step_id == step_id and s.state == RUNNING), None)
    if step is None:
        return
    for part in step.layout:
        node = state.nodes.get(part.node)
        if node is not None:
            tx.after(partial(state.actions.signal_step, node.info, job.job_id, step_id, sig))
    if sig == 0 or sig == 9:
        transitions.cancel_step(job, step, now)


def signal_job(
    state: ClusterState, tx: Transaction, job: JobRecord, sig: int, batch_only: bool, full: bool
) -> None:
    """Deliver a signal where Slurm does: by default to every step on every node of the job but
    never to the batch shell (a tool's step catches it, the shell does not die of it); -b/B: to
    the shell alone; -f to the shell, what it started and every step."""
    tx.after(
        partial(state.actions.signal, state.nodes[job.batch_host].info, job.job_id, sig, batch_only, full)
    )
    if not batch_only:
        for name in sorted({a.node for a in job.allocation} - {job.batch_host}):
            if name in state.nodes:
                tx.after(partial(state.actions.signal, state.nodes[name].info, job.job_id, sig, False, False))


# ------------------------------------------------------------------ housekeeping
def enforce_time_limits(state: ClusterState, tx: Transaction, now: int) -> None:
    """Jobs past their time limit end TIMEOUT (their nodes terminate them); --signal warnings go out;
    a preempted job in its grace time turns COMPLETING at its new end time."""
    for job in state.jobs.values():
        if job.state != RUNNING:
            continue
        if job.final_state:  # preempted: RUNNING through its grace time, then COMPLETING
            if now >= job.end_time:
                job.state = COMPLETING
                tx.save(job)
            continue
        if job_suspend.limit_reached(job, now):
            terminate_elsewhere(state, tx, job, "timeout")
            tx.save(job)
            if not waits_for_script(job):
                finish(state, job, jobs_pb2.TIMEOUT, 0, 0, now)
                continue
            job.state = COMPLETING
            job.final_state = jobs_pb2.TIMEOUT
            state.terminate(tx, state.nodes[job.batch_host], job.job_id, state.cfg.kill_wait, "timeout")
        elif (
            job.spec.signal_num
            and not job.warn_signal_sent
            and job.time_limit_min >= 0
            and job_suspend.limit_reached(job, now + job.spec.signal_secs)
        ):
            job.warn_signal_sent = True
            signal_job(state, tx, job, job.spec.signal_num, job.spec.signal_batch_only, False)
            tx.save(job)


def forget_finished(state: ClusterState, tx: Transaction, now: int) -> None:
    """Finished jobs older than MinJobAge leave memory and the store (accounting keeps them)."""
    expired = [
        j.job_id
        for j in state.jobs.values()
        if j.state in FINISHED_STATES and now - j.end_time >= state.cfg.min_job_age
    ]
    for job_id in expired:
        tx.delete_job(job_id)
        del state.jobs[job_id]
