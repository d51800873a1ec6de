"""What the shared helpers read of a job: a JobInfo from the wire or ctld's own JobRecord (ctld/record.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

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


def pending_row(job: JobView) -> tuple[int, str, str] | None:
    """The squeue row an array's pending task shares with its array's other pending tasks waiting for
    the same reason in the same partition (22.05 keeps them as one record); None for any other job.
    ctld folds a listing by it for squeue, and squeue folds what a controller that predates that sends."""
    if job.state == jobs_pb2.PENDING and job.array_job_id and job.array_task_id >= 0:
        return (job.array_job_id, job.state_reason, job.partition)
    return None


def row_tasks(first: JobView, task_ids: Iterable[int]) -> str:
    """Such a row's task list as squeue shows it: "1-3,5", and "%N" for a throttle."""
    from shoal.arrayspec import format_task_ids  # lazy: dataclasses/inspect cost ~10 ms at start-up

    listed = format_task_ids(task_ids)
    return f"{listed}%{first.array_max_tasks}" if first.array_max_tasks else listed


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
)
BRIEF_SPEC_FIELDS = ("name", "reservation", "begin_time")
