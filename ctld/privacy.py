"""slurm.conf PrivateData=jobs: whose jobs a caller may see.

As slurmctld does, a user then sees only their own jobs (squeue, scontrol show job, REST, the web view,
the GPU views' job and user); operators and administrators (root, SlurmUser, sacctmgr AdminLevel) see
every job. A job hidden from a caller reads as one that does not exist (22.05's "Invalid job id
specified"). In-process callers (no Caller: restd's own metrics, the housekeeping) see everything.
"""

from __future__ import annotations

from ctld.record import JobRecord
from ctld.state import Caller, ClusterState

JOBS = "jobs"


def hidden_owner(state: ClusterState, caller: Caller | None) -> int | None:
    """The only uid whose jobs `caller` may see, or None when the caller sees every job."""
    if caller is None or JOBS not in {w.lower() for w in state.cfg.private_data}:
        return None
    if state.is_operator(caller):
        return None
    return caller.uid


def sees(owner: int | None, job: JobRecord) -> bool:
    """Whether a caller limited to `owner` (hidden_owner's answer) may see `job`."""
    return owner is None or job.user_id == owner
