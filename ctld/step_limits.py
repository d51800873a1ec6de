"""Steps past their own time limit (`srun -t` inside an allocation): ctld ends them as 22.05 does.

The step's tasks are terminated through the signal-step path (SIGTERM, KillWait, SIGKILL on its
nodes); the step stays RUNNING until its srun reports the tasks gone, and then ends TIMEOUT. The job
goes on. Time its job spent suspended does not count, as for the job's own limit.
"""

from __future__ import annotations

from functools import partial

from ctld.state import ClusterState, Transaction
from ctld.steps import suspended_during
from shoal.v1 import jobs_pb2


def past_limit(step: jobs_pb2.JobStep, suspended_secs: int, now: int) -> bool:
    """A running step with a limit of its own whose run time (less suspended time) reached it."""
    return (
        step.state == jobs_pb2.RUNNING
        and step.time_limit_min > 0
        and not step.timed_out_at
        and now - step.start_time - suspended_secs >= step.time_limit_min * 60
    )


def enforce_step_limits(state: ClusterState, tx: Transaction, now: int) -> None:
    """Terminate the tasks of every running step past its limit, once; its job is left running."""
    for job in state.jobs.values():
        if job.state != jobs_pb2.RUNNING or not job.steps:
            continue
        due = [s for s in job.steps if past_limit(s, suspended_during(job, s.start_time, now), now)]
        for step in due:
            step.timed_out_at = now
            for part in step.layout:
                node = state.nodes.get(part.node)
                if node is not None:
                    tx.after(partial(state.actions.signal_step, node.info, job.job_id, step.step_id, 0))
        if due:
            tx.save(job)
