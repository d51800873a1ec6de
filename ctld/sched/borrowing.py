"""Quota borrowing between sibling associations (beyond Slurm; Kueue's cohorts), and its reclaim.

An association's GrpTRES (cpu, gres/gpu) is its *guaranteed quota*. The associations under one parent
that set a guarantee for a TRES form that TRES's *cohort*. An association with MaxBorrowTRES may run
jobs past its own guarantee, by at most MaxBorrowTRES, while the cohort as a whole stays within the sum
of its members' guarantees: it borrows the quota its siblings leave idle. Quota that a sibling's
eligible pending jobs wait for is not idle, so a borrower never takes what its owner is about to use.

A running job is *borrowing* when it is among the youngest jobs of a borrowing association that make up
its excess over its guarantee (recomputed every cycle: when an older job ends, a younger one is no
longer borrowing). Reclaim: a pending job within its guarantee at every level of its chain that cannot
be placed takes its quota back: borrowing jobs of its siblings are requeued, youngest first, only as
many as let it start (the one placement function decides), none when it would not start even then. The
decisions are preemption's (`Preemption`, mode REQUEUE, the victim's QOS GraceTime; see preemption.py),
applied by the controller like any other preemption; the owner's room is held until the victims are gone.

Pure: usage comes in as counters per association (AssocUsage's), running jobs from the snapshot.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from ctld.sched.model import AssocLimits, JobRequest, Partition, RunningJob, Snapshot
from ctld.sched.placement import Overlay
from ctld.sched.preemption import Plan, choose, fits_without, requeue

CPU = "cpu"
GPU = "gpu"
TRES = (CPU, GPU)
Want = Mapping[str, int]  # TRES -> count
Used = Mapping[str, Counter[int]]  # TRES -> association id -> in use (its descendants included)


def guarantee(assoc: AssocLimits, tres: str) -> int:
    """GrpTRES for `tres`; -1 = none."""
    return assoc.grp_cpus if tres == CPU else assoc.grp_gpus


def borrow_limit(assoc: AssocLimits, tres: str) -> int:
    """MaxBorrowTRES for `tres`; -1 = may not borrow."""
    return assoc.max_borrow_cpus if tres == CPU else assoc.max_borrow_gpus


def running_want(run: RunningJob) -> dict[str, int]:
    return {
        CPU: sum(len(a.cpu_ids) for a in run.allocation),
        GPU: sum(len(a.gpu_indices) for a in run.allocation),
    }


class Cohorts:
    """Sibling associations and the guaranteed quota their owners' pending jobs wait for."""

    def __init__(self, assocs: Iterable[AssocLimits]) -> None:
        self._children: dict[int, list[AssocLimits]] = defaultdict(list)
        for assoc in assocs:
            if assoc.parent_id:
                self._children[assoc.parent_id].append(assoc)
        self.enabled = any(
            borrow_limit(a, t) >= 0 for kids in self._children.values() for a in kids for t in TRES
        )
        self._waiting: dict[str, Counter[int]] = {t: Counter() for t in TRES}
        self._held: dict[int, tuple[tuple[int, ...], dict[str, int]]] = {}  # job -> (its chain, its want)

    def siblings(self, assoc: AssocLimits, tres: str) -> list[AssocLimits]:
        """The members of `assoc`'s cohort for `tres` (itself included when it has a guarantee)."""
        if not assoc.parent_id:
            return [assoc] if guarantee(assoc, tres) >= 0 else []
        return [a for a in self._children[assoc.parent_id] if guarantee(a, tres) >= 0]

    def cannot_borrow(self, assoc: AssocLimits, want: Want, used: Used) -> str | None:
        """The first TRES `want` takes `assoc` over its guarantee by more than it may borrow now, else None."""
        for tres in TRES:
            grp, need = guarantee(assoc, tres), want[tres]
            if grp < 0 or need <= 0 or used[tres][assoc.id] + need <= grp:
                continue
            limit = borrow_limit(assoc, tres)
            if limit < 0 or used[tres][assoc.id] + need > grp + limit:
                return tres
            cohort = self.siblings(assoc, tres)
            quota = sum(guarantee(a, tres) for a in cohort)
            in_use = sum(used[tres][a.id] for a in cohort)
            waited_for = sum(self._waiting[tres][a.id] for a in cohort if a.id != assoc.id)
            if in_use + waited_for + need > quota:
                return tres
        return None

    def within_guarantee(self, chain: Sequence[AssocLimits], want: Want, used: Used, job_id: int = 0) -> bool:
        """`want` more fits in the guarantee at every level of `chain`, counting what owners wait for
        (except job `job_id` itself)."""
        own = self._held.get(job_id, ((), {}))[1]
        return all(
            used[t][a.id] + self._waiting[t][a.id] - own.get(t, 0) + want[t] <= guarantee(a, t)
            for a in chain
            for t in TRES
            if guarantee(a, t) >= 0 and want[t] > 0
        )

    def wait_for(self, job_id: int, chain: Sequence[AssocLimits], want: Want, used: Used) -> None:
        """An eligible pending job within its guarantee: its quota is not idle for borrowers."""
        if not self.enabled or not self.within_guarantee(chain, want, used):
            return
        ids = tuple(a.id for a in chain)
        for tres in TRES:
            for assoc_id in ids:
                self._waiting[tres][assoc_id] += want[tres]
        self._held[job_id] = (ids, dict(want))

    def started(self, job_id: int) -> None:
        """The job started: its quota now counts as used, no longer as waited for."""
        found = self._held.pop(job_id, None)
        if found is None:
            return
        ids, want = found
        for tres in TRES:
            for assoc_id in ids:
                self._waiting[tres][assoc_id] -= want[tres]


