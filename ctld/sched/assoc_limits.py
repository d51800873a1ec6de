"""Association and QOS limits (AccountingStorageEnforce=limits,qos): which jobs wait, and why.

Pure: the cycle asks `AssocUsage.reason(job, minutes)` before placing a job and `AssocUsage.add(job,
minutes)` after starting one, so two jobs of a MaxJobs=1 association never start in the same cycle.
Group limits (GrpJobs, GrpTRES, GrpTRESMins, GrpTRESRunMins, GrpWall) count every job under the
association, i.e. a user's jobs also count against the account's association and its ancestors.
GrpTRESMins and GrpWall compare the decayed usage the controller accrued (`AccountingLimits.assoc_used`,
`qos_used`); with AccountingStorageEnforce=safe a job also needs room to run to its time limit.
GrpTRESRunMins counts running jobs' remaining minutes (CPUs x time left). A QOS's GrpJobs and GrpTRES
count all its running jobs, its MaxJobsPerUser and MaxTRESPerUser one user's. Reasons are Slurm's words.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ctld.sched.borrowing import CPU, GPU, Cohorts, borrowing_jobs, reclaim
from ctld.sched.model import (
    NO_USAGE_LIMITS,
    AccountingLimits,
    AssocLimits,
    JobRequest,
    Partition,
    QosLimits,
    RunningJob,
    Snapshot,
    UsageLimits,
    UsedMinutes,
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
QOS_GRP_JOBS = "QOSGrpJobsLimit"
QOS_GRP_CPU = "QOSGrpCpuLimit"
QOS_GRP_GRES = "QOSGrpGRES"
QOS_MAX_CPU_PER_USER = "QOSMaxCpuPerUserLimit"
QOS_MAX_GRES_PER_USER = "QOSMaxGRESPerUser"
# usage-limit reasons: (association's, QOS's) per check
USAGE_REASONS = {
    "max_cpu_mins": ("AssocMaxCpuMinutesPerJobLimit", "QOSMaxCpuMinutesPerJobLimit"),
    "max_gpu_mins": ("AssocMaxGRESMinutesPerJob", "QOSMaxGRESMinutesPerJob"),
    "grp_cpu_mins": ("AssocGrpCPUMinutesLimit", "QOSGrpCPUMinutesLimit"),
    "grp_gpu_mins": ("AssocGrpGRESMinutes", "QOSGrpGRESMinutes"),
    "grp_cpu_run_mins": ("AssocGrpCPURunMinutesLimit", "QOSGrpCPURunMinutesLimit"),
    "grp_gpu_run_mins": ("AssocGrpGRESRunMinutes", "QOSGrpGRESRunMinutes"),
    "grp_wall": ("AssocGrpWallLimit", "QOSGrpWallLimit"),
}
SUBMIT_REFUSED = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


class AssocUsage:
    """Jobs, CPUs, GPUs and TRES-minutes in use per association (including descendants) and per QOS,
    updated as the cycle starts jobs."""

    def __init__(self, limits: AccountingLimits, running: Iterable[RunningJob], now: int = 0) -> None:
        self._limits = limits
        self._assocs = {a.id: a for a in limits.assocs}
        self._qos = {q.name: q for q in limits.qos}
        self.jobs: Counter[int] = Counter()
        self.cpus: Counter[int] = Counter()
        self.gpus: Counter[int] = Counter()
        self.qos_jobs: Counter[str] = Counter()
        self.qos_cpus: Counter[str] = Counter()
        self.qos_gpus: Counter[str] = Counter()
        self.qos_user_jobs: Counter[tuple[str, int]] = Counter()
        self.qos_user_cpus: Counter[tuple[str, int]] = Counter()
        self.qos_user_gpus: Counter[tuple[str, int]] = Counter()
        self.used_mins: dict[int, list[float]] = {}  # association -> [cpu, gpu, wall] minutes of its subtree
        self.run: dict[int, list[float]] = {}  # association -> [cpu, gpu] remaining minutes of running jobs
        self.qos_run: dict[str, list[float]] = {}
        for assoc_id, used in limits.assoc_used.items():
            for assoc in self.chain(assoc_id):
                totals = self.used_mins.setdefault(assoc.id, [0.0, 0.0, 0.0])
                totals[0] += used.cpu
                totals[1] += used.gpu
                totals[2] += used.wall
        self.cohorts = Cohorts(limits.assocs)
        self._used = {CPU: self.cpus, GPU: self.gpus}
        self._running = tuple(running)
        self._borrowing: dict[int, set[int]] | None = None
        for run in self._running:
            cpus = sum(len(a.cpu_ids) for a in run.allocation)
            gpus = sum(len(a.gpu_indices) for a in run.allocation)
            self._count(run.assoc_id, cpus, gpus)
            self._count_qos(run.qos, run.user_id, cpus, gpus)
            left = max(0, run.end_time - now) / 60 if run.end_time else 0.0
            self._count_run(run.assoc_id, run.qos, cpus * left, gpus * left)

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

    def _count_qos(self, qos: str, user_id: int, cpus: int, gpus: int) -> None:
        self.qos_jobs[qos] += 1
        self.qos_cpus[qos] += cpus
        self.qos_gpus[qos] += gpus
        self.qos_user_jobs[(qos, user_id)] += 1
        self.qos_user_cpus[(qos, user_id)] += cpus
        self.qos_user_gpus[(qos, user_id)] += gpus

    def _count_run(self, assoc_id: int, qos: str, cpu_mins: float, gpu_mins: float) -> None:
        for totals in [
            *(self.run.setdefault(a.id, [0.0, 0.0]) for a in self.chain(assoc_id)),
            self.qos_run.setdefault(qos, [0.0, 0.0]),
        ]:
            totals[0] += cpu_mins
            totals[1] += gpu_mins

    def reason(self, job: JobRequest, minutes: int | None = None) -> str | None:
        """Why `job` must wait for its association or QOS, or None when it may start.

        `minutes`: the job's effective time limit (negative: unlimited; None: its own --time).
        """
        cpus, gpus = job_cpus(job), job_gpus(job)
        minutes = job.time_limit_min if minutes is None else minutes
        safe = self._limits.safe
        qos = self._qos.get(job.qos) if self._limits.enforce_qos else None
        if qos is not None:
            why = _qos_reason(qos, job, cpus, gpus, self._qos_in_use(qos.name, job.user_id))
            used = self._limits.qos_used.get(qos.name, UsedMinutes())
            why = why or usage_reason(
                qos.usage,
                (used.cpu, used.gpu, used.wall),
                self.qos_run.get(qos.name, (0.0, 0.0)),
                cpus,
                gpus,
                minutes,
                safe,
                1,
            )
            if why:
                return why
        for depth, assoc in enumerate(self.chain(job.assoc_id)):
            if depth == 0:
                own = _own_max_reason(assoc, self.jobs[assoc.id], job, cpus, gpus)
                if own:
                    return own
            if 0 <= assoc.grp_jobs <= self.jobs[assoc.id]:
                return GRP_JOBS
            over = self.cohorts.cannot_borrow(assoc, {CPU: cpus, GPU: gpus}, self._used)
            if over is not None:
                return GRP_CPU if over == CPU else GRP_GRES
            why = usage_reason(
                assoc.usage,
                self.used_mins.get(assoc.id, (0.0, 0.0, 0.0)),
                self.run.get(assoc.id, (0.0, 0.0)),
                cpus,
                gpus,
                minutes,
                safe,
                0,
            )
            if why:
                return why
        return None

    def describe(self, job: JobRequest, reason: str, minutes: int | None = None) -> LimitUse | None:
        """The limit behind `reason` (a word `reason()` gave for `job`): whose, its value, what is
        in use and by which running jobs, and what the job asks; None for another word."""
        cpus, gpus = job_cpus(job), job_gpus(job)
        minutes = job.time_limit_min if minutes is None else minutes
        asks = {"cpu": cpus, "gres/gpu": gpus, "jobs": 1, "wall": minutes}
        if reason in _QOS_LIMITS:
            qos = self._qos.get(job.qos)
            if qos is None:
                return None
            field, label, tres, per_user = _QOS_LIMITS[reason]
            key = (qos.name, job.user_id)
            in_use = {
                "jobs": self.qos_user_jobs[key] if per_user else self.qos_jobs[qos.name],
                "cpu": self.qos_user_cpus[key] if per_user else self.qos_cpus[qos.name],
                "gres/gpu": self.qos_user_gpus[key] if per_user else self.qos_gpus[qos.name],
            }.get(tres, 0)
            ids = tuple(
                r.job_id
                for r in self._running
                if r.qos == qos.name and (not per_user or r.user_id == job.user_id)
            )
            value = getattr(qos, field)
            return LimitUse(
                f"QOS {qos.name}", _limit_text(label, tres, value), value, in_use, asks[tres], ids
            )
        if reason in _ASSOC_LIMITS:
            field, label, tres = _ASSOC_LIMITS[reason]
            for depth, assoc in enumerate(self.chain(job.assoc_id)):
                value = getattr(assoc, field)
                if value < 0 or (field.startswith("max_") and depth > 0):  # Max*: the job's own (above)
                    continue
                counts = {
                    "jobs": self.jobs[assoc.id],
                    "cpu": self.cpus[assoc.id],
                    "gres/gpu": self.gpus[assoc.id],
                }
                used = counts.get(tres, 0)
                if label.startswith("Grp") and tres in ("cpu", "gres/gpu") and used + asks[tres] <= value:
                    continue  # not this level: the limit is further up
                if label.startswith("Grp") and tres == "jobs" and used < value:
                    continue
                ids = tuple(
                    r.job_id for r in self._running if assoc.id in {a.id for a in self.chain(r.assoc_id)}
                )
                whose = (
                    f"user {assoc.user} (account {assoc.account})"
                    if assoc.user
                    else f"account {assoc.account}"
                )
                return LimitUse(whose, _limit_text(label, tres, value), value, used, asks[tres], ids)
        return None

    def add(self, job: JobRequest, minutes: int | None = None) -> None:
        """`job` starts in this cycle (with `minutes` as its time limit): it counts against its
        association and QOS from now on."""
        cpus, gpus = job_cpus(job), job_gpus(job)
        self._count(job.assoc_id, cpus, gpus)
        self._count_qos(job.qos, job.user_id, cpus, gpus)
        minutes = job.time_limit_min if minutes is None else minutes
        if minutes > 0:
            self._count_run(job.assoc_id, job.qos, cpus * minutes, gpus * minutes)
        self.cohorts.started(job.job_id)

    def _qos_in_use(self, qos: str, user_id: int) -> _QosInUse:
        key = (qos, user_id)
        return _QosInUse(
            self.qos_jobs[qos],
            self.qos_cpus[qos],
            self.qos_gpus[qos],
            self.qos_user_jobs[key],
            self.qos_user_cpus[key],
            self.qos_user_gpus[key],
        )

    # ---- quota borrowing (borrowing.py)
    def wait_for(self, job: JobRequest) -> None:
        """An eligible pending job, in queue order: the guaranteed quota it fits in is not lent out."""
        self.cohorts.wait_for(job.job_id, list(self.chain(job.assoc_id)), _want(job), self._used)

    def reclaim(
        self,
        job: JobRequest,
        parts: Sequence[Partition],
        snap: Snapshot,
        overlay: Overlay,
        gone: frozenset[int],
        now: int,
    ) -> Plan | None:
        """Borrowing jobs to requeue so that `job`, within its guarantee, starts (see borrowing.reclaim)."""
        chain = list(self.chain(job.assoc_id))
        if not self.cohorts.enabled or not self.cohorts.within_guarantee(
            chain, _want(job), self._used, job.job_id
        ):
            return None
        if self._borrowing is None:
            chains = {a.id: list(self.chain(a.id)) for a in self._limits.assocs}
            self._borrowing = borrowing_jobs(self._running, chains)
        if not self._borrowing:
            return None
        return reclaim(job, chain, parts, snap, overlay, self.cohorts, self._borrowing, gone, now)


@dataclass(frozen=True, slots=True)
class LimitUse:
    """One association/QOS limit a job waits for: `limit` as sacctmgr names it (GrpTRES=gres/gpu=8),
    `in_use` by the running jobs `job_ids` that count against it, `asks` the job's own request."""

    scope: str  # "account research", "user alice (account research)", "QOS normal"
    limit: str
    value: int
    in_use: int
    asks: int
    job_ids: tuple[int, ...]


