"""Association and QOS limits (AccountingStorageEnforce=limits,qos): which jobs wait, and why.

Pure: the cycle asks `AssocUsage.reason(job)` before placing a job and `AssocUsage.add(start)` after
starting one, so two jobs of a MaxJobs=1 association never start in the same cycle. Group limits
(GrpJobs, GrpTRES) count every job under the association, i.e. a user's jobs also count against
the account's association and its ancestors. Reasons are Slurm's words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from ctld.sched.borrowing import CPU, GPU, Cohorts, borrowing_jobs, reclaim
from ctld.sched.model import (
    AccountingLimits,
    AssocLimits,
    JobRequest,
    Partition,
    QosLimits,
    RunningJob,
    Snapshot,
)
from ctld.sched.placement import Overlay
from ctld.sched.preemption import Plan
from ctld.sched.resources import job_cpus, job_gpus

MAX_JOBS = "AssocMaxJobsLimit"
GRP_JOBS = "AssocGrpJobsLimit"
GRP_CPU = "AssocGrpCpuLimit"
GRP_GRES = "AssocGrpGRES"
MAX_CPU_PER_JOB = "AssocMaxCpuPerJobLimit"
MAX_GRES_PER_JOB = "AssocMaxGRESPerJob"
MAX_WALL = "AssocMaxWallDurationPerJobLimit"
QOS_MAX_WALL = "QOSMaxWallDurationPerJobLimit"
QOS_MAX_JOBS_PER_USER = "QOSMaxJobsPerUserLimit"
QOS_MAX_CPU_PER_JOB = "QOSMaxCpuPerJobLimit"
QOS_MAX_GRES_PER_JOB = "QOSMaxGRESPerJob"
SUBMIT_REFUSED = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


class AssocUsage:
    """Jobs, CPUs and GPUs in use per association (including descendants), updated as the cycle starts jobs."""

    def __init__(self, limits: AccountingLimits, running: Iterable[RunningJob]) -> None:
        self._limits = limits
        self._assocs = {a.id: a for a in limits.assocs}
        self._qos = {q.name: q for q in limits.qos}
        self.jobs: Counter[int] = Counter()
        self.cpus: Counter[int] = Counter()
        self.gpus: Counter[int] = Counter()
        self.qos_user_jobs: Counter[tuple[str, int]] = Counter()
        self.cohorts = Cohorts(limits.assocs)
        self._used = {CPU: self.cpus, GPU: self.gpus}
        self._running = tuple(running)
        self._borrowing: dict[int, set[int]] | None = None
        for run in self._running:
            cpus = sum(len(a.cpu_ids) for a in run.allocation)
            gpus = sum(len(a.gpu_indices) for a in run.allocation)
            self._count(run.assoc_id, cpus, gpus)

    def chain(self, assoc_id: int) -> Iterator[AssocLimits]:
        """The association and its ancestors."""
        seen: set[int] = set()
        current = self._assocs.get(assoc_id)
        while current is not None and current.id not in seen:
            seen.add(current.id)
            yield current
            current = self._assocs.get(current.parent_id)

    def _count(self, assoc_id: int, cpus: int, gpus: int) -> None:
        for assoc in self.chain(assoc_id):
            self.jobs[assoc.id] += 1
            self.cpus[assoc.id] += cpus
            self.gpus[assoc.id] += gpus

    def reason(self, job: JobRequest) -> str | None:
        """Why `job` must wait for its association or QOS, or None when it may start."""
        cpus, gpus = job_cpus(job), job_gpus(job)
        qos = self._qos.get(job.qos) if self._limits.enforce_qos else None
        if qos is not None:
            why = _qos_reason(qos, job, cpus, gpus, self.qos_user_jobs[(qos.name, job.user_id)])
            if why:
                return why
        for depth, assoc in enumerate(self.chain(job.assoc_id)):
            if depth == 0 and 0 <= assoc.max_jobs <= self.jobs[assoc.id]:
                return MAX_JOBS
            if 0 <= assoc.max_wall_min and (job.time_limit_min < 0 or job.time_limit_min > assoc.max_wall_min):
                if job.time_limit_min != -1:
                    return MAX_WALL
            if 0 <= assoc.max_cpus_per_job < cpus:
                return MAX_CPU_PER_JOB
            if 0 <= assoc.max_gpus_per_job < gpus:
                return MAX_GRES_PER_JOB
            if 0 <= assoc.grp_jobs <= self.jobs[assoc.id]:
                return GRP_JOBS
            over = self.cohorts.cannot_borrow(assoc, {CPU: cpus, GPU: gpus}, self._used)
            if over is not None:
                return GRP_CPU if over == CPU else GRP_GRES
        return None

    def add(self, job: JobRequest) -> None:
        """`job` starts in this cycle: it counts against its association from now on."""
        self._count(job.assoc_id, job_cpus(job), job_gpus(job))
        self.qos_user_jobs[(job.qos, job.user_id)] += 1
        self.cohorts.started(job.job_id)

    # ---- quota borrowing (borrowing.py)
    def wait_for(self, job: JobRequest) -> None:
        """An eligible pending job, in queue order: the guaranteed quota it fits in is not lent out."""
        self.cohorts.wait_for(job.job_id, list(self.chain(job.assoc_id)), _want(job), self._used)

    def reclaim(
        self, job: JobRequest, parts: Sequence[Partition], snap: Snapshot, overlay: Overlay, gone: frozenset[int],
        now: int,
    ) -> Plan | None:
        """Borrowing jobs to requeue so that `job`, within its guarantee, starts (see borrowing.reclaim)."""
        chain = list(self.chain(job.assoc_id))
        if not self.cohorts.enabled or not self.cohorts.within_guarantee(chain, _want(job), self._used, job.job_id):
            return None
        if self._borrowing is None:
            chains = {a.id: list(self.chain(a.id)) for a in self._limits.assocs}
            self._borrowing = borrowing_jobs(self._running, chains)
        if not self._borrowing:
            return None
        return reclaim(job, chain, parts, snap, overlay, self.cohorts, self._borrowing, gone, now)


def _want(job: JobRequest) -> dict[str, int]:
    return {CPU: job_cpus(job), GPU: job_gpus(job)}


def _qos_reason(qos: QosLimits, job: JobRequest, cpus: int, gpus: int, user_jobs: int) -> str | None:
    if 0 <= qos.max_wall_min and job.time_limit_min != -1:
        if job.time_limit_min < 0 or job.time_limit_min > qos.max_wall_min:
            return QOS_MAX_WALL
    if 0 <= qos.max_jobs_per_user <= user_jobs:
        return QOS_MAX_JOBS_PER_USER
    if 0 <= qos.max_cpus_per_job < cpus:
        return QOS_MAX_CPU_PER_JOB
    if 0 <= qos.max_gpus_per_job < gpus:
        return QOS_MAX_GRES_PER_JOB
    return None


def submit_refusal(
    limits: AccountingLimits, assoc_id: int, qos_name: str, user_id: int, count: int,
    queued: Iterable[tuple[int, str, int]],
) -> str | None:
    """Slurm's refusal when `count` more jobs would pass MaxSubmitJobs/GrpSubmitJobs (or QOS MaxSubmitPU).

    `queued`: (assoc_id, qos, user_id) of every pending or running job.
    """
    usage = AssocUsage(limits, ())
    per_assoc: Counter[int] = Counter()
    per_qos_user = 0
    for queued_assoc, queued_qos, queued_uid in queued:
        for assoc in usage.chain(queued_assoc):
            per_assoc[assoc.id] += 1
        if queued_qos == qos_name and queued_uid == user_id:
            per_qos_user += 1
    for depth, assoc in enumerate(usage.chain(assoc_id)):
        if depth == 0 and 0 <= assoc.max_submit_jobs < per_assoc[assoc.id] + count:
            return SUBMIT_REFUSED
        if 0 <= assoc.grp_submit_jobs < per_assoc[assoc.id] + count:
            return SUBMIT_REFUSED
    qos = {q.name: q for q in limits.qos}.get(qos_name)
    if limits.enforce_qos and qos is not None and 0 <= qos.max_submit_per_user < per_qos_user + count:
        return SUBMIT_REFUSED
    return None
