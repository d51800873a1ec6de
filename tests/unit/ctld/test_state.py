"""ClusterState's transaction: one commit, effects after unlock and commit, nothing when it raises;
read RPCs write nothing to the store."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from ctld.fairshare_usage import META_KEY as SHARES_META_KEY
from ctld.state import ClusterState
from ctld.store import StateStore
from ctld.transitions import requeue
from shoal.v1 import accounting_pb2, controller_pb2, jobs_pb2
from tests.unit.ctld.harness import ROOT, Harness, cluster, job


class Boom(Exception):
    pass


def _state(h: Harness) -> ClusterState:
    return h.ctl.state


def _lock_is_free(state: ClusterState) -> bool:
    """Whether another thread could take the state's lock right now."""
    got: list[bool] = []

    def probe() -> None:
        taken = state._lock.acquire(blocking=False)
        if taken:
            state._lock.release()
        got.append(taken)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return got[0]


def _stored_job_ids(state_dir: Path) -> set[int]:
    other = StateStore(state_dir)  # a second connection sees only what was committed
    try:
        return {jobs_pb2.JobInfo.FromString(blob).job_id for blob in other.load_jobs()}
    finally:
        other.close()


def _queued_runs(state: ClusterState) -> list[tuple[int, str]]:
    """(job id, state) of the job records queued for accounting."""
    out = []
    for _, data in state.store.queued_records(1000):
        rec = accounting_pb2.AcctRecord.FromString(data)
        if rec.HasField("job"):
            out.append((rec.job.job_id, rec.job.state))
    return out


def test_effects_run_after_the_lock_is_released_and_the_change_committed(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1), tmp_path)
    state = _state(h)
    record = jobs_pb2.JobInfo(job_id=4242, state=jobs_pb2.PENDING)
    seen: list[tuple[bool, bool]] = []
    with state.transaction() as tx:
        tx.save(record)
        tx.after(lambda: seen.append((_lock_is_free(state), 4242 in _stored_job_ids(tmp_path))))
        assert seen == []  # queued, not run
    assert seen == [(True, True)]


def test_a_transaction_that_raises_writes_nothing_and_runs_no_effect(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1), tmp_path)
    state = _state(h)
    ran: list[str] = []
    with pytest.raises(Boom), state.transaction() as tx:
        tx.save(jobs_pb2.JobInfo(job_id=4243, state=jobs_pb2.PENDING))
        tx.after(lambda: ran.append("effect"))
        raise Boom
    assert ran == []
    assert 4243 not in _stored_job_ids(tmp_path)
    assert _lock_is_free(state)


def test_a_requeued_run_is_recorded_in_the_requeue_s_own_transaction(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(3).set(AccountingStorageType="accounting_storage/slurmdbd"), tmp_path)
    state = _state(h)
    failed, other, requeued = h.submit(job()), h.submit(job()), h.submit(job())
    h.schedule()
    assert all(state.jobs[j].state == jobs_pb2.RUNNING for j in (failed, other, requeued))
    with pytest.raises(Boom), state.transaction() as tx:  # a requeue whose transaction fails ...
        requeue(state, tx, state.jobs[failed], state.now(), ended_as=jobs_pb2.NODE_FAIL)
        raise Boom
    with state.transaction() as tx:  # ... leaves nothing behind for the next, unrelated save
        tx.save(state.jobs[other])
    assert (failed, "NODE_FAIL") not in _queued_runs(state)
    with state.transaction() as tx:
        requeue(state, tx, state.jobs[requeued], state.now(), ended_as=jobs_pb2.NODE_FAIL)
        tx.save(state.jobs[requeued])
    assert _queued_runs(state)[-2:] == [(requeued, "NODE_FAIL"), (requeued, "PENDING")]


def _queued_steps(state: ClusterState) -> list[tuple[int, int, str, int]]:
    """(job id, step id, state, end time) of the step records queued for accounting."""
    out = []
    for _, data in state.store.queued_records(1000):
        rec = accounting_pb2.AcctRecord.FromString(data)
        if rec.HasField("step"):
            out.append((rec.step.job_id, rec.step.step_id, rec.step.state, rec.step.end_time))
    return out


def test_a_batch_step_is_recorded_running_at_the_start_and_once_more_at_the_end(tmp_path: Path) -> None:
    """22.05's sacct lists `N.batch` RUNNING while the script runs (sbatch --wrap 'sleep 60', measured)."""
    h = Harness.of(cluster().nodes(1).set(AccountingStorageType="accounting_storage/slurmdbd"), tmp_path)
    state = _state(h)
    job_id = h.submit(job())
    h.schedule()
    assert _queued_steps(state) == [(job_id, -4, "RUNNING", 0)]
    with state.transaction() as tx:  # a later save of the running job sends it no second time
        tx.save(state.jobs[job_id])
    assert h.update(job_id, "suspend") == [] and h.update(job_id, "resume") == []  # as its job, 22.05's
    h.finish(job_id, exit_code=3)
    assert _queued_steps(state) == [
        (job_id, -4, "RUNNING", 0),
        (job_id, -4, "SUSPENDED", 0),
        (job_id, -4, "RUNNING", 0),
        (job_id, -4, "FAILED", state.jobs[job_id].end_time),
    ]


@pytest.mark.parametrize(
    "read",
    [
        lambda h: h.ctl.get_shares(controller_pb2.GetSharesRequest()),
        lambda h: h.ctl.get_priorities(controller_pb2.GetPrioritiesRequest()),
        lambda h: h.ctl.get_jobs(controller_pb2.GetJobsRequest()),
        lambda h: h.ctl.get_nodes(controller_pb2.GetNodesRequest()),
        lambda h: h.ctl.get_reservations(controller_pb2.GetReservationsRequest()),
        lambda h: h.ctl.why(controller_pb2.WhyRequest(job_id="2"), ROOT),
    ],
    ids=["GetShares", "GetPriorities", "GetJobs", "GetNodes", "GetReservations", "Why"],
)
def test_read_rpcs_write_nothing_to_the_store(tmp_path: Path, read) -> None:  # type: ignore[no-untyped-def]
    h = Harness.of(cluster().nodes(1).set(PriorityType="priority/multifactor"), tmp_path)
    h.submit(job())
    h.schedule()
    h.submit(job())  # a pending job for sprio
    h.advance(120)  # past the ledger's save interval: a write path would save it now
    before = h.ctl.store.get_meta(SHARES_META_KEY)
    changes = h.ctl.store._backend._db.total_changes
    read(h)
    assert h.ctl.store._backend._db.total_changes == changes
    assert h.ctl.store.get_meta(SHARES_META_KEY) == before


def test_housekeeping_saves_the_fair_share_ledger(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1).set(PriorityType="priority/multifactor"), tmp_path)
    h.submit(job())
    h.schedule()
    h.advance(120)
    h.tick()
    assert h.ctl.store.get_meta(SHARES_META_KEY)


def test_a_submit_whose_commit_fails_leaves_no_job_in_memory(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1), tmp_path)
    h.ctl.store._backend._db.close()  # the disk is gone: the commit fails
    with pytest.raises(sqlite3.Error):
        h.submit(job())
    assert h.ctl.jobs == {}
