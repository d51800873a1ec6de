"""A controller restarted between starting a batch job and launching it: the job's node, registering,
shows it never got the job, and the job is requeued instead of staying RUNNING for ever."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.controller import Controller
from shoal.v1 import controller_pb2, jobs_pb2
from tests.unit.ctld.builders import make_controller, submit


def _started_then_restarted(tmp_path: Path, **spec: object) -> tuple[Controller, int]:
    """A job marked RUNNING on n1 and saved, then a new controller over the same state."""
    first = make_controller(tmp_path)
    job_id = submit(first, **spec)
    job = first.jobs[job_id]
    job.state, job.batch_host, job.start_time = jobs_pb2.RUNNING, "n1", 999_990
    job.allocation.append(jobs_pb2.NodeAlloc(node="n1", cpu_ids=[0]))
    with first.state.transaction() as tx:
        tx.save(job)
    return make_controller(tmp_path), job_id


def _register(ctl: Controller, running: list[int], finished: list[int], knows_field: bool = True) -> None:
    ctl.register_node(
        controller_pb2.RegisterNodeRequest(
            name="n1", running_jobs=running, finished_jobs=finished, reports_finished=knows_field
        )
    )


def test_a_batch_job_its_node_never_got_is_requeued(tmp_path: Path) -> None:
    ctl, job_id = _started_then_restarted(tmp_path, requeue=-1)  # sbatch's default: requeueable
    assert ctl.jobs[job_id].state == jobs_pb2.RUNNING
    _register(ctl, running=[], finished=[])
    job = ctl.jobs[job_id]
    assert (job.state, job.restarts, job.batch_host) == (jobs_pb2.PENDING, 1, "")
    assert not job.allocation


def test_with_no_requeue_it_ends_node_fail(tmp_path: Path) -> None:
    ctl, job_id = _started_then_restarted(tmp_path, requeue=0)
    _register(ctl, running=[], finished=[])
    assert ctl.jobs[job_id].state == jobs_pb2.NODE_FAIL


@pytest.mark.parametrize(
    ("running", "finished", "knows_field"),
    [([1], [], True), ([], [1], True), ([], [], False)],
    ids=["still-running", "finished-report-on-its-way", "node-without-the-field"],
)
def test_a_job_the_node_has_or_may_have_stays_running(
    tmp_path: Path, running: list[int], finished: list[int], knows_field: bool
) -> None:
    ctl, job_id = _started_then_restarted(tmp_path)
    assert job_id == 1
    _register(ctl, running=running, finished=finished, knows_field=knows_field)
    assert ctl.jobs[job_id].state == jobs_pb2.RUNNING


def test_a_job_this_controller_started_is_not_judged(tmp_path: Path) -> None:
    """Its launch may still be on the way when the node registers."""
    ctl = make_controller(tmp_path)
    job_id = submit(ctl)
    job = ctl.jobs[job_id]
    job.state, job.batch_host = jobs_pb2.RUNNING, "n1"
    _register(ctl, running=[], finished=[])
    assert ctl.jobs[job_id].state == jobs_pb2.RUNNING
