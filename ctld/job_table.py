"""The controller's jobs by id (`state.jobs`), with the counts a submission checks kept as jobs change.

A submission asks how many jobs are in the system (MaxJobCount) and how many each association and
each user of a QOS has pending or running (MaxSubmitJobs, GrpSubmitJobs, MaxSubmitPU). Counting them
by a pass over every job made each submission O(jobs) (issue 19); `JobTable` keeps the counts instead,
in one place: a job is counted when it enters the table (a submission's commit, recovery), moved when
one of the fields the count is keyed by changes (`COUNTED`: the record tells its table, see
ctld/record.py), and uncounted when it leaves (the purge after MinJobAge). The keys are the job's own
fields, not association ids, so a reload of the association cache needs no recount: the caller maps
the few distinct keys to associations when it asks (ctld/accounting.py `admit`).

A job is counted while it is not finished (shoal.states.FINISHED_STATES), as the passes it replaces.
`recount(jobs)` counts from scratch: the tests compare it with the kept counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ctld.record import COUNTED, CountKey, JobRecord
from shoal.states import FINISHED_STATES

__all__ = ["COUNTED", "CountKey", "JobTable", "count_key", "recount"]


def count_key(job: JobRecord) -> CountKey | None:
    """Where `job` is counted; None: it is not (finished)."""
    if job.state in FINISHED_STATES:
        return None
    return (job.account, job.user_name, job.partition, job.qos, job.user_id)


def recount(jobs: Iterable[JobRecord]) -> Counter[CountKey]:
    """The counts from scratch, by a pass over `jobs`."""
    counts: Counter[CountKey] = Counter()
    for job in jobs:
        key = count_key(job)
        if key is not None:
            counts[key] += 1
    return counts


class JobTable(dict[int, JobRecord]):
    """A dict of jobs by id that counts its unfinished jobs by CountKey (see the module docstring).

    Every way a dict gains or loses an entry goes through `_attach` / `_detach`; reads are a dict's."""

    __slots__ = ("_by_key", "_active")

    def __init__(self, jobs: Mapping[int, JobRecord] | None = None) -> None:
        super().__init__()
        self._by_key: Counter[CountKey] = Counter()
        self._active = 0
        if jobs:
            self.update(jobs)

    # ------------------------------------------------------------------ what a submission reads
    @property
    def active(self) -> int:
        """Jobs not finished (what MaxJobCount bounds)."""
        return self._active

    def queued(self) -> Mapping[CountKey, int]:
        """Pending or running jobs by (account, user_name, partition, qos, user_id); no zero counts."""
        return self._by_key

    # ------------------------------------------------------------------ the record's call
    def recount_job(self, job: JobRecord) -> None:
        """A COUNTED field of `job` changed (called by the record): move it to its new key."""
        key = count_key(job)
        if key != job.counted_as:
            self._uncount(job)
            self._count(job, key)

    # ------------------------------------------------------------------ entries in and out
    def __setitem__(self, job_id: int, job: JobRecord) -> None:
        old = super().get(job_id)
        if old is not None and old is not job:
            self._detach(old)
        super().__setitem__(job_id, job)
        if old is not job:
            self._attach(job)

    def __delitem__(self, job_id: int) -> None:
        job = super().__getitem__(job_id)
        super().__delitem__(job_id)
        self._detach(job)

    def pop(self, job_id: int, *default: Any) -> Any:
        if job_id not in self:
            return super().pop(job_id, *default)
        job = super().pop(job_id)
        self._detach(job)
        return job

    def popitem(self) -> tuple[int, JobRecord]:
        job_id, job = super().popitem()
        self._detach(job)
        return job_id, job

    def clear(self) -> None:
        for job in self.values():
            self._detach(job)
        super().clear()

    def setdefault(self, job_id: int, default: JobRecord | None = None) -> JobRecord:
        if job_id not in self:
            if default is None:
                raise TypeError("a job table holds job records only")
            self[job_id] = default
        return self[job_id]

    def update(self, *others: Any, **kw: Any) -> None:
        if kw:
            raise TypeError("a job table is keyed by job id")
        for other in others:
            items = other.items() if hasattr(other, "items") else other
            for job_id, job in items:
                self[job_id] = job

    def __ior__(self, other: Any) -> JobTable:  # type: ignore[override,misc]
        self.update(other)
        return self

    def copy(self) -> JobTable:
        """A table of the same records (they stay attached to this one)."""
        raise TypeError("a job table is not copied: its records report to one table (use dict(table))")

    # ------------------------------------------------------------------ counting
    def _attach(self, job: JobRecord) -> None:
        if job.table is not None and job.table is not self:
            raise ValueError(f"job {job.job_id} is already in another job table")
        job.table = self
        self._count(job, count_key(job))

    def _detach(self, job: JobRecord) -> None:
        self._uncount(job)
        job.table = None

    def _count(self, job: JobRecord, key: CountKey | None) -> None:
        job.counted_as = key
        if key is not None:
            self._by_key[key] += 1
            self._active += 1

    def _uncount(self, job: JobRecord) -> None:
        key = job.counted_as
        if key is None:
            return
        job.counted_as = None
        left = self._by_key[key] - 1
        if left:
            self._by_key[key] = left
        else:
            del self._by_key[key]
        self._active -= 1
