"""Submit-time checks: refuse a job that could never run, with Slurm's message."""

from __future__ import annotations

from ctld.sched import access, placement
from ctld.sched.model import JobRequest, Partition, Refusal, Snapshot

PARTITION_NOT_AVAILABLE = "Required partition not available (inactive or drain)"


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
    return placement.could_ever_run(job, snap)
