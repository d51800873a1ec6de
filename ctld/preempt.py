"""Applying preemptions: every `Preemption` the core decides ends its job the same way, whatever chose it.

The job gets SIGCONT+SIGTERM at once and SIGKILL after the grace time (noded's stepd runs that
sequence with kill_wait = the grace time, or KillWait when the grace time is 0); its steps on other
nodes end too. As in Slurm it shows RUNNING until its new end time (now + grace), COMPLETING after;
it holds its resources (the core keeps that room for the job that preempted it: `final_state` set
makes it `releasing`) until its batch script is gone; then `job_lifecycle.complete_batch` ends it
PREEMPTED (mode CANCEL) or requeues it (mode REQUEUE: the run is recorded PREEMPTED, the job goes
back to PENDING with reason BeginTime and Restarts+1). A job that cannot be requeued (--no-requeue,
or an salloc/srun allocation, which has no script to run again) is cancelled instead, as in Slurm.
Mode SUSPEND stops the job in place instead (ctld/job_suspend.py: its processes frozen on every node,
SUSPENDED, its time limit paused) and marks it `gang_suspended`: the core lends its CPUs/GPUs to the
preemptor, which starts in the same cycle, and resumes it once they are free (applier). As 22.05 shows
it: JobState=SUSPENDED, Reason=None, PreemptTime=None.
Called inside the applier's transaction; the node calls run after it commits.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ctld import job_suspend, transitions
from ctld.record import JobRecord
from ctld.sched.model import Preemption
from ctld.sched.preemption import REQUEUE, SUSPEND
from ctld.state import ClusterState, Transaction
from ctld.transitions import finish, terminate_elsewhere, waits_for_script
from shoal.v1 import jobs_pb2

log = logging.getLogger("shoal.ctld")


def apply_preemptions(
    state: ClusterState, tx: Transaction, preemptions: Iterable[Preemption], now: int
) -> list[JobRecord]:
    """Start ending each preempted job; returns the jobs changed (the caller saves them)."""
    changed: list[JobRecord] = []
    for decision in preemptions:
        job = state.jobs.get(decision.job_id)
        if job is None or job.state != jobs_pb2.RUNNING:
            continue  # ended meanwhile, or already ending
        if decision.mode == SUSPEND:
            log.info("job %d suspended: %s", job.job_id, decision.reason or "preempted")
            job_suspend.suspend(state, tx, job, now)
            job.gang_suspended = True
            changed.append(job)
            continue
        requeue = decision.mode == REQUEUE and bool(job.batch_flag) and job.requeue
        kill_wait = decision.grace_time_s or state.cfg.kill_wait
        log.info(
            "job %d %s: %s, grace time %ds",
            job.job_id,
            "requeued" if requeue else "cancelled",
            decision.reason or "preempted",
            decision.grace_time_s,
        )
        job.preempt_time = now
        changed.append(job)
        terminate_elsewhere(state, tx, job, "preempt", kill_wait)
        if requeue and not waits_for_script(job):  # preempted during its Prologs (PrologFlags=Alloc)
            transitions.requeue(state, tx, job, now, ended_as=jobs_pb2.PREEMPTED, ended_at=now)
            continue
        if not waits_for_script(job):
            finish(state, job, jobs_pb2.PREEMPTED, 0, 0, now)
            continue
        # As Slurm, it stays RUNNING until its new end time (now + grace), then COMPLETING.
        job.final_state = jobs_pb2.REQUEUED if requeue else jobs_pb2.PREEMPTED
        job.end_time = now + decision.grace_time_s
        state.terminate(tx, state.nodes[job.batch_host], job.job_id, kill_wait, "preempt")
    return changed
