"""GetJobs' answer built from per-job listing views (ctld/listing.py) is the answer squeue, scontrol
and sacct got when each job was copied whole and its script and environment cleared."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import squeue
from ctld.listing import listing_view
from ctld.queries import get_jobs_wire
from ctld.record import with_spec
from shoal.jobview import BRIEF_FIELDS, BRIEF_SPEC_FIELDS
from shoal.v1 import common_pb2, controller_pb2, jobs_pb2
from tests.unit.ctld.harness import ROOT, Harness, cluster, job

ENV = {f"VAR_{i}": f"value {i} " * (i % 7) for i in range(41)} | {"HOME": "/home/alice", "EMPTY": ""}


def _sbatch(h: Harness, builder=None, **spec: object) -> int:  # type: ignore[no-untyped-def]
    b = builder or job()
    b.spec.environment.update(ENV)
    b.spec.MergeFrom(jobs_pb2.JobSpec(**spec))  # type: ignore[arg-type]
    return h.submit(b)


def _reference(h: Harness, req: controller_pb2.GetJobsRequest) -> bytes:
    """The answer as GetJobs built it before: every listed job copied whole, then cleared."""
    ids = [j.job_id for j in controller_pb2.GetJobsResponse.FromString(get_jobs_wire(h.ctl.state, req)).jobs]
    out = controller_pb2.GetJobsResponse(now=h.ctl.state.now())
    for job_id in ids:
        out.jobs.add().CopyFrom(listing_view(h.ctl.jobs[job_id]))
    return out.SerializeToString()


def _varied(tmp_path: Path) -> Harness:
    h = Harness.of(cluster().nodes(2, cpus=4, mem=8000).set(MinJobAge=300), tmp_path)
    running = _sbatch(h, job().cpus(2).time(10).name("run"), comment="a comment", argv=["a", "b"])
    done = _sbatch(h, job().cpus(1), array="")
    _sbatch(h, job().cpus(4).time(60), array="0-7%2", dependency="")  # array: tasks split off as they start
    _sbatch(h, job().held().name("held"), std_out="/tmp/%j.out")
    _sbatch(h, job().interactive())
    _sbatch(h, job().nodes(2).cpus(4), script=b"#!/bin/sh\n" + b"x" * 70_000)  # pending: Resources
    _sbatch(h, job(), script=b"")
    h.schedule()
    h.finish(done, exit_code=3)
    h.update(running, "update", Comment="changed")
    h.advance(30)
    h.schedule()
    return h


def test_the_answer_is_byte_for_byte_the_whole_copy_cleared(tmp_path: Path) -> None:
    h = _varied(tmp_path)
    states = {j.state for j in h.ctl.jobs.values()}
    assert {jobs_pb2.PENDING, jobs_pb2.RUNNING, jobs_pb2.FAILED} <= states and len(h.ctl.jobs) >= 8
    for req in (
        controller_pb2.GetJobsRequest(),
        controller_pb2.GetJobsRequest(include_finished=True, show_all=True),
        controller_pb2.GetJobsRequest(job_id_strs=["3"]),
        controller_pb2.GetJobsRequest(job_ids=[1, 2], user_ids=[0]),
    ):
        for _ in range(2):  # the second time from the kept spec views
            assert get_jobs_wire(h.ctl.state, req) == _reference(h, req)
    listed = controller_pb2.GetJobsResponse.FromString(
        get_jobs_wire(h.ctl.state, controller_pb2.GetJobsRequest())
    )
    assert all(not j.spec.environment and not j.spec.script for j in listed.jobs)
    assert {j.spec.comment for j in listed.jobs} >= {"changed"}


def test_a_change_made_in_memory_without_a_save_is_listed(tmp_path: Path) -> None:
    h = _varied(tmp_path)
    req = controller_pb2.GetJobsRequest(include_finished=True)
    get_jobs_wire(h.ctl.state, req)
    pending = next(j for j in h.ctl.jobs.values() if j.state == jobs_pb2.PENDING)
    pending.state_reason = "Dependency"  # as the applier sets reasons inside its transaction
    spec = with_spec(pending.spec, comment="edited in memory")  # a record's spec is replaced, never edited
    spec.environment["NEW"] = "1"
    pending.spec = spec
    listed = controller_pb2.GetJobsResponse.FromString(get_jobs_wire(h.ctl.state, req))
    view = next(j for j in listed.jobs if j.job_id == pending.job_id)
    assert (view.state_reason, view.spec.comment) == ("Dependency", "edited in memory")
    assert get_jobs_wire(h.ctl.state, req) == _reference(h, req)


def test_the_controller_keeps_the_script_and_environment(tmp_path: Path) -> None:
    h = _varied(tmp_path)
    get_jobs_wire(h.ctl.state, controller_pb2.GetJobsRequest(include_finished=True))
    first = h.ctl.jobs[min(h.ctl.jobs)]
    assert first.spec.environment["HOME"] == "/home/alice" and first.spec.script


def test_views_of_purged_jobs_are_dropped(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1, cpus=4).set(MinJobAge=2), tmp_path)
    for _ in range(120):
        _sbatch(h, job().cpus(1))
        h.schedule()
        get_jobs_wire(h.ctl.state, controller_pb2.GetJobsRequest(include_finished=True))
        for job_id, info in list(h.ctl.jobs.items()):
            if info.state == jobs_pb2.RUNNING:
                h.finish(job_id)
        h.advance(5)
        h.tick()
    assert len(h.ctl.jobs) < 10
    get_jobs_wire(h.ctl.state, controller_pb2.GetJobsRequest(include_finished=True))
    assert len(h.ctl.state.listing) <= 2 * len(h.ctl.jobs) + 64


# --- the brief listing (GetJobsRequest.brief): squeue's usual formats from a quarter of the bytes


def _answer(h: Harness, **req: object) -> controller_pb2.GetJobsResponse:
    request = controller_pb2.GetJobsRequest(**req)  # type: ignore[arg-type]
    return controller_pb2.GetJobsResponse.FromString(get_jobs_wire(h.ctl.state, request))


def _brief_of(full: jobs_pb2.JobInfo) -> jobs_pb2.JobInfo:
    out = jobs_pb2.JobInfo()
    for name in BRIEF_FIELDS:
        if full.HasField(name) if name == "spec" else getattr(full, name):
            setattr(out, name, getattr(full, name))
    for name in BRIEF_SPEC_FIELDS:
        if getattr(full.spec, name):
            setattr(out.spec, name, getattr(full.spec, name))
    return out


def _more_varied(tmp_path: Path) -> Harness:
    h = _varied(tmp_path)
    _sbatch(h, job().name("later"), begin_time=int(h.ctl.state.now()) + 3600)
    _sbatch(h, job().cpus(1).time(5), array="0-3")
    h.schedule()
    ran = next(j.job_id for j in h.ctl.jobs.values() if j.spec.name == "run")
    assert not h.update(ran, "requeue")  # restarts 1, pending again
    h.advance(7)
    return h


def test_a_brief_listing_is_the_full_one_with_only_the_brief_fields(tmp_path: Path) -> None:
    h = _more_varied(tmp_path)
    for req in ({}, {"include_finished": True, "show_all": True}, {"job_id_strs": ["3"]}, {"user_ids": [0]}):
        for _ in range(2):  # the second time from the kept entries
            full, brief = _answer(h, **req), _answer(h, brief=True, **req)
            assert brief.now == full.now and len(brief.jobs) == len(full.jobs) > 0
            assert list(brief.jobs) == [_brief_of(j) for j in full.jobs]
    job_id = min(h.ctl.jobs)
    h.update(job_id, "update", Name="renamed")  # a new spec: the brief entry follows
    named = {j.job_id: j.spec.name for j in _answer(h, brief=True, include_finished=True).jobs}
    assert named[job_id] == "renamed"
    assert sum(len(j.SerializeToString()) for j in _answer(h, brief=True).jobs) * 2 < sum(
        len(j.SerializeToString()) for j in _answer(h).jobs
    )


FORMATS = [
    None,
    squeue.LONG_FORMAT,
    squeue.START_FORMAT,
    " ".join(f"%{key}" for key in sorted(squeue.BRIEF_KEYS) if len(key) == 1),
]
SORTS = [squeue.DEFAULT_SORT, squeue.START_SORT, *(k for k in sorted(squeue.BRIEF_KEYS) if len(k) == 1)]


@pytest.mark.parametrize("split", [False, True], ids=["grouped", "split-arrays"])
def test_squeue_prints_the_same_from_a_brief_listing(tmp_path: Path, split: bool) -> None:
    h = _more_varied(tmp_path)
    full, brief = _answer(h, include_finished=True), _answer(h, include_finished=True, brief=True)
    shown = squeue.JobFilter(states=None)
    for format_str in FORMATS:
        fields = squeue.build_fields(format_str, None)
        for sort in SORTS:
            assert squeue.brief_enough(fields, sort)
            lines = [
                squeue.render_queue(list(a.jobs), a.now, shown, fields, sort=sort, expand_arrays=split)
                for a in (full, brief)
            ]
            assert lines[0] == lines[1] and len(lines[0]) > 8, (format_str, sort)
    fields = squeue.build_fields(None, "JobID,JobArrayID,ArrayTaskID,State,Reason,TimeLeft,StartTime")
    assert squeue.brief_enough(fields, "-S")
    assert squeue.render_queue(list(full.jobs), full.now, shown, fields, sort="-S") == squeue.render_queue(
        list(brief.jobs), brief.now, shown, fields, sort="-S"
    )


@pytest.mark.parametrize(
    ("format_str", "long_format", "sort"),
    [
        ("%i %o", None, squeue.DEFAULT_SORT),  # the command
        (None, "JobID,STDOUT", squeue.DEFAULT_SORT),
        ("%i %b", None, squeue.DEFAULT_SORT),  # TRES per node
        (None, None, "y"),  # sorted by nice
    ],
    ids=["command", "stdout", "tres-per-node", "sort-by-nice"],
)
def test_other_columns_ask_for_the_full_listing(
    format_str: str | None, long_format: str | None, sort: str
) -> None:
    assert not squeue.brief_enough(squeue.build_fields(format_str, long_format), sort)


# --- folded pending tasks (GetJobsRequest.fold_pending_tasks): a big array as one entry, as 22.05's


def _arrays(tmp_path: Path) -> Harness:
    """Arrays in every shape squeue folds: pending behind running tasks, a throttle, tasks held apart
    (another reason), a task moved to another partition, requeued and finished tasks."""
    built = cluster().nodes(2, cpus=4, mem=8000).set(MinJobAge=300)
    h = Harness.of(built.partition("batch", "n[1-2]", Default="YES").partition("other", "n1"), tmp_path)
    big = _sbatch(h, job().cpus(1).time(10).name("big"), array="0-39")
    _sbatch(h, job().cpus(2).time(5).name("throttled"), array="0-9%2")
    small = _sbatch(h, job().cpus(1).name("two"), array="3,5")
    h.schedule()
    tasks = {j.array_task_id: j.job_id for j in h.ctl.jobs.values() if j.array_job_id == big}
    for task in (20, 21, 30):
        assert not h.update(tasks[task], "hold")
    update = controller_pb2.UpdateJobRequest(
        job_ids=[f"{big}_33"],
        action="update",
        fields=[common_pb2.KeyValue(key="Partition", value="other")],
    )
    assert not [r.message for r in h.ctl.update_job(update, ROOT).results if r.code]
    running = sorted(j.job_id for j in h.ctl.jobs.values() if j.state == jobs_pb2.RUNNING)
    h.finish(running[0])
    assert not h.update(running[1], "requeue")
    h.advance(3)
    h.schedule()
    assert h.ctl.jobs[small].state == jobs_pb2.PENDING
    return h


@pytest.mark.parametrize("brief", [False, True], ids=["full", "brief"])
def test_squeue_prints_the_same_from_folded_pending_tasks(tmp_path: Path, brief: bool) -> None:
    h = _arrays(tmp_path)
    plain, folded = (
        _answer(h, include_finished=True, brief=brief),
        _answer(h, include_finished=True, brief=brief, fold_pending_tasks=True),
    )
    assert len(folded.jobs) * 2 < len(plain.jobs)
    big = next(j for j in folded.jobs if j.spec.name == "big" and j.array_task_str)
    assert big.array_task_str.startswith(f"{big.array_task_id}-") and big.state == jobs_pb2.PENDING
    throttled = next(j for j in folded.jobs if j.spec.name == "throttled" and j.array_task_str)
    assert throttled.array_task_str.endswith("%2")
    first = min(h.ctl.jobs)
    filters = [
        squeue.JobFilter(states=None),
        squeue.JobFilter(states=None, job_ids=[(first, None)]),
        squeue.JobFilter(states={jobs_pb2.PENDING}),
        squeue.JobFilter(states=None, partitions={"other"}),
    ]
    for format_str in FORMATS:
        fields = squeue.build_fields(format_str, None)
        for sort in [*SORTS, "-i", "-S", "-p,i", "t,-e"]:
            for shown in filters:
                lines = [
                    squeue.render_queue(list(a.jobs), a.now, shown, fields, sort=sort)
                    for a in (plain, folded)
                ]
                assert lines[0] == lines[1] and len(lines[0]) > 1, (format_str, sort, shown)


def test_a_folded_listing_names_the_tasks_asked_for(tmp_path: Path) -> None:
    h = _arrays(tmp_path)
    first = min(h.ctl.jobs)
    asked = _answer(h, job_id_strs=[f"{first}_[24-27]"], fold_pending_tasks=True)
    assert [(j.array_task_id, j.array_task_str) for j in asked.jobs] == [(24, "24-27")]
    one = _answer(h, job_id_strs=[f"{first}_25"], fold_pending_tasks=True)
    assert [(j.array_task_id, j.array_task_str) for j in one.jobs] == [(25, "")]


@pytest.mark.parametrize(
    ("argv", "folded"),
    [
        ([], True),
        (["-u", "root", "-t", "PD"], True),
        (["-j", "7"], True),
        (["-r"], False),
        (["-j", "7_3"], False),
    ],
)
def test_squeue_asks_for_folded_tasks_unless_it_lists_tasks(argv: list[str], folded: bool) -> None:
    args, stray = squeue.parse_command_line(argv)
    assert not stray
    request = squeue.listing_request(args, squeue.build_filter(args), brief=True)
    assert request.fold_pending_tasks is folded
