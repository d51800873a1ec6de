"""Job priority: Slurm's priority/basic (first in, first out).

Issue 6 replaces this with priority/multifactor (age, fair-share, job size, partition, QOS, TRES).
"""

from __future__ import annotations

from ctld.sched.model import JobRequest, Partition

BASE_PRIORITY = 4_294_901_760  # older jobs (smaller ids) rank higher


def job_priority(job: JobRequest, partition: Partition, now: int) -> int:
    """The admin's value when set; otherwise a large base minus the job id and the nice value.

    `partition` and `now` are unused by the FIFO rule; multifactor needs both.
    """
    del partition, now
    if job.admin_priority is not None:
        return job.admin_priority
    return max(1, BASE_PRIORITY - job.job_id - job.nice)