def borrowing_jobs(
    running: Iterable[RunningJob], chains: Mapping[int, Sequence[AssocLimits]]
) -> dict[int, set[int]]:
    """Association id -> its running jobs that are borrowing (the youngest that make up its excess).

    `chains`: association id -> the association and its ancestors.
    """
    under: dict[int, list[RunningJob]] = defaultdict(list)
    assocs: dict[int, AssocLimits] = {}
    for run in running:
        for assoc in chains.get(run.assoc_id, ()):
            if any(borrow_limit(assoc, t) >= 0 and guarantee(assoc, t) >= 0 for t in TRES):
                under[assoc.id].append(run)
                assocs[assoc.id] = assoc
    out: dict[int, set[int]] = {}
    for assoc_id, runs in under.items():
        assoc = assocs[assoc_id]
        total: Counter[str] = Counter()
        for run in sorted(runs, key=lambda r: (r.start_time, r.job_id)):
            total.update(running_want(run))
            if any(0 <= guarantee(assoc, t) < total[t] for t in TRES):
                out.setdefault(assoc_id, set()).add(run.job_id)
    return out


def reclaim(
    job: JobRequest,
    chain: Sequence[AssocLimits],
    parts: Sequence[Partition],
    snap: Snapshot,
    overlay: Overlay,
    cohorts: Cohorts,
    borrowing: Mapping[int, set[int]],
    gone: frozenset[int],
    now: int,
) -> Plan | None:
    """Borrowing jobs of the job's siblings to requeue so it can start (youngest first, as few as
    needed, through preemption's `choose`), and where it will start; None when no such set exists.

    `gone`: jobs already on their way out (releasing, or preempted earlier in this cycle); when they
    alone make room, nothing more is chosen and the room is held (a plan without victims).
    """
    for part in parts:
        start = fits_without(job, part, snap, overlay, gone, now)
        if start is not None:
            return Plan((), start)
    candidates: set[int] = set()
    for level in chain:
        for tres in TRES:
            if guarantee(level, tres) < 0:
                continue
            for sibling in cohorts.siblings(level, tres):
                if sibling.id != level.id:
                    candidates |= borrowing.get(sibling.id, set())
    order = sorted(
        (r for r in snap.running if r.job_id in candidates and r.job_id not in gone),
        key=lambda r: (r.start_time, r.job_id),
        reverse=True,
    )
    if not order:
        return None
    decisions = requeue([r.job_id for r in order], job, snap, f"quota reclaimed by job {job.job_id}")
    for part in parts:
        members = set(part.nodes)
        mine = [(r, d) for r, d in zip(order, decisions, strict=True) if not members.isdisjoint(r.nodes)]
        found = choose(job, part, snap, overlay, gone, mine, now)
        if found is not None:
            return found
    return None