# reason -> (AssocLimits field, sacctmgr's name, TRES or "jobs"/"wall")
_ASSOC_LIMITS = {
    MAX_JOBS: ("max_jobs", "MaxJobs", "jobs"),
    GRP_JOBS: ("grp_jobs", "GrpJobs", "jobs"),
    GRP_CPU: ("grp_cpus", "GrpTRES", "cpu"),
    GRP_GRES: ("grp_gpus", "GrpTRES", "gres/gpu"),
    MAX_CPU_PER_JOB: ("max_cpus_per_job", "MaxTRES", "cpu"),
    MAX_GRES_PER_JOB: ("max_gpus_per_job", "MaxTRES", "gres/gpu"),
    MAX_WALL: ("max_wall_min", "MaxWall", "wall"),
}
# reason -> (QosLimits field, sacctmgr's name, TRES or "jobs"/"wall", per user)
_QOS_LIMITS = {
    QOS_MAX_WALL: ("max_wall_min", "MaxWall", "wall", False),
    QOS_MAX_JOBS_PER_USER: ("max_jobs_per_user", "MaxJobsPerUser", "jobs", True),
    QOS_MAX_CPU_PER_JOB: ("max_cpus_per_job", "MaxTRESPerJob", "cpu", False),
    QOS_MAX_GRES_PER_JOB: ("max_gpus_per_job", "MaxTRESPerJob", "gres/gpu", False),
    QOS_GRP_JOBS: ("grp_jobs", "GrpJobs", "jobs", False),
    QOS_GRP_CPU: ("grp_cpus", "GrpTRES", "cpu", False),
    QOS_GRP_GRES: ("grp_gpus", "GrpTRES", "gres/gpu", False),
    QOS_MAX_CPU_PER_USER: ("max_cpus_per_user", "MaxTRESPerUser", "cpu", True),
    QOS_MAX_GRES_PER_USER: ("max_gpus_per_user", "MaxTRESPerUser", "gres/gpu", True),
}


