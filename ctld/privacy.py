"""slurm.conf PrivateData: what a caller may see of other users' jobs, nodes, partitions, reservations
and usage, as 22.05's slurmctld applies it (measured on the real one).

- jobs: a user sees their own jobs, and those of the accounts they coordinate (sacctmgr add
  coordinator); squeue, scontrol show job, REST, the web view and the GPU views leave out the rest. A
  hidden job reads as one that does not exist (22.05's "Invalid job id specified").
- nodes, partitions: a user may not load them at all ("Access/permission denied": sinfo, scontrol
  show node/partition).
- reservations: a user sees only the reservations they may use (its Users or Accounts name them).
- usage: sshare shows a user their own rows, and the accounts they coordinate with those accounts'
  users.

Operators and administrators (root, SlurmUser, sacctmgr AdminLevel) see everything; so do in-process
callers (no Caller: restd's own metrics, the housekeeping).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctld.errors import ACCESS_DENIED, PERMISSION_DENIED, SlurmError
from ctld.record import JobRecord
from ctld.state import Caller, ClusterState

JOBS = "jobs"
NODES = "nodes"
PARTITIONS = "partitions"
RESERVATIONS = "reservations"
USAGE = "usage"


@dataclass(frozen=True, slots=True)
class Viewer:
    """A caller limited by PrivateData=jobs: their own jobs and their coordinated accounts' jobs."""

    uid: int
    accounts: frozenset[str]


def private(state: ClusterState, caller: Caller | None, word: str) -> bool:
    """Whether PrivateData=`word` limits this caller (a plain user; never an operator or ctld itself)."""
    if caller is None or word not in {w.lower() for w in state.cfg.private_data}:
        return False
    return not state.is_operator(caller)


def viewer(state: ClusterState, caller: Caller | None) -> Viewer | None:
    """Whose jobs `caller` may see under PrivateData=jobs, or None when the caller sees every job."""
    if not private(state, caller, JOBS):
        return None
    assert caller is not None
    return Viewer(caller.uid, state.coordinated(caller))


def sees(who: Viewer | None, job: JobRecord) -> bool:
    """Whether a caller limited to `who` (viewer's answer) may see `job`."""
    return who is None or job.user_id == who.uid or job.account in who.accounts


def check_load(state: ClusterState, caller: Caller | None, *words: str) -> None:
    """Refuse a user's load of what PrivateData=nodes or partitions keeps to operators."""
    if any(private(state, caller, w) for w in words):
        raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
