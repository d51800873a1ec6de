"""ctld's sdiag counters: jobs counted from how their records change, passes timed, reset zeroes."""

from __future__ import annotations

from ctld.diag import Diag
from shoal.v1 import jobs_pb2


def _job(job_id: int, state: int, start: int = 0) -> jobs_pb2.JobInfo:
    return jobs_pb2.JobInfo(job_id=job_id, state=state, start_time=start)


def test_jobs_present_at_start_are_the_baseline_and_changes_count_once() -> None:
    d = Diag(clock=lambda: 1000.0)
    d.observe([_job(1, jobs_pb2.RUNNING, 900)])  # recovered at ctld's start: not counted
    d.observe([_job(1, jobs_pb2.RUNNING, 900), _job(2, jobs_pb2.PENDING)])
    d.observe(
        [_job(1, jobs_pb2.COMPLETED, 900), _job(2, jobs_pb2.RUNNING, 1000), _job(3, jobs_pb2.CANCELLED)]
    )
    d.observe([_job(1, jobs_pb2.COMPLETED, 900), _job(2, jobs_pb2.FAILED, 1000), _job(3, jobs_pb2.CANCELLED)])
    s = d.snapshot()
    assert (s.jobs_submitted, s.jobs_started, s.jobs_completed, s.jobs_canceled, s.jobs_failed) == (
        2,
        1,
        1,
        1,
        1,
    )
    assert (s.jobs_pending, s.jobs_running) == (0, 0)


def test_a_requeued_job_starts_again() -> None:
    d = Diag()
    d.observe([])
    d.observe([_job(5, jobs_pb2.RUNNING, 10)])
    d.observe([_job(5, jobs_pb2.PENDING, 10)])
    d.observe([_job(5, jobs_pb2.RUNNING, 20)])
    assert (d.snapshot().jobs_submitted, d.snapshot().jobs_started) == (1, 2)


def test_passes_and_rpcs_then_reset() -> None:
    d = Diag(clock=lambda: 50.0)
    d.sched_pass(100, 0)
    d.sched_pass(300, 4)
    d.sched_pass(200, 4, backfilled=False)  # a main pass alone (bf_interval not yet passed)
    d.rpc_begin()
    d.rpc_end("SubmitJob", 1001, 70)
    d.rpc_begin()
    d.rpc_end("GetDiag", 0, 5)
    d.rpc_begin()
    d.rpc_end("ResetDiag", 0, 6)
    s = d.snapshot()
    assert (s.sched_cycles, s.sched_cycle_last_us, s.sched_cycle_max_us, s.sched_cycle_sum_us) == (
        3,
        200,
        300,
        600,
    )
    assert (s.bf_cycles, s.bf_last_depth, s.bf_last_when, s.sched_queue_len) == (1, 4, 50, 4)
    assert {(r.name, r.type_id, r.count, r.total_time_us) for r in s.rpcs} == {
        ("REQUEST_SUBMIT_BATCH_JOB", 4003, 1, 70),
        ("REQUEST_STATS_INFO", 2035, 2, 11),
    }
    assert {(u.uid, u.count) for u in s.users} == {(1001, 1), (0, 2)}
    assert s.server_thread_count == 0
    d.reset()
    s = d.snapshot()
    assert (s.sched_cycles, len(s.rpcs), len(s.users), s.jobs_submitted) == (0, 0, 0, 0)
