"""A node's report that a batch job ended, in the controller (no daemons): which run it is about."""

from __future__ import annotations

from ctld.controller import Controller
from shoal.v1 import controller_pb2, jobs_pb2
from tests.unit.ctld.builders import submit


def _running_again(ctl: Controller) -> jobs_pb2.JobInfo:
    """A job requeued once (say its node failed) and now in its second run on n1."""
    job_id = submit(ctl)
    job = ctl.jobs[job_id]
    job.state = jobs_pb2.RUNNING
    job.batch_host = "n1"
    job.restarts = 1
    job.start_time = 1_000_000
    return job


def test_a_late_report_of_an_earlier_run_does_not_end_the_current_one(controller: Controller) -> None:
    job = _running_again(controller)
    controller.complete_batch(
        controller_pb2.CompleteBatchRequest(node="n1", job_id=job.job_id, run=0, exit_code=3)
    )
    assert job.state == jobs_pb2.RUNNING
    controller.complete_batch(
        controller_pb2.CompleteBatchRequest(node="n1", job_id=job.job_id, run=1, exit_code=3)
    )
    assert (job.state, job.exit_code) == (jobs_pb2.FAILED, 3)


def test_the_first_run_reports_as_run_zero(controller: Controller) -> None:
    job_id = submit(controller)
    job = controller.jobs[job_id]
    job.state, job.batch_host = jobs_pb2.RUNNING, "n1"
    controller.complete_batch(controller_pb2.CompleteBatchRequest(node="n1", job_id=job_id))
    assert job.state == jobs_pb2.COMPLETED
