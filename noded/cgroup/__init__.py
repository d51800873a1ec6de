"""Job cgroups (Slurm's task/cgroup): cpuset, memory and devices, on cgroup v1 or v2.

noded decides the limits (`CgroupRequest`, carried in launch.json); stepd creates the job's
cgroup and the step's inside it before the script or tasks start (step_batch for the script,
step_<id> for srun's tasks), each process places itself in its step's group before dropping
privileges, and stepd reads OOM kills and usage and removes the groups at the end.
One hierarchy per node, job and step (<mount>/[<controller>/]shoal/<node>/job_<id>/step_<id>) so
emulated nodes on one machine never collide. Standard library only: stepd imports this.
"""

from __future__ import annotations

from noded.cgroup.job import (
    CgroupError,
    CgroupRequest,
    JobCgroup,
    detect_version,
)
from noded.cgroup.step import BATCH, StepCgroup, oom_note, step_name

__all__ = [
    "BATCH",
    "CgroupError",
    "CgroupRequest",
    "JobCgroup",
    "StepCgroup",
    "detect_version",
    "oom_note",
    "step_name",
]
