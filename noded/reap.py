"""Ending every process of a job that has ended (Slurm's proctrack at job end), standard library only.

The job's cgroup is the unit: removing it kills whatever is still inside (steps' groups too). Where
no cgroup is enforced, or for a process that left it, the job's session is: stepd is a session
leader, so the script and everything it starts carry stepd's pid as their session id (and the
script's pid as their process group) unless they left them on purpose. A pid number stays taken
while any process still uses it as its session or group id, so matching a dead stepd's session id
cannot hit a stranger, unless that number was free again and now names another live process, which
is checked.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from noded import spool
from noded.cgroup import CgroupError, CgroupRequest, JobCgroup

# Passes over /proc: a process forked between a scan and the kill is caught by the next one.
PASSES = 5


def owned_id(path: Path) -> int:
    """The id a dead (or live) recorded process left as session/group id of its descendants; 0 when
    that number now names another process (the old session or group is then empty)."""
    rec = spool.read_pid_file(path)
    if rec is None or rec[0] <= 1:
        return 0
    pid, start = rec
    now = spool.process_stat(pid)
    if now is not None and now[2] != start:
        return 0
    return pid


def members(session: int, group: int, exclude: int = 0) -> list[int]:
    """Live processes in `session` or process group `group` (0 = none), but `exclude`."""
    found: list[int] = []
    if session <= 0 and group <= 0:
        return found
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in (exclude, os.getpid()):
            continue
        st = spool.process_stat(pid)
        if st is not None and ((session > 0 and st[1] == session) or (group > 0 and st[0] == group)):
            found.append(pid)
    return found


def kill_all(session: int, group: int = 0, exclude: int = 0) -> int:
    """SIGKILL every process of `session`/`group` until none is left; how many were killed."""
    killed = 0
    for _ in range(PASSES):
        pids = members(session, group, exclude)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.02)
    return killed


def remove_cgroup(cgroup: dict[str, object] | None, timeout: float = 10.0) -> None:
    """Remove a job's cgroup (as launch.json describes it), killing what is left in it."""
    if not cgroup:
        return
    try:
        JobCgroup(CgroupRequest.from_dict(dict(cgroup))).remove(timeout=timeout)
    except (CgroupError, TypeError, OSError):
        pass


def reap_job(job_dir: Path) -> int:
    """Kill every process left of the job whose spool directory is `job_dir` (its stepd is gone) and
    remove its cgroup; how many processes were found outside the cgroup."""
    launch = spool.read_json(job_dir / spool.LAUNCH) or {}
    session = owned_id(job_dir / spool.STEPD_PID)
    group = owned_id(job_dir / spool.JOB_PID)
    killed = kill_all(session, group)
    cgroup = launch.get("cgroup")
    remove_cgroup(cgroup if isinstance(cgroup, dict) else None)
    return killed
