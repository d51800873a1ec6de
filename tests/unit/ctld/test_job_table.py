"""The counts a submission checks (MaxJobCount, MaxSubmitJobs, GrpSubmitJobs, MaxSubmitPU), kept by
ctld/job_table.py as jobs are added, change and are purged, always equal a recount over every job."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctld.errors import SlurmError
from ctld.job_table import JobTable, count_key, recount
from ctld.record import JobRecord
from ctld.sched.assoc_limits import SUBMIT_REFUSED
from shoal.v1 import accounting_pb2 as pb
from shoal.v1 import controller_pb2, jobs_pb2
from tests.unit.ctld.harness import ROOT, Harness, JobBuilder, cluster, job

NONE = {"grp_jobs": -1, "max_jobs": -1, "max_wall_min": -1, "grp_wall_min": -1}


def limits(max_submit: int) -> pb.GetLimitsResponse:
    """root in accounts `a` (MaxSubmitJobs=max_submit) and `b` (no limit), as dbd pushes them."""
    return pb.GetLimitsResponse(
        version=1,
        changed=True,
        associations=[
            pb.Association(id=1, account="root", max_submit_jobs=-1, grp_submit_jobs=-1, **NONE),
            pb.Association(id=2, account="a", parent="root", max_submit_jobs=-1, grp_submit_jobs=-1, **NONE),
            pb.Association(id=3, account="b", parent="root", max_submit_jobs=-1, grp_submit_jobs=-1, **NONE),
            pb.Association(
                id=4, account="a", user="root", max_submit_jobs=max_submit, grp_submit_jobs=-1, **NONE
            ),
            pb.Association(id=5, account="b", user="root", max_submit_jobs=-1, grp_submit_jobs=-1, **NONE),
        ],
        qos=[
            pb.Qos(
                name=name,
                max_submit_per_user=-1,
                max_jobs_per_user=-1,
                grp_jobs=-1,
                max_wall_min=-1,
                grp_wall_min=-1,
            )
            for name in ("normal", "high")
        ],
        users=[pb.AcctUser(name="root", default_account="a")],
    )


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    builder = (
        cluster()
        .nodes(2, cpus=4)
        .partition("batch", "n[1-2]", Default="YES")
        .partition("other", "n[1-2]")
        .set(
            AccountingStorageType="accounting_storage/slurmdbd",
            AccountingStorageEnforce="associations,limits,qos",
            MaxJobCount=12,
            MinJobAge=300,
        )
    )
    harness = Harness.of(builder, tmp_path)
    harness.ctl.accounting.push(limits(max_submit=3))
    return harness


def refused(h: Harness, spec: JobBuilder) -> str:
    try:
        h.submit(spec)
    except SlurmError as exc:
        return str(exc)
    return ""


def same_as_recount(h: Harness) -> bool:
    table = h.ctl.state.jobs
    counts = recount(table.values())
    return dict(table.queued()) == dict(counts) and table.active == sum(counts.values())


def in_b(array: str = "") -> JobBuilder:
    spec = job()
    spec.spec.account, spec.spec.array = "b", array
    return spec


def requeue_and_end(h: Harness, job_id: int) -> None:
    assert h.update(job_id, "requeue") == []
    h.finish(job_id, exit_signal=signal.SIGTERM)  # its run ends: PENDING again (COMPLETING meanwhile)


def purge(h: Harness) -> None:
    h.advance(301)  # MinJobAge=300
    h.tick()


# What happens (job ids in order of submission; each step is followed by a probe: a submission to
# account `a`, MaxSubmitJobs=3, which adds a job when accepted), what the probe gets, and the jobs
# then counted in `a`.
STEPS: list[tuple[str, Callable[[Harness], object], str, set[int]]] = [
    ("submit 1", lambda h: h.submit(job()), "", {1, 2}),
    ("submit 3, held", lambda h: h.submit(job().held()), SUBMIT_REFUSED, {1, 2, 3}),
    ("1 moves to account b", lambda h: h.update(1, "update", Account="b"), "", {2, 3, 4}),
    ("1 and 2 start, a node each (4 waits)", lambda h: h.schedule(), SUBMIT_REFUSED, {2, 3, 4}),
    ("2 completes, 4 starts", lambda h: (h.finish(2), h.schedule()), "", {3, 4, 5}),
    ("4 is requeued", lambda h: requeue_and_end(h, 4), SUBMIT_REFUSED, {3, 4, 5}),
    ("5 (pending) is cancelled", lambda h: h.cancel(5), "", {3, 4, 6}),
    (
        "6 changes partition and QOS",
        lambda h: h.update(6, "update", Partition="other", QOS="high"),
        SUBMIT_REFUSED,
        {3, 4, 6},
    ),
    ("2 and 5 are purged", purge, SUBMIT_REFUSED, {3, 4, 6}),
    ("the controller restarts", lambda h: None, SUBMIT_REFUSED, {3, 4, 6}),
    ("a 4-task array in b (7-10)", lambda h: h.submit(in_b("0-3")), SUBMIT_REFUSED, {3, 4, 6}),
    ("3 (held) is cancelled", lambda h: h.cancel(3), "", {4, 6, 11}),
]


def test_the_kept_counts_equal_a_recount_after_every_transition(h: Harness) -> None:
    """After each step the kept counts equal a pass over every job, and the submission limit reads
    them as a user sees it: refused at MaxSubmitJobs, accepted again once a job ended or moved away."""
    seen = []
    for what, step, _, _ in STEPS:
        if what == "the controller restarts":
            h = h.restart()
            h.ctl.accounting.push(limits(max_submit=3))
        step(h)
        assert same_as_recount(h), what
        got = refused(h, job())
        assert same_as_recount(h), what
        in_a = {i for i, j in h.ctl.jobs.items() if j.account == "a" and h.state(i) in ("PENDING", "RUNNING")}
        seen.append((what, got, in_a))
    assert seen == [(what, then, in_a) for what, _, then, in_a in STEPS]


def test_max_job_count_counts_only_jobs_not_finished(h: Harness) -> None:
    message = "Slurm temporarily unable to accept job, sleeping and retrying"
    h.submit(in_b("0-11"))  # MaxJobCount=12: the system is full
    assert (refused(h, in_b()), h.ctl.state.jobs.active) == (message, 12)
    h.ctl.signal_jobs(controller_pb2.SignalJobsRequest(job_ids=["1_0", "1_1"]), ROOT)
    assert refused(h, in_b("0-2")) == message  # two tasks ended: room for two jobs, not three
    assert refused(h, in_b("0-1")) == ""
    assert same_as_recount(h)


# ---------------------------------------------------------------- the table by itself, any sequence

STATES = [jobs_pb2.PENDING, jobs_pb2.RUNNING, jobs_pb2.COMPLETING, jobs_pb2.COMPLETED, jobs_pb2.CANCELLED]
FIELDS = {
    "state": st.sampled_from(STATES),
    "account": st.sampled_from(["a", "b"]),
    "user_name": st.sampled_from(["alice", "bob"]),
    "partition": st.sampled_from(["batch", "other"]),
    "qos": st.sampled_from(["normal", "high"]),
    "user_id": st.sampled_from([1001, 1002]),
    "priority": st.integers(0, 3),  # not counted
}
OPS = st.one_of(
    st.tuples(st.just("put"), st.integers(1, 6), st.sampled_from(STATES)),
    st.tuples(st.just("del"), st.integers(1, 6)),
    st.tuples(st.just("pop"), st.integers(1, 6)),
    st.tuples(st.just("set"), st.integers(1, 6), st.sampled_from(sorted(FIELDS)), st.data()),
    st.tuples(st.just("update"), st.lists(st.integers(1, 6), max_size=3)),
    st.tuples(st.just("clear")),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(OPS, max_size=30))
def test_any_sequence_of_changes_keeps_the_counts_of_a_recount(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    table = JobTable()
    outside: list[JobRecord] = []  # records that left the table: changing them counts nothing
    for op in ops:
        kind = op[0]
        if kind == "put":
            table[op[1]] = JobRecord(job_id=op[1], state=op[2], account="a", qos="normal")
        elif kind in ("del", "pop") and op[1] in table:
            outside.append(table[op[1]])
            if kind == "del":
                del table[op[1]]
            else:
                table.pop(op[1])
        elif kind == "set":
            _, job_id, name, data = op
            target = table.get(job_id) or (outside[-1] if outside else None)
            if target is not None:
                setattr(target, name, data.draw(FIELDS[name]))
        elif kind == "update":
            table.update({i: JobRecord(job_id=i, state=jobs_pb2.PENDING) for i in op[1]})
        elif kind == "clear":
            outside.extend(table.values())
            table.clear()
        counts = recount(table.values())
        assert (dict(table.queued()), table.active) == (dict(counts), sum(counts.values()))
        assert all(j.table is None and j.counted_as is None for j in outside if j not in table.values())
        assert all(j.counted_as == count_key(j) for j in table.values())


def test_a_record_is_in_one_table_only() -> None:
    record = JobRecord(job_id=1, state=jobs_pb2.PENDING)
    first = JobTable({1: record})
    with pytest.raises(ValueError, match="another job table"):
        JobTable({1: record})
    first[1] = record  # the same record again: counted once
    assert first.active == 1
