"""What the shared helpers read of a job: a JobInfo from the wire or ctld's own JobRecord (ctld/record.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from shoal.v1 import jobs_pb2


class JobView(Protocol):
    """A job's fields by JobInfo's names, read only."""

    @property
    def job_id(self) -> int: ...
    @property
    def array_job_id(self) -> int: ...
    @property
    def array_task_id(self) -> int: ...
    @property
    def spec(self) -> jobs_pb2.JobSpec: ...
    @property
    def user_id(self) -> int: ...
    @property
    def group_id(self) -> int: ...
    @property
    def user_name(self) -> str: ...
    @property
    def state(self) -> int: ...
    @property
    def start_time(self) -> int: ...
    @property
    def end_time(self) -> int: ...
    @property
    def suspended_secs(self) -> int: ...
    @property
    def pre_suspend_secs(self) -> int: ...
    @property
    def nodes(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def account(self) -> str: ...
    @property
    def restarts(self) -> int: ...
    @property
    def state_reason(self) -> str: ...
    @property
    def array_max_tasks(self) -> int: ...


V = TypeVar("V", bound=JobView)


def in_array_record(job: jobs_pb2.JobInfo) -> bool:
    """An array task that has never left its array's pending record: 22.05 shows it under the array's
    id (scontrol JobId=, squeue %A). Starting, a requeue, or a change of that task alone (array_split:
    hold, release, update of A_T) gives it a record of its own (scenarios 134, 245)."""
    return job.state == jobs_pb2.PENDING and not (job.restarts or job.array_split)


def oversubscribe_text(job: jobs_pb2.JobInfo) -> str:
    """OverSubscribe= and squeue %h as 22.05 shows them: NO for a job that holds (or, pending, asks
    for) its nodes alone, YES for -s without --exclusive, else OK (scenario 254)."""
    shared = job.oversubscribe if job.nodes else not job.spec.exclusive  # started: what it got
    if not shared:
        return "NO"
    return "YES" if job.spec.oversubscribe and not job.spec.exclusive else "OK"


def pending_row(job: JobView) -> tuple[int, str] | None:
    """The squeue row an array's pending task shares with its array's other pending tasks in the same
    partition, whatever they wait for (22.05's squeue merges them); None for any other job. ctld folds
    a listing by it for squeue, and squeue folds what a controller that predates that sends."""
    if job.state == jobs_pb2.PENDING and job.array_job_id and job.array_task_id >= 0:
        return (job.array_job_id, job.partition)
    return None


def fold_row(members: Sequence[V]) -> tuple[V, str, str]:
    """One such row: the task whose fields it shows, the tasks it names ("1-3,5", "%N" for a
    throttle) and its reason. 22.05 shows its one pending record (the tasks never changed one by one)
    and joins the distinct reasons of the records merged, that record's first: here the lowest task of
    the most common reason, then the others' reasons by their lowest task."""
    from shoal.arrayspec import format_task_ids  # lazy: dataclasses/inspect cost ~10 ms at start-up

    by_reason: dict[str, list[V]] = {}
    for job in sorted(members, key=lambda j: j.array_task_id):
        by_reason.setdefault(job.state_reason, []).append(job)
    first = max(by_reason.values(), key=len)[0]  # ties: the lowest task's reason
    listed = format_task_ids(j.array_task_id for j in members)
    if first.array_max_tasks:
        listed += f"%{first.array_max_tasks}"
    reasons = [first.state_reason, *(r for r in by_reason if r != first.state_reason)]
    return first, listed, ",".join(reasons)


# A brief listing (GetJobsRequest.brief): the JobInfo fields, and the JobSpec fields of its `spec`,
# that squeue's usual columns, sort keys and filters read (cli/squeue.py BRIEF_KEYS says which
# columns); ctld sends these and nothing else. A field added here widens what a brief listing can show.
BRIEF_FIELDS = (
    "job_id",
    "array_job_id",
    "array_task_id",
    "array_task_str",
    "array_max_tasks",
    "user_id",
    "user_name",
    "state",
    "state_reason",
    "partition",
    "account",
    "qos",
    "num_nodes",
    "num_cpus",
    "nodes",
    "sched_nodes",
    "priority",
    "time_limit_min",
    "submit_time",
    "start_time",
    "end_time",
    "suspended_secs",
    "pre_suspend_secs",
    "restarts",
    "array_split",
)
BRIEF_SPEC_FIELDS = ("name", "reservation", "begin_time")
