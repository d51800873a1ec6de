"""Submit-time checks: refuse a job that could never run, with Slurm's message."""

from __future__ import annotations

from ctld.sched import access, limits, placement
from ctld.sched.model import JobRequest, Partition, Refusal, Snapshot

PARTITION_NOT_AVAILABLE = "Required partition not available (inactive or drain)"
PART_CONFIG_NOT_NOW = "Requested partition configuration not available now"


def candidate_partitions(job: JobRequest, snap: Snapshot) -> list[Partition]:
    """The job's partitions that exist, in the user's order."""
    return placement.candidate_partitions(job, snap)


def check_submission(job: JobRequest, snap: Snapshot) -> Refusal | None:
    """None to accept; a job that fits in at least one candidate partition is accepted.

    A partition that does not admit the job (access.py) is no candidate; when none does, the first
    one's reason refuses it. A DOWN partition still queues jobs (they pend with PartitionDown);
    DRAIN and INACTIVE ones refuse new work when they are the only candidates.
    """
    named = {part.name: part for part in snap.partitions}
    refusals = [access.refusal(job, named[name]) for name in job.partitions if name in named]
    if refusals and all(refusals):
        return Refusal(next(r for r in refusals if r))
    parts = candidate_partitions(job, snap)
    if parts and all(part.state in ("DRAIN", "INACTIVE") for part in parts):
        return Refusal(PARTITION_NOT_AVAILABLE)
    refusal = placement.could_ever_run(job, snap)
    if refusal is None and _refused_by_partition_limits(job, parts, snap.config.enforce_part_limits):
        return Refusal(placement.INVALID_NODE_COUNT)
    return refusal


def _refused_by_partition_limits(job: JobRequest, parts: list[Partition], enforce: str) -> bool:
    """EnforcePartLimits: ANY/YES refuses a node count no partition of the job allows, ALL one that
    any of them does not; NO queues it (it pends with PartitionNodeLimit)."""
    over = [limits.node_limit_exceeded(job, part) for part in parts]
    if enforce == "ALL":
        return any(over)
    if enforce in ("ANY", "YES"):
        return bool(over) and all(over)
    return False


def pending_note(job: JobRequest, snap: Snapshot) -> str:
    """Slurm's note to srun/salloc for an accepted job that no partition of it can take as asked."""
    parts = candidate_partitions(job, snap)
    if parts and all(
        limits.node_limit_exceeded(job, part) or limits.cpu_limit_exceeded(job, part) for part in parts
    ):
        return PART_CONFIG_NOT_NOW
    return ""
