"""Who may use a partition: AllowAccounts/DenyAccounts, AllowGroups, AllowQos/DenyQos, RootOnly.

A job is refused at submit when none of its partitions admits it (with the first partition's
reason, in Slurm's words); a job that names several partitions runs only in those that admit it.
"""

from __future__ import annotations

from ctld.sched.model import JobRequest, Partition

INVALID_ACCOUNT = "Invalid account or account/partition combination specified"
GROUP_NOT_PERMITTED = "User's group not permitted to use this partition"
INVALID_QOS = "Invalid qos specification"
ACCESS_DENIED = "Access/permission denied"


def refusal(job: JobRequest, part: Partition) -> str | None:
    """Why `part` does not admit `job` (Slurm's message), or None when it does."""
    if part.root_only and job.user_id != 0:
        return ACCESS_DENIED
    if part.allow_uids is not None and job.user_id not in part.allow_uids:
        return GROUP_NOT_PERMITTED
    account = job.account.lower()
    if part.allow_accounts is not None and account not in part.allow_accounts:
        return INVALID_ACCOUNT
    if account in part.deny_accounts:
        return INVALID_ACCOUNT
    qos = job.qos.lower()
    if part.allow_qos is not None and qos not in part.allow_qos:
        return INVALID_QOS
    if qos in part.deny_qos:
        return INVALID_QOS
    return None


def admits(job: JobRequest, part: Partition) -> bool:
    return refusal(job, part) is None