def _limit_text(label: str, tres: str, value: int) -> str:
    if tres in ("jobs", "wall"):
        return f"{label}={value}"
    return f"{label}={tres}={value}"


def _want(job: JobRequest) -> dict[str, int]:
    return {CPU: job_cpus(job), GPU: job_gpus(job)}


def _own_max_reason(assoc: AssocLimits, running: int, job: JobRequest, cpus: int, gpus: int) -> str | None:
    """The per-job and per-user limits (Max*) of the job's own association only: dbd hands each
    association its effective values, its own or those inherited down the account tree (dbd/admin.py
    `inherited`), so a user's own MaxWall above its account's is the one that holds."""
    if 0 <= assoc.max_jobs <= running:
        return MAX_JOBS
    limit = job.time_limit_min
    if 0 <= assoc.max_wall_min and limit != -1 and (limit < 0 or limit > assoc.max_wall_min):
        return MAX_WALL
    if 0 <= assoc.max_cpus_per_job < cpus:
        return MAX_CPU_PER_JOB
    if 0 <= assoc.max_gpus_per_job < gpus:
        return MAX_GRES_PER_JOB
    return None


def usage_reason(
    lim: UsageLimits,
    used: Iterable[float],
    run: Iterable[float],
    cpus: int,
    gpus: int,
    minutes: int,
    safe: bool,
    side: int,
) -> str | None:
    """Slurm's reason when a job of `cpus`/`gpus` for `minutes` (negative: unlimited) passes a usage
    limit, given the decayed `used` (cpu, gpu, wall minutes) and the running jobs' remaining `run`
    (cpu, gpu minutes); `side` 0 names the association's reason, 1 the QOS's."""
    if lim is NO_USAGE_LIMITS:  # most associations: nothing to check
        return None
    used_cpu, used_gpu, used_wall = used
    run_cpu, run_gpu = run
    span = float(minutes) if minutes >= 0 else math.inf
    job_cpu = cpus * span
    job_gpu = gpus * span if gpus else 0.0
    checks = (
        ("max_cpu_mins", lim.max_cpu_mins_per_job, job_cpu > lim.max_cpu_mins_per_job),
        ("max_gpu_mins", lim.max_gpu_mins_per_job, job_gpu > lim.max_gpu_mins_per_job),
        ("grp_cpu_mins", lim.grp_cpu_mins, _over(used_cpu, job_cpu, lim.grp_cpu_mins, safe)),
        ("grp_gpu_mins", lim.grp_gpu_mins, gpus > 0 and _over(used_gpu, job_gpu, lim.grp_gpu_mins, safe)),
        ("grp_cpu_run_mins", lim.grp_cpu_run_mins, run_cpu + job_cpu > lim.grp_cpu_run_mins),
        ("grp_gpu_run_mins", lim.grp_gpu_run_mins, gpus > 0 and run_gpu + job_gpu > lim.grp_gpu_run_mins),
        ("grp_wall", lim.grp_wall_min, _over(used_wall, span, lim.grp_wall_min, safe)),
    )
    for name, limit, exceeded in checks:
        if limit >= 0 and exceeded:
            return USAGE_REASONS[name][side]
    return None


