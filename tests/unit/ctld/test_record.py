"""ctld's typed job record and its protobuf forms (ctld/record.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from google.protobuf.descriptor import FieldDescriptor

from ctld import jobs as jobrec
from ctld import record
from ctld.job_table import JobTable, recount
from ctld.record import INTERNAL, REQUEST_INPUTS, WIRE_ONLY, JobRecord
from shoal.v1 import jobs_pb2

RECORD_FIELDS = {f.name for f in dataclasses.fields(JobRecord) if f.init}
JOBINFO_FIELDS = {f.name for f in jobs_pb2.JobInfo.DESCRIPTOR.fields}


def test_every_jobinfo_field_is_kept_or_declared_wire_only() -> None:
    # a JobInfo field added on another branch fails here until the record keeps it (same name)
    missing = JOBINFO_FIELDS - RECORD_FIELDS - WIRE_ONLY
    assert not missing, f"JobInfo fields JobRecord neither keeps nor declares WIRE_ONLY: {sorted(missing)}"
    assert not RECORD_FIELDS - JOBINFO_FIELDS, "a record field JobInfo lacks: it could not be stored"
    assert INTERNAL <= RECORD_FIELDS and REQUEST_INPUTS <= RECORD_FIELDS


def _filled() -> jobs_pb2.JobInfo:
    """A JobInfo with every field set to something other than its default."""
    info = jobs_pb2.JobInfo()
    for i, f in enumerate(jobs_pb2.JobInfo.DESCRIPTOR.fields, start=1):
        repeated = f.is_repeated
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            if f.name == "spec":
                info.spec.CopyFrom(jobs_pb2.JobSpec(name="n", script=b"#!/bin/sh\n", nice=3))
            elif f.name == "batch_usage":
                info.batch_usage.max_rss_kb = 7
            elif f.name == "allocation":
                info.allocation.add(node="n1", cpus=2, cpu_ids=[0, 1], gpu_indices=[3])
            elif f.name == "steps":
                info.steps.add(job_id=1, step_id=0, name="s", state=jobs_pb2.RUNNING)
            else:
                raise AssertionError(f"a message field this test does not fill: {f.name}")
        elif repeated:
            getattr(info, f.name).extend(["n1", "n2"])
        elif f.type == FieldDescriptor.TYPE_STRING:
            setattr(info, f.name, f"v{i}")
        elif f.type == FieldDescriptor.TYPE_BOOL:
            setattr(info, f.name, True)
        elif f.type == FieldDescriptor.TYPE_ENUM:
            setattr(info, f.name, jobs_pb2.RUNNING)
        else:
            setattr(info, f.name, i)
    return info


def test_stored_form_round_trips_every_field() -> None:
    info = _filled()
    job = record.from_proto(info)
    assert record.stored(job) == info
    assert record.from_bytes(info.SerializeToString()).job_id == info.job_id


def test_from_proto_shares_nothing() -> None:
    info = _filled()
    job = record.from_proto(info)
    job.allocation[0].cpus = 9
    job.steps[0].name = "changed"
    job.req_nodes.append("n3")
    assert info.allocation[0].cpus == 2 and info.steps[0].name == "s" and list(info.req_nodes) == ["n1", "n2"]


def test_wire_form_leaves_out_the_internal_fields() -> None:
    info = _filled()
    sent = record.wire(record.from_proto(info))
    for name in INTERNAL:
        assert not sent.HasField(name) if name == "batch_usage" else not getattr(sent, name), name
    kept = jobs_pb2.JobInfo()
    kept.CopyFrom(info)
    for name in INTERNAL:
        kept.ClearField(name)  # type: ignore[arg-type]
    assert sent == kept
    assert not record.wire(record.from_proto(info), spec=False, steps=False).HasField("spec")


def test_copy_is_independent() -> None:
    job = record.from_proto(_filled())
    twin = job.copy()
    assert record.stored(twin) == record.stored(job)
    twin.allocation.clear()
    twin.steps[0].state = jobs_pb2.CANCELLED
    twin.batch_usage.max_rss_kb = 1
    assert job.allocation and job.steps[0].state == jobs_pb2.RUNNING and job.batch_usage.max_rss_kb == 7


def test_copy_starts_outside_every_table_and_cache() -> None:
    """An array task copied from the prototype is counted once it enters state.jobs, never before."""
    table = JobTable()
    job = _pending()
    table[job.job_id] = job
    job.spec = record.with_spec(job.spec, name="renamed")  # moves version and changes
    twin = job.copy()
    assert (twin.table, twin.counted_as, twin.version, twin.changes) == (None, None, 0, 0)
    assert twin.cached_request is None and twin.attached_request is None
    twin.state = jobs_pb2.RUNNING  # not told to the prototype's table
    assert dict(table.queued()) == dict(recount(table.values())) and table.active == 1
    assert job.table is table and job.state == jobs_pb2.PENDING


def _pending() -> JobRecord:
    return JobRecord(
        job_id=7,
        user_id=1000,
        state=jobs_pb2.PENDING,
        partition="debug",
        submit_time=100,
        spec=jobs_pb2.JobSpec(name="j", min_nodes=1, time_limit_min=10, batch=True),
    )


def test_version_moves_with_what_the_request_is_built_from() -> None:
    job = _pending()
    v = job.version
    job.state_reason = "Priority"  # the applier's, every cycle
    job.last_sched_eval = 5
    job.sched_nodes = "n1"
    job.priority = 4242  # the scheduler's own value: not an input
    assert job.version == v
    job.held = False  # unchanged value: no change
    assert job.version == v
    job.held = True
    assert job.version == v + 1
    job.spec = record.with_spec(job.spec, nice=10)
    assert job.version == v + 2
    job.priority_set = True
    job.priority = 99  # an admin's value: the request's admin_priority
    assert job.version == v + 4


def test_request_inputs_are_all_that_job_request_reads() -> None:
    # every field outside REQUEST_INPUTS may change without changing the JobRequest (else the cache
    # in ClusterState.request would keep a stale one): change each and compare
    base = jobrec.job_request(_pending(), {})
    info = _filled()
    for name in sorted(RECORD_FIELDS - REQUEST_INPUTS):
        job = _pending()
        setattr(job, name, getattr(record.from_proto(info), name))
        assert jobrec.job_request(job, {}) == base, f"job_request reads {name}: add it to REQUEST_INPUTS"


def test_ctld_never_edits_a_record_spec_or_lists_in_place() -> None:
    # the request cache sees a new spec, not an edited one: `job.spec = with_spec(job.spec, ...)`
    # nor its allocation or node lists: the listing views see an assignment (`changes`), not an edit
    edit = re.compile(
        r"\bjob\.spec\.\w+\s*(=|\+=|-=)(?!=)|\bjob\.spec\.(CopyFrom|MergeFrom|Clear)"
        r"|\.(allocation|req_nodes|exc_nodes|prolog_pending)(\.(append|extend|clear|pop|remove|insert|sort|add)\(|\[[^]]*\]\s*=(?!=))"
        r"|\bdel \w+\.(allocation|req_nodes|exc_nodes|prolog_pending)\b"
    )
    root = Path(record.__file__).resolve().parent
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.rglob("*.py"))
        if "sim" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if edit.search(line)
    ]
    assert not found, f"in-place edits of a record's spec or lists: {found}"


def test_changes_count_every_assignment_that_changes_a_value() -> None:
    job = _pending()
    c = job.changes
    job.state_reason = ""  # the default it has: no change
    assert job.changes == c
    job.state_reason = "Priority"
    job.allocation = []
    assert job.changes == c + 2
    job.cached_request = None
    assert job.changes == c + 2
