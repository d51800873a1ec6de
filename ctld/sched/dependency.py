"""--dependency: parse the option and decide whether a job may start yet.

Forms: "afterok:12:13", "after:5,afterany:7" (all terms), "afterok:12?afternotok:13" (any term),
"singleton", a bare "12" (afterany), "afterburstbuffer" (no burst buffers: same as afterany). Limitations, on purpose for now:
- "after:12+5" (start N minutes after): the +time is accepted and ignored.
- "afterok:30_2" (one array task): stored as the whole array job 30, so it waits for every task.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

from ctld.sched.model import Dependency, DependencySpec, JobRequest, JobStatus, Phase

Verdict = Literal["ok", "wait", "never"]

INVALID = "Invalid dependency specification"
KINDS = frozenset({"after", "afterany", "afterburstbuffer", "afterok", "afternotok", "aftercorr"})
_JOB_REF = re.compile(r"^(\d+)(?:_(\d+|\*))?(?:\+(\d+))?$")
_FINISHED = frozenset({Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED})


def parse_dependency(text: str) -> DependencySpec:
    """Parse a --dependency value; ValueError("Invalid dependency specification") on garbage."""
    body = text.strip()
    if not body:
        return DependencySpec()
    if "," in body and "?" in body:
        raise ValueError(INVALID)  # Slurm refuses to mix "all of" and "any of"
    any_of = "?" in body
    terms = tuple(_parse_term(term) for term in body.split("?" if any_of else ","))
    return DependencySpec(terms=terms, any_of=any_of)


def _parse_term(term: str) -> Dependency:
    term = term.strip()
    if term == "singleton":
        return Dependency(kind="singleton")
    if _JOB_REF.match(term):
        return Dependency(kind="afterany", job_ids=(_job_id(term),))
    kind, _, refs = term.partition(":")
    if kind not in KINDS or not refs:
        raise ValueError(INVALID)
    return Dependency(kind=kind, job_ids=tuple(_job_id(ref) for ref in refs.split(":")))


def _job_id(ref: str) -> int:
    match = _JOB_REF.match(ref)
    if match is None or int(match.group(1)) == 0:
        raise ValueError(INVALID)
    return int(match.group(1))


def referenced_ids(spec: DependencySpec) -> set[int]:
    """Every job id the spec names (the controller refuses ids that never existed)."""
    return {job_id for term in spec.terms for job_id in term.job_ids}


class StatusIndex(dict[int, list[JobStatus]]):
    """Job id (and array master id) -> statuses, as `status_index` builds it.

    It also answers singleton's question per (user, name) from one pass over the statuses, made
    the first time a singleton job asks (scanning every known job for each such job was quadratic).
    """

    def __init__(self, statuses: Iterable[JobStatus]) -> None:
        super().__init__()
        self._statuses = tuple(statuses)
        self._owners: dict[tuple[int, str], tuple[set[int], int]] | None = None

    def same_name(self, user_id: int, name: str) -> tuple[set[int], int]:
        """(ids of the user's active jobs of that name, the smallest id of their pending ones or 0)."""
        if self._owners is None:
            owners: dict[tuple[int, str], tuple[set[int], int]] = {}
            seen: set[int] = set()
            for status in self._statuses:
                if status.job_id in seen:
                    continue
                seen.add(status.job_id)
                active, first = owners.get((status.user_id, status.name), (set(), 0))
                if status.phase is Phase.ACTIVE:
                    active.add(status.job_id)
                elif status.phase is Phase.PENDING and (first == 0 or status.job_id < first):
                    first = status.job_id
                owners[(status.user_id, status.name)] = (active, first)
            self._owners = owners
        return self._owners.get((user_id, name), (set(), 0))


def status_index(statuses: Iterable[JobStatus]) -> StatusIndex:
    """Map each job id, and each array master id, to the statuses it stands for.

    An array master id stands for all its tasks (the first task shares the master's id).
    """
    statuses = tuple(statuses)
    index = StatusIndex(statuses)
    for status in statuses:
        if status.array_job_id:
            index.setdefault(status.array_job_id, []).append(status)
            if status.job_id != status.array_job_id:
                index.setdefault(status.job_id, []).append(status)
        else:
            index.setdefault(status.job_id, []).append(status)
    return index


def evaluate(job: JobRequest, jobs: Mapping[int, list[JobStatus]]) -> Verdict:
    """Whether `job`'s dependency is satisfied now ("ok"), later ("wait") or never ("never")."""
    spec = job.dependency
    if not spec.terms:
        return "ok"
    verdicts = [term_verdict(job, term, jobs) for term in spec.terms]
    if spec.any_of:
        if "ok" in verdicts:
            return "ok"
        return "never" if all(v == "never" for v in verdicts) else "wait"
    return _all(verdicts)


def _all(verdicts: Iterable[Verdict]) -> Verdict:
    found = set(verdicts)
    if "never" in found:
        return "never"
    return "wait" if "wait" in found else "ok"


def term_verdict(job: JobRequest, term: Dependency, jobs: Mapping[int, list[JobStatus]]) -> Verdict:
    """One term of the job's --dependency: satisfied now, later or never."""
    if term.kind == "singleton":
        return _singleton(job, jobs)
    verdicts: list[Verdict] = []
    for target in term.job_ids:
        statuses = jobs.get(target, [])
        if term.kind == "aftercorr":
            statuses = [s for s in statuses if s.array_task_id == job.array_task_id]
        # A target the controller no longer knows was purged after finishing: satisfied.
        verdicts.extend(_one(term.kind, status.phase) for status in statuses)
    return _all(verdicts)


def _one(kind: str, phase: Phase) -> Verdict:
    if kind == "after":
        return "wait" if phase is Phase.PENDING else "ok"
    if phase not in _FINISHED:
        return "wait"
    if kind in ("afterany", "afterburstbuffer"):  # no burst buffers here: same as afterany
        return "ok"
    if kind in ("afterok", "aftercorr"):
        return "ok" if phase is Phase.COMPLETED else "never"
    return "never" if phase is Phase.COMPLETED else "ok"  # afternotok


def _singleton(job: JobRequest, jobs: Mapping[int, list[JobStatus]]) -> Verdict:
    """No other job of the same user and name is running, or pending ahead of this one."""
    index = (
        jobs
        if isinstance(jobs, StatusIndex)
        else StatusIndex(s for statuses in jobs.values() for s in statuses)
    )
    active, first_pending = index.same_name(job.user_id, job.name)
    if active - {job.job_id} or 0 < first_pending < job.job_id:
        return "wait"
    return "ok"
