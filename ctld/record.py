"""The controller's memory of one job: JobRecord, a typed record, and its protobuf forms.

ctld keeps `state.jobs: dict[int, JobRecord]`; a job becomes protobuf only where it leaves the
process: `stored` for the state store (every field), `wire` for RPC answers and node launches (less
the controller's own bookkeeping, INTERNAL). Field names are JobInfo's, one for one (a record keeps
every JobInfo field: tests/unit/ctld/test_record.py fails when a JobInfo field is neither here nor in
WIRE_ONLY), so `job.some_field` reads and writes the same name in memory and on the wire.

`version` counts the changes of what the core's JobRequest is built from (REQUEST_INPUTS; see
ctld.jobs.job_request): ClusterState keeps a pending job's JobRequest until its record's version moves;
`changes` counts every change (GetJobs' listing views, ctld/listing.py, keep a job's bytes until it
moves). A record in `state.jobs` knows its table (ctld/job_table.py) and tells it when a COUNTED field
changes, so the counts a submission checks stay current without a pass over every job. Both see assignments only: `spec` (the JobSpec as submitted, then as updated) and the lists
`allocation`, `req_nodes`, `exc_nodes` are replaced, never edited in place
(`job.spec = with_spec(job.spec, nice=5)`, `job.allocation = [...]`, `prolog_pending` too;
tests/unit/ctld/test_record.py
finds in-place edits). `steps` and `batch_usage` may be edited in place (listings read steps anew).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from shoal.v1 import jobs_pb2

if TYPE_CHECKING:
    from ctld.sched.model import JobRequest

JobState: TypeAlias = jobs_pb2.JobState.ValueType

# what ctld.jobs.job_request reads of a record (a change bumps `version`, so the cached request is
# rebuilt); `priority` counts only while an admin's value holds (priority_set): the scheduler rewrites
# it every cycle otherwise
REQUEST_INPUTS = frozenset(
    {
        "job_id",
        "user_id",
        "spec",
        "submit_time",
        "partition",
        "priority",
        "priority_set",
        "qos",
        "account",
        "site_factor",
        "held",
        "held_by_admin",
        "array_job_id",
        "array_task_id",
        "array_max_tasks",
    }
)
_UNSET = object()
_BOOKKEEPING = frozenset({"version", "changes", "cached_request", "attached_request", "table", "counted_as"})
# what a job table counts a job by (ctld/job_table.py): a change of one is reported to the table
COUNTED = frozenset({"state", "account", "user_name", "partition", "qos", "user_id"})
# (account, user_name, partition, qos, user_id) of a pending or running job, built from COUNTED
CountKey: TypeAlias = tuple[str, str, str, str, int]


class Table(Protocol):
    """The job table a record is in (ctld.job_table.JobTable), told when a COUNTED field changes."""

    def recount_job(self, job: JobRecord) -> None: ...


_OBJECTS = frozenset(
    {"spec", "allocation", "req_nodes", "exc_nodes", "batch_usage", "steps", "prolog_pending"}
)


@dataclass(slots=True, eq=False)
class JobRecord:
    """One job as the controller keeps it (see the module docstring)."""

    version: int = field(default=0, init=False, repr=False)
    changes: int = field(default=0, init=False, repr=False)  # every change of a field's value (listing views)
    # the core's view of the job as of `version` (ClusterState.request); not stored, not sent
    cached_request: tuple[int, JobRequest] | None = field(default=None, init=False, repr=False)
    # that view with its association and QOS (ctld.accounting's attach): (the view, with them)
    attached_request: tuple[JobRequest, JobRequest] | None = field(default=None, init=False, repr=False)
    # the job table holding the record (state.jobs), and the key it counts the record under there
    table: Table | None = field(default=None, init=False, repr=False)
    counted_as: CountKey | None = field(default=None, init=False, repr=False)
    job_id: int = 0
    array_job_id: int = 0
    array_task_id: int = 0
    array_max_tasks: int = 0
    spec: jobs_pb2.JobSpec = field(
        default_factory=jobs_pb2.JobSpec
    )  # as submitted/updated: replaced, never edited in place
    user_id: int = 0
    group_id: int = 0
    user_name: str = ""
    group_name: str = ""
    state: JobState = jobs_pb2.JOB_STATE_UNSPECIFIED
    state_reason: str = ""
    exit_code: int = 0
    exit_signal: int = 0
    derived_exit_code: int = 0
    derived_exit_signal: int = 0
    priority: int = 0
    submit_time: int = 0
    eligible_time: int = 0
    start_time: int = 0
    end_time: int = 0
    suspend_time: int = 0
    last_sched_eval: int = 0
    time_limit_min: int = 0
    restarts: int = 0
    requeue: bool = False
    partition: str = ""
    account: str = ""
    qos: str = ""
    allocation: list[jobs_pb2.NodeAlloc] = field(default_factory=list)
    nodes: str = ""
    batch_host: str = ""
    num_nodes: int = 0
    num_cpus: int = 0
    num_tasks: int = 0
    mem_mb: int = 0
    num_gpus: int = 0
    tres_req: str = ""
    tres_alloc: str = ""
    tres_per_node: str = ""
    std_out: str = ""
    std_err: str = ""
    std_in: str = ""
    held_by_admin: bool = False
    cancelled_by: str = ""
    cancelled_by_uid: int = 0
    array_task_str: str = ""
    sched_nodes: str = ""
    preempt_time: int = 0
    alloc_node_sid: str = ""
    req_nodes: list[str] = field(default_factory=list)
    exc_nodes: list[str] = field(default_factory=list)
    accrue_time: int = 0
    min_cpus_node: int = 0
    min_memory_cpu_mb: int = 0
    min_memory_node_mb: int = 0
    oversubscribe: bool = False
    batch_flag: int = 0
    final_state: JobState = jobs_pb2.JOB_STATE_UNSPECIFIED
    held: bool = False
    warn_signal_sent: bool = False
    launch_node_ip: str = ""
    min_nodes_req: int = 0
    max_nodes_req: int = 0
    batch_usage: jobs_pb2.Usage = field(default_factory=jobs_pb2.Usage)
    priority_set: bool = False
    preempt_eligible_time: int = 0
    site_factor: int = 0
    steps: list[jobs_pb2.JobStep] = field(default_factory=list)
    next_step_id: int = 0
    scheduler: str = ""
    suspended_secs: int = 0
    pre_suspend_secs: int = 0
    prolog_pending: list[str] = field(default_factory=list)  # PrologFlags=Alloc: nodes still in their Prolog
    prolog_nohold: bool = False
    extern_step: bool = False
    gang_suspended: bool = False
    gpu_idle_since: int = 0
    gpu_idle_notified: bool = False
    gpu_idle_cancelled: bool = False
    array_split: bool = False

    def __setattr__(self, name: str, value: object) -> None:
        if name in _BOOKKEEPING:
            object.__setattr__(self, name, value)
            return
        old = getattr(self, name, _UNSET)
        object.__setattr__(self, name, value)
        if old is _UNSET or old is value or (name not in _OBJECTS and old == value):
            return  # being built, or no change (a message or list assigned anew is one)
        object.__setattr__(self, "changes", self.changes + 1)
        if name in COUNTED and self.table is not None:
            self.table.recount_job(self)
        if name in REQUEST_INPUTS and (name != "priority" or self.priority_set):
            object.__setattr__(self, "version", self.version + 1)

    def copy(self) -> JobRecord:
        """An independent copy (its own allocation, steps and usage; the spec is shared: never edited),
        new to every table and cache. Field by field, past `__setattr__`: an array's submission copies
        its prototype once per task, and a copy through the stored form cost ~50 us a task."""
        twin = object.__new__(JobRecord)
        put = object.__setattr__
        for name, value in zip(_FIELDS, _get_fields(self), strict=True):
            put(twin, name, value)
        for name, value in _FRESH:
            put(twin, name, value)
        put(twin, "allocation", [_copied(a, jobs_pb2.NodeAlloc()) for a in self.allocation])
        put(twin, "req_nodes", list(self.req_nodes))
        put(twin, "exc_nodes", list(self.exc_nodes))
        put(twin, "prolog_pending", list(self.prolog_pending))
        put(twin, "batch_usage", _copied(self.batch_usage, jobs_pb2.Usage()))
        put(twin, "steps", [_copied(s, jobs_pb2.JobStep()) for s in self.steps])
        return twin


# JobInfo fields a record does not keep: derived when the job is sent (none today)
WIRE_ONLY: frozenset[str] = frozenset()

# the controller's own bookkeeping: in the store, never in an answer (squeue, scontrol, srun, nodes)
INTERNAL = frozenset(
    {
        "final_state",  # what a COMPLETING job becomes
        "warn_signal_sent",
        "launch_node_ip",
        "min_nodes_req",
        "max_nodes_req",
        "batch_usage",  # for accounting's .batch record
        "priority_set",
        "site_factor",
        "next_step_id",
        "held_by_admin",
        "cancelled_by_uid",
    }
)

_MESSAGES = ("spec", "allocation", "req_nodes", "exc_nodes", "batch_usage", "steps", "prolog_pending")
_SCALARS = tuple(f.name for f in fields(JobRecord) if f.init and f.name not in _MESSAGES)
# what `stored` and `wire` copy besides the spec, read in one call; unset (falsy) values are left out,
# as protobuf leaves defaults out anyway
_STORED = (*_SCALARS, "allocation", "req_nodes", "exc_nodes", "batch_usage", "steps", "prolog_pending")
_WIRE = tuple(n for n in _STORED if n not in INTERNAL and n != "steps")
# by field number around `spec` (5) and `steps` (90): a listing splices its own spec and steps in
_NUMBER = {f.name: f.number for f in jobs_pb2.JobInfo.DESCRIPTOR.fields}
WIRE_PARTS = (
    tuple(n for n in _WIRE if _NUMBER[n] < _NUMBER["spec"]),
    tuple(n for n in _WIRE if _NUMBER["spec"] < _NUMBER[n] < _NUMBER["steps"]),
    tuple(n for n in _WIRE if _NUMBER[n] > _NUMBER["steps"]),
)
_get_stored = attrgetter(*_STORED)
# what `JobRecord.copy` takes over as it is (the spec is shared, never edited), and the bookkeeping a
# copy starts from (a record new to every table and cache: the defaults)
_FIELDS = (*_SCALARS, "spec")
_get_fields = attrgetter(*_FIELDS)
_FRESH = tuple((f.name, f.default) for f in fields(JobRecord) if not f.init)
_get_wire = attrgetter(*_WIRE)


def stored(job: JobRecord, *, spec: bool = True) -> jobs_pb2.JobInfo:
    """Every field, as the state store keeps it (`spec=False`: without the spec)."""
    info = jobs_pb2.JobInfo(**{n: v for n, v in zip(_STORED, _get_stored(job), strict=True) if v})
    if spec:
        info.spec.CopyFrom(job.spec)
    return info


def wire(job: JobRecord, *, spec: bool = True, steps: bool = True) -> jobs_pb2.JobInfo:
    """The job as an answer or a node gets it: INTERNAL left out (`spec`, `steps`: with them)."""
    info = jobs_pb2.JobInfo(**{n: v for n, v in zip(_WIRE, _get_wire(job), strict=True) if v})
    if steps and job.steps:
        info.steps.extend(job.steps)
    if spec:
        info.spec.CopyFrom(job.spec)
    return info


def from_proto(info: jobs_pb2.JobInfo) -> JobRecord:
    """A record from its stored form (a copy: nothing is shared with `info`)."""
    kw: dict[str, Any] = {n: getattr(info, n) for n in _SCALARS}
    spec = jobs_pb2.JobSpec()
    spec.CopyFrom(info.spec)
    usage = jobs_pb2.Usage()
    usage.CopyFrom(info.batch_usage)
    return JobRecord(
        **kw,
        spec=spec,
        allocation=[_copied(a, jobs_pb2.NodeAlloc()) for a in info.allocation],
        req_nodes=list(info.req_nodes),
        exc_nodes=list(info.exc_nodes),
        prolog_pending=list(info.prolog_pending),
        batch_usage=usage,
        steps=[_copied(s, jobs_pb2.JobStep()) for s in info.steps],
    )


def from_bytes(data: bytes) -> JobRecord:
    return from_proto(jobs_pb2.JobInfo.FromString(data))


def with_spec(spec: jobs_pb2.JobSpec, **changes: Any) -> jobs_pb2.JobSpec:
    """A copy of `spec` with `changes` (a record's spec is replaced, never edited in place)."""
    new = jobs_pb2.JobSpec()
    new.CopyFrom(spec)
    for name, value in changes.items():
        setattr(new, name, value)
    return new


def _copied(src: Any, dst: Any) -> Any:
    dst.CopyFrom(src)
    return dst
