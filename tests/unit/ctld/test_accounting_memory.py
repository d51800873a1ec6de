"""ctld's accounting keeps the last record of each job in memory (to queue nothing for an unchanged
save): that memory follows the jobs in memory, not every job ever run, and the queue still gets every
job's records."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from shoal.v1 import accounting_pb2, cluster_pb2
from tests.unit.ctld.harness import Harness, cluster, job

MIN_JOB_AGE = 300


def _finished_in_queue(h: Harness) -> set[int]:
    """Ids of the jobs whose COMPLETED record is queued for dbd."""
    done = set()
    for _, data in h.ctl.state.store.queued_records(100_000):
        rec = accounting_pb2.AcctRecord.FromString(data)
        if rec.HasField("job") and rec.job.state == "COMPLETED":
            done.add(rec.job.job_id)
    return done


def test_a_long_run_keeps_only_the_jobs_in_memory(tmp_path: Path) -> None:
    h = Harness.of(
        cluster().nodes(2).set(AccountingStorageType="accounting_storage/slurmdbd", MinJobAge=MIN_JOB_AGE),
        tmp_path,
    )
    accounting = h.ctl.state.accounting
    ran: list[int] = []
    most_jobs = most_steps = 0
    for _ in range(40):  # 40 waves of 4 jobs, each purged (MinJobAge) before the next one ends
        wave = [h.submit(job()) for _ in range(4)]
        while any(h.state(j) == "PENDING" for j in wave):
            h.schedule()
            for job_id in wave:
                if h.state(job_id) == "RUNNING":
                    h.finish(job_id)
        ran += wave
        h.advance(MIN_JOB_AGE + 1)
        h.tick()
        jobs, steps = accounting.remembered()
        most_jobs, most_steps = max(most_jobs, jobs), max(most_steps, steps)
        assert jobs <= len(h.ctl.jobs)
    assert all(h.state(j) == "PURGED" for j in ran)
    assert most_jobs <= 4 and most_steps <= 4  # one wave at most, not all 160 jobs
    assert accounting.remembered() == (0, 0)
    assert _finished_in_queue(h) == set(ran)  # nothing was lost for it


def test_an_unchanged_save_queues_nothing_and_a_purged_job_is_forgotten(tmp_path: Path) -> None:
    h = Harness.of(
        cluster().nodes(1).set(AccountingStorageType="accounting_storage/slurmdbd", MinJobAge=MIN_JOB_AGE),
        tmp_path,
    )
    state = h.ctl.state
    job_id = h.submit(job())
    h.schedule()
    queued = len(state.store.queued_records(1000))
    with state.transaction() as tx:
        tx.save(state.jobs[job_id])
    assert len(state.store.queued_records(1000)) == queued
    h.finish(job_id)
    assert state.accounting.remembered() == (1, 1)  # the job and its .batch step
    h.advance(MIN_JOB_AGE + 1)
    h.tick()
    assert h.state(job_id) == "PURGED"
    assert state.accounting.remembered() == (0, 0)


class _WriteFailed(Exception):
    """A write after the accounting records failed: the store transaction rolls back."""


def _job_records(h: Harness, job_id: int) -> list[accounting_pb2.JobRecord]:
    out = []
    for _, data in h.ctl.state.store.queued_records(100_000):
        rec = accounting_pb2.AcctRecord.FromString(data)
        if rec.HasField("job") and rec.job.job_id == job_id:
            out.append(rec.job)
    return out


def test_a_save_that_did_not_commit_is_queued_again(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1).set(AccountingStorageType="accounting_storage/slurmdbd"), tmp_path)
    state = h.ctl.state
    job_id = h.submit(job())
    changed = replace(state.jobs[job_id], priority=state.jobs[job_id].priority + 7)
    try:
        with state.store.transaction() as tx:
            state.accounting.record_jobs(tx, [changed])
            raise _WriteFailed
    except _WriteFailed:
        pass
    assert all(r.priority != changed.priority for r in _job_records(h, job_id))  # rolled back
    with state.store.transaction() as tx:
        state.accounting.record_jobs(tx, [changed])
    assert [r.priority for r in _job_records(h, job_id)][-1] == changed.priority
    with state.store.transaction() as tx:  # committed once: the same save again queues nothing
        state.accounting.record_jobs(tx, [changed])
    assert [r.priority for r in _job_records(h, job_id)].count(changed.priority) == 1


def test_a_node_event_that_did_not_commit_is_queued_again(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1).set(AccountingStorageType="accounting_storage/slurmdbd"), tmp_path)
    state = h.ctl.state
    node = next(iter(state.nodes.values())).info
    down = cluster_pb2.NodeInfo()
    down.CopyFrom(node)
    down.base_state, down.reason = "DOWN", "gone"

    def events() -> list[str]:
        found = []
        for _, data in state.store.queued_records(100_000):
            rec = accounting_pb2.AcctRecord.FromString(data)
            if rec.HasField("node_event") and rec.node_event.node == node.name:
                found.append(rec.node_event.state)
        return found

    try:
        with state.store.transaction() as tx:
            state.accounting.record_node(tx, down, 100)
            raise _WriteFailed
    except _WriteFailed:
        pass
    assert "DOWN" not in events()
    with state.store.transaction() as tx:
        state.accounting.record_node(tx, down, 101)
    assert events().count("DOWN") == 1