def _over(used: float, job: float, limit: int, safe: bool) -> bool:
    """Past a GrpTRESMins/GrpWall limit: the usage reached it, or (safe) the job could not finish within it."""
    return used + job > limit if safe else used >= limit


@dataclass(frozen=True, slots=True)
class _QosInUse:
    """What a QOS's running jobs hold: in all (GrpJobs, GrpTRES) and the job's user's (per-user limits)."""

    jobs: int
    cpus: int
    gpus: int
    user_jobs: int
    user_cpus: int
    user_gpus: int


def _qos_reason(qos: QosLimits, job: JobRequest, cpus: int, gpus: int, used: _QosInUse) -> str | None:
    if 0 <= qos.max_wall_min and job.time_limit_min != -1:
        if job.time_limit_min < 0 or job.time_limit_min > qos.max_wall_min:
            return QOS_MAX_WALL
    if 0 <= qos.max_jobs_per_user <= used.user_jobs:
        return QOS_MAX_JOBS_PER_USER
    if 0 <= qos.max_cpus_per_job < cpus:
        return QOS_MAX_CPU_PER_JOB
    if 0 <= qos.max_gpus_per_job < gpus:
        return QOS_MAX_GRES_PER_JOB
    if 0 <= qos.grp_jobs <= used.jobs:
        return QOS_GRP_JOBS
    if 0 <= qos.grp_cpus < used.cpus + cpus:
        return QOS_GRP_CPU
    if gpus and 0 <= qos.grp_gpus < used.gpus + gpus:
        return QOS_GRP_GRES
    if 0 <= qos.max_cpus_per_user < used.user_cpus + cpus:
        return QOS_MAX_CPU_PER_USER
    if gpus and 0 <= qos.max_gpus_per_user < used.user_gpus + gpus:
        return QOS_MAX_GRES_PER_USER
    return None


