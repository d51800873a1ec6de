"""Job cgroups (Slurm's task/cgroup): cpuset, memory and devices, on cgroup v1 or v2.

noded decides the limits (`CgroupRequest`, carried in launch.json); stepd creates the job's
cgroup before the script starts, the script's child places itself in it before dropping
privileges, and stepd reads OOM kills and usage from it and removes it at the end.
One hierarchy per node and job (<mount>/[<controller>/]shoal/<node>/job_<id>) so emulated nodes
on one machine never collide. Standard library only: stepd imports this.
"""

from __future__ import annotations

from noded.cgroup.job import (
    CgroupError,
    CgroupRequest,
    JobCgroup,
    detect_version,
)

__all__ = ["CgroupError", "CgroupRequest", "JobCgroup", "detect_version"]
