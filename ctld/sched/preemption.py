"""Preemption (PreemptType=preempt/qos or preempt/partition_prio): end lower jobs so a waiting one starts.

Interface (for this policy and any other that frees resources by ending jobs, e.g. quota reclaim):

- Decisions out: `CycleResult.preemptions`, a tuple of `model.Preemption(job_id, mode, grace_time_s,
  reason, preemptor)`. The controller (ctld/preempt.py) applies every entry the same way, whatever
  produced it: SIGCONT+SIGTERM at once, SIGKILL after the grace time (0 = KillWait); mode CANCEL
  ends the job PREEMPTED, REQUEUE sends it back to pending (PENDING, reason BeginTime, restarts+1).
- Snapshot in: `RunningJob.releasing` marks jobs already ending (COMPLETING, or preempted in an
  earlier cycle). They are never chosen again, and what they hold counts as free when planning.
- `plan()` answers for one job that could not start for Resources: the victims to end (none when
  the releasing jobs already make room) and the allocation the job will get once they are gone.
  The cycle holds that allocation in its overlay and in backfill's timeline, so no lower job takes
  the freed resources meanwhile; the job itself stays pending with reason Resources until they
  are free, and then starts in the main pass as any other job.

Who may be preempted (as Slurm 22.05):

- preempt/qos: running jobs whose QOS is in the waiting job's QOS `Preempt` list; how they end is
  their QOS's PreemptMode (else the cluster's), their grace time their QOS's GraceTime.
- preempt/partition_prio: running jobs in a partition of lower PriorityTier than the one the job
  would start in; their partition's PreemptMode (else the cluster's) and GraceTime.
- Never a job whose mode is OFF, nor one that has run less than PreemptExemptTime, nor a suspended one.

Mode SUSPEND (PreemptMode=SUSPEND,GANG; 22.05 wants GANG cluster-wide for it): the victim is stopped in
place and lends its CPUs and GPUs, not its memory, to the preemptor alone: they stay counted as held in
the snapshot, and only `fits_without(..., lent=...)` gives them back, keeping the memory. When every
victim a plan needs is suspended, the preemptor starts in the same cycle (`Plan.now`). A job suspended
so (`RunningJob.gang_suspended`) is resumed (`resumable()`, `CycleResult.resumes`) once no running job
holds any of its CPUs or GPUs, before anything else is placed, as 22.05's gang scheduler resumes it
when its preemptor ends. Within one partition 22.05 would time-slice such jobs (GANG); shoal does no
time-slicing: a suspended job waits for its preemptor to end wherever it runs.

Victims go lowest priority first, then youngest first, and only as many as needed: candidates are
added until the job fits (the one placement function, `place()`, over the snapshot with their
allocations released), then every victim the fit does not need is dropped again.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ctld.sched.model import (
    Config,
    JobRequest,
    Partition,
    Preemption,
    QosPreempt,
    RunningJob,
    Snapshot,
    Start,
)
from ctld.sched.placement import Overlay, place, release

NONE = "preempt/none"
QOS = "preempt/qos"
PARTITION_PRIO = "preempt/partition_prio"
TYPES = (NONE, QOS, PARTITION_PRIO)

OFF = "OFF"
CANCEL = "CANCEL"
REQUEUE = "REQUEUE"
SUSPEND = "SUSPEND"
MODES = (OFF, CANCEL, REQUEUE, SUSPEND)


@dataclass(frozen=True, slots=True)
class Plan:
    """What one waiting job needs: these jobs ended (or suspended), then this allocation.

    `now`: every victim is suspended, so the job starts in this cycle rather than waiting."""

    victims: tuple[Preemption, ...]
    start: Start
    now: bool = False


def enabled(snap: Snapshot) -> bool:
    return enabled_by(snap.config)


def enabled_by(config: Config) -> bool:
    """Whether a pending job may have running jobs preempted for it."""
    return config.preempt.type in (QOS, PARTITION_PRIO)


def plan(
    job: JobRequest,
    parts: Iterable[Partition],
    snap: Snapshot,
    overlay: Overlay,
    now: int,
    chosen: Collection[int],
    lent: Collection[int] = (),
) -> Plan | None:
    """Victims and allocation for `job` in the first of `parts` where preemption makes room, else None.

    `overlay` holds this cycle's starts and holds; `chosen` are jobs already preempted this cycle
    (treated as releasing, like `RunningJob.releasing`), `lent` those of them suspended.
    """
    gone = frozenset(chosen).union(r.job_id for r in snap.running if r.releasing)
    qos = {q.name: q for q in snap.qos_preempt}
    by_name = {p.name: p for p in snap.partitions}
    for part in parts:
        found = _plan_in(job, part, snap, overlay, now, gone, frozenset(lent), qos, by_name)
        if found is not None:
            return found
    return None


def _plan_in(
    job: JobRequest,
    part: Partition,
    snap: Snapshot,
    overlay: Overlay,
    now: int,
    gone: frozenset[int],
    lent: frozenset[int],
    qos: Mapping[str, QosPreempt],
    parts: Mapping[str, Partition],
) -> Plan | None:
    start = fits_without(job, part, snap, overlay, gone, now, lent)
    if start is not None:
        return Plan((), start)  # the jobs already ending make room: wait for them, hold the room
    members = set(part.nodes)
    candidates: list[tuple[RunningJob, Preemption]] = []
    for running in snap.running:
        if running.job_id in gone or members.isdisjoint(running.nodes):
            continue
        how = victim_terms(job, running, part, snap, now, qos, parts)
        if how is not None:
            mode, grace = how
            reason = f"preempted by job {job.job_id}"
            candidates.append((running, Preemption(running.job_id, mode, grace, reason, job.job_id)))
    candidates.sort(key=lambda c: (c[0].priority, -c[0].start_time, -c[0].job_id))
    return choose(job, part, snap, overlay, gone, candidates, now, lent)


def choose(
    job: JobRequest,
    part: Partition,
    snap: Snapshot,
    overlay: Overlay,
    gone: frozenset[int],
    candidates: Sequence[tuple[RunningJob, Preemption]],
    now: int,
    lent: frozenset[int] = frozenset(),
) -> Plan | None:
    """The fewest of `candidates`, taken in their order, whose end lets `job` start in `part` (with
    the jobs in `gone` released too), and where it then starts; None when not even all of them do.
    Suspended ones (`lent`, and candidates of mode SUSPEND) keep their memory."""
    lent = lent | {r.job_id for r, p in candidates if p.mode == SUSPEND}
    everyone = gone | {r.job_id for r, _ in candidates}
    if not candidates or fits_without(job, part, snap, overlay, everyone, now, lent) is None:
        return None  # not even all of them would make room
    chosen: list[tuple[RunningJob, Preemption]] = []
    start: Start | None = None
    for candidate in candidates:
        chosen.append(candidate)
        start = fits_without(job, part, snap, overlay, gone | _ids(chosen), now, lent)
        if start is not None:
            break
    if start is None:  # cannot happen: with every candidate gone the job fits
        return None
    # The last one added was needed; drop the others the fit can do without (the least preferred first).
    for candidate in reversed(chosen[:-1]):
        trial = [c for c in chosen if c is not candidate]
        found = fits_without(job, part, snap, overlay, gone | _ids(trial), now, lent)
        if found is not None:
            chosen, start = trial, found
    victims = tuple(p for _, p in chosen)
    if all(p.mode == SUSPEND for p in victims):
        # Suspended at once: the job starts now if the jobs still ending (not lent) are not needed.
        ready = fits_without(job, part, snap, overlay, lent & (gone | _ids(chosen)), now, lent)
        if ready is not None:
            return Plan(victims, ready, now=True)
    return Plan(victims, start)


def victim_terms(
    job: JobRequest,
    running: RunningJob,
    part: Partition,
    snap: Snapshot,
    now: int,
    qos: Mapping[str, QosPreempt],
    parts: Mapping[str, Partition],
) -> tuple[str, int] | None:
    """(mode, grace seconds) when `job`, starting in `part`, may preempt `running`; else None."""
    config = snap.config.preempt
    if running.suspended:  # stopped in place already (an operator, or an earlier preemption)
        return None
    if config.exempt_time_s > 0 and now - running.start_time < config.exempt_time_s:
        return None
    if config.type == QOS:
        mine = qos.get(job.qos)
        if mine is None or not running.qos or running.qos not in mine.preempt:
            return None
        theirs = qos.get(running.qos)
        mode = (theirs.mode if theirs is not None else "") or config.mode
        grace = theirs.grace_time_s if theirs is not None else 0
    elif config.type == PARTITION_PRIO:
        home = parts.get(running.partition)
        if home is None or home.priority_tier >= part.priority_tier:
            return None
        mode, grace = home.preempt_mode or config.mode, home.grace_time_s
    else:
        return None
    if mode == SUSPEND and (not config.gang or not running.allocation):
        return None  # nothing would resume it (22.05 wants GANG); what it holds is unknown
    return (mode, grace) if mode in (CANCEL, REQUEUE, SUSPEND) else None


def resumable(snap: Snapshot) -> list[int]:
    """Jobs suspended by preemption that may run again: no running job holds any of their CPUs or
    GPUs (their preemptors have ended). Higher priority first; two suspended jobs on the same CPUs
    do not both resume."""
    waiting = sorted(
        (r for r in snap.running if r.gang_suspended and r.allocation),
        key=lambda r: (-r.priority, r.start_time, r.job_id),
    )
    if not waiting:
        return []
    cpus: dict[str, set[int]] = {}
    gpus: dict[str, set[int]] = {}

    def take(running: RunningJob) -> None:
        for alloc in running.allocation:
            cpus.setdefault(alloc.node, set()).update(alloc.cpu_ids)
            gpus.setdefault(alloc.node, set()).update(alloc.gpu_indices)

    for running in snap.running:
        if not running.suspended:
            take(running)
    out = []
    for running in waiting:
        if all(
            cpus.get(a.node, set()).isdisjoint(a.cpu_ids)
            and gpus.get(a.node, set()).isdisjoint(a.gpu_indices)
            for a in running.allocation
        ):
            out.append(running.job_id)
            take(running)
    return out


def requeue(victims: Iterable[int], preemptor: JobRequest, snap: Snapshot, reason: str) -> list[Preemption]:
    """REQUEUE decisions for jobs another policy chose (quota reclaim), each with its QOS's GraceTime."""
    qos = {q.name: q for q in snap.qos_preempt}
    running = {r.job_id: r for r in snap.running}
    out = []
    for job_id in victims:
        terms = qos.get(running[job_id].qos) if job_id in running else None
        grace = terms.grace_time_s if terms is not None else 0
        out.append(Preemption(job_id, REQUEUE, grace, reason, preemptor.job_id))
    return out


def _ids(chosen: list[tuple[RunningJob, Preemption]]) -> frozenset[int]:
    return frozenset(r.job_id for r, _ in chosen)


def fits_without(
    job: JobRequest,
    part: Partition,
    snap: Snapshot,
    overlay: Overlay,
    gone: frozenset[int],
    now: int,
    lent: frozenset[int] = frozenset(),
) -> Start | None:
    """Where `job` would start in `part` now once the running jobs in `gone` have released everything
    (those also in `lent`, suspended, everything but their memory)."""
    if not gone:
        return None  # nothing released: the cycle's own placement already said Resources
    nodes = {node.name: node for node in snap.nodes}
    holders = Counter(name for running in snap.running for name in running.nodes)
    for running in snap.running:
        if running.job_id in gone:
            release(running, nodes, holders, keep_memory=running.job_id in lent)
    later = dataclasses.replace(snap, nodes=tuple(nodes[node.name] for node in snap.nodes))
    found = place(job, part, later, overlay.copy(), now)
    return found if isinstance(found, Start) else None
