"""ctld checks every SubmitJob field itself: a crafted request gets Slurm's refusal, never an overflow,
an INTERNAL error, or a controller that grows without bound (issue 14)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ctld.controller import Caller, Controller
from ctld.errors import SlurmError
from shoal.v1 import jobs_pb2
from tests.unit.ctld.builders import ROOT, crafted_spec, make_controller

NOBODY = Caller(uid=65534, gid=65534, host="login")
SCRIPT = b"#!/bin/sh\ntrue\n"


_spec = crafted_spec


REFUSED = [
    ("min-nodes-2^32-1", {"min_nodes": 2**32 - 1}, "Node count specification invalid"),
    ("max-nodes-2^32-1", {"max_nodes": 2**32 - 1}, "Node count specification invalid"),
    ("tasks-2^32-1", {"num_tasks": 2**32 - 1}, "Task count specification invalid"),
    (
        "cpus-overflow",
        {"num_tasks": 1000, "cpus_per_task": 10**9},
        "Requested node configuration is not available",
    ),
    (
        "time-limit-minus-5",
        {"time_limit_min": -5},
        "Requested time limit is invalid (missing or exceeds some limit)",
    ),
    (
        "time-limit-2^63-1",
        {"time_limit_min": 2**63 - 1},
        "Requested time limit is invalid (missing or exceeds some limit)",
    ),
    ("begin-minus-1", {"begin_time": -1}, "Invalid time specified"),
    ("signal-negative", {"signal_num": -1}, "Invalid --signal specification"),
    ("name-1MB", {"name": "x" * 2**20}, "Pathname of a file, directory or other parameter too long"),
    (
        "script-20MB",
        {"script": b"#" * (20 * 2**20)},
        "Pathname of a file, directory or other parameter too long",
    ),
    (
        "env-100000",
        {"environment": {f"V{i}": "value" * 4 for i in range(100_000)}},
        "Pathname of a file, directory or other parameter too long",
    ),
    ("array-huge", {"array": "1-99999999999"}, "Invalid job array specification"),
    ("array-1001", {"array": "0-1001"}, "Invalid job array specification"),
    ("nice-negative-user", {"nice": -1000}, "Invalid --nice value"),
]


@pytest.mark.parametrize(("fields", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_crafted_fields_are_refused_in_slurms_words(
    controller: Controller, fields: dict[str, object], message: str
) -> None:
    with pytest.raises(SlurmError) as refused:
        controller.submit(_spec(**fields), NOBODY, test_only=False)
    assert refused.value.message == message
    assert not controller.jobs


def test_operators_may_set_a_negative_nice(controller: Controller) -> None:
    """As 22.05: root's `sbatch --nice=-5` is accepted (Nice=-5), a user's is refused."""
    job_id = controller.submit(_spec(nice=-5), ROOT, test_only=False).job_id
    assert controller.jobs[job_id].spec.nice == -5


def test_a_huge_cpu_request_is_accepted_and_pends_as_in_slurm(controller: Controller) -> None:
    """22.05 accepts `sbatch -c 1000000000` (it pends, PartitionConfig); nothing overflows."""
    job_id = controller.submit(_spec(cpus_per_task=10**9), NOBODY, test_only=False).job_id
    assert controller.jobs[job_id].num_cpus == 10**9


@pytest.fixture(scope="module")
def shared_controller() -> Iterator[Controller]:
    with tempfile.TemporaryDirectory() as tmp:
        yield make_controller(Path(tmp))


_U32 = st.one_of(
    st.sampled_from([0, 1, 2, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1]), st.integers(0, 2**32 - 1)
)
_I32 = st.one_of(st.sampled_from([-(2**31), -2, -1, 0, 1, 2**31 - 1]), st.integers(-(2**31), 2**31 - 1))
_U64 = st.one_of(st.sampled_from([0, 1, 2**40, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))
_I64 = st.one_of(
    st.sampled_from([-(2**63), -5, -2, -1, 0, 1, 60, 2**32, 2**63 - 1]), st.integers(-(2**63), 2**63 - 1)
)
_WORDS = st.sampled_from(
    [
        "",
        "batch",
        "gpu:1",
        "gpu:h100:2",
        "n1",
        "n[1-2]",
        "afterok:1",
        "0-3%2",
        "1-99999999999",
        "truncate",
        "append",
        "yes",
        "no",
        "normal",
        "/tmp/x-%j.out",
        "ALL",
        "node[",
        "x" * 5000,
    ]
)
_TEXT = st.one_of(_WORDS, st.text(max_size=40), st.text(alphabet="0123456789-,:%[]@", max_size=20))
_BY_TYPE = {
    "TYPE_UINT32": _U32,
    "TYPE_INT32": _I32,
    "TYPE_UINT64": _U64,
    "TYPE_INT64": _I64,
    "TYPE_BOOL": st.booleans(),
    "TYPE_STRING": _TEXT,
    "TYPE_BYTES": st.one_of(st.just(SCRIPT), st.binary(max_size=64), st.just(b"#" * (5 * 2**20))),
}


def _field_strategy(field: object) -> st.SearchStrategy[object]:
    from google.protobuf.descriptor import FieldDescriptor

    names = {getattr(FieldDescriptor, n): n for n in dir(FieldDescriptor) if n.startswith("TYPE_")}
    kind = names[field.type]  # type: ignore[attr-defined]
    if field.message_type is not None:  # type: ignore[attr-defined]  # map<string, string> environment
        return st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=5)
    base = _BY_TYPE[kind]
    if field.is_repeated:  # type: ignore[attr-defined]
        return st.lists(base, max_size=3)
    return base


@st.composite
def _specs(draw: st.DrawFn) -> jobs_pb2.JobSpec:
    """A JobSpec with a few of its fields (any of them) set to any value of their wire type."""
    spec = _spec()
    fields = jobs_pb2.JobSpec.DESCRIPTOR.fields
    for index in sorted(draw(st.sets(st.integers(0, len(fields) - 1), max_size=6))):
        field = fields[index]
        value = draw(_field_strategy(field))
        if field.message_type is not None:
            spec.environment.update(value)  # type: ignore[arg-type]
        elif field.is_repeated:
            getattr(spec, field.name).extend(value)
        else:
            setattr(spec, field.name, value)
    return spec


# the deadline is the "bounded time" of the issue: generous, so only a submission that runs away fails it
@settings(
    max_examples=300,
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=_specs(), operator=st.booleans())
def test_any_submit_job_gets_an_answer_or_slurms_refusal(
    shared_controller: Controller, spec: jobs_pb2.JobSpec, operator: bool
) -> None:
    """Every field, any value of its wire type: the controller answers or refuses in Slurm's words, and
    quickly (a crafted request must not hold the controller's lock for long)."""
    try:
        shared_controller.submit(spec, ROOT if operator else NOBODY, test_only=spec.wait)
        event("accepted")
    except SlurmError as exc:
        assert exc.message and "Unexpected" not in exc.message
        event(exc.message.splitlines()[-1])


def test_most_nodes_times_a_terabyte_is_a_pending_job_not_an_overflow(shared_controller: Controller) -> None:
    """-N 2147483647 --mem=1T (found by the fuzz above): the memory shown for the request overflowed
    JobInfo.mem_mb (a ValueError). 22.05 accepts the job and leaves it PENDING (PartitionConfig)."""
    job_id = shared_controller.submit(
        _spec(min_nodes=2147483647, mem_per_node_mb=1 << 40), NOBODY, test_only=False
    ).job_id
    assert shared_controller.jobs[job_id].state == jobs_pb2.PENDING


_UPDATE_KEYS = st.sampled_from(
    [
        "TimeLimit",
        "Nice",
        "Priority",
        "Partition",
        "Name",
        "NumNodes",
        "NumCPUs",
        "NumTasks",
        "MinMemoryNode",
        "StartTime",
        "Dependency",
        "Comment",
        "QOS",
        "Account",
        "SiteFactor",
        "ExcNodeList",
        "ReqNodeList",
        "TimeMin",
        "ArrayTaskThrottle",
    ]
)


@settings(max_examples=200, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])
@given(fields=st.lists(st.tuples(_UPDATE_KEYS, _TEXT), min_size=1, max_size=3), operator=st.booleans())
def test_any_update_job_gets_an_answer_or_slurms_refusal(
    shared_controller: Controller, fields: list[tuple[str, str]], operator: bool
) -> None:
    """`scontrol update job` sends its pairs as text: whatever they say, the controller answers in words."""
    from shoal.v1 import common_pb2, controller_pb2

    job_id = shared_controller.submit(_spec(), NOBODY, test_only=False).job_id
    request = controller_pb2.UpdateJobRequest(
        job_ids=[str(job_id)],
        action="update",
        fields=[common_pb2.KeyValue(key=k, value=v) for k, v in fields],
    )
    try:
        shared_controller.update_job(request, ROOT if operator else NOBODY)
    except SlurmError as exc:
        assert exc.message and "Unexpected" not in exc.message