def submit_refusal(
    limits: AccountingLimits,
    assoc_id: int,
    qos_name: str,
    user_id: int,
    count: int,
    queued: Mapping[tuple[int, str, int], int],
) -> str | None:
    """Slurm's refusal when `count` more jobs would pass MaxSubmitJobs/GrpSubmitJobs (or QOS MaxSubmitPU).

    `queued`: how many jobs are pending or running by (assoc_id, qos, user_id).
    """
    usage = AssocUsage(limits, ())
    per_assoc: Counter[int] = Counter()
    per_qos_user = 0
    for (queued_assoc, queued_qos, queued_uid), jobs in queued.items():
        for assoc in usage.chain(queued_assoc):
            per_assoc[assoc.id] += jobs
        if queued_qos == qos_name and queued_uid == user_id:
            per_qos_user += jobs
    for depth, assoc in enumerate(usage.chain(assoc_id)):
        if depth == 0 and 0 <= assoc.max_submit_jobs < per_assoc[assoc.id] + count:
            return SUBMIT_REFUSED
        if 0 <= assoc.grp_submit_jobs < per_assoc[assoc.id] + count:
            return SUBMIT_REFUSED
    qos = {q.name: q for q in limits.qos}.get(qos_name)
    if limits.enforce_qos and qos is not None and 0 <= qos.max_submit_per_user < per_qos_user + count:
        return SUBMIT_REFUSED
    return None
