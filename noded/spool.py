"""The on-disk layout of a node's spool, shared by noded and stepd (standard library only).

<spool>/noded.sock            datagram socket: stepd sends "done <job_id>" when a job ends
<spool>/job<id>/launch.json   what stepd runs (LaunchSpec), written by noded, 0600
<spool>/job<id>/script        the batch script, 0700, owned by the job's user
<spool>/job<id>/stepd.pid     "<pid> <starttime>" of the job's supervisor
<spool>/job<id>/job.pid       "<pid> <starttime>" of the batch script (its process group leader)
<spool>/job<id>/kill_wait     optional seconds overriding launch.json's, for one TerminateJob
<spool>/job<id>/cancel_note   optional line stepd adds to the job's stderr when it ends it (why it was cancelled)
<spool>/job<id>/status.json   how the job ended, written atomically by stepd
<spool>/cancel<id>            TerminateJob came for a job whose stepd was not (yet) running:
                              a stepd that starts later ends at once instead of running it

A pid file carries the process start time so that a reused pid is never mistaken for ours.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

LAUNCH = "launch.json"
SCRIPT = "script"
STEPD_PID = "stepd.pid"
JOB_PID = "job.pid"
KILL_WAIT = "kill_wait"
CANCEL_NOTE = "cancel_note"
STATUS = "status.json"
NOTIFY_SOCKET = "noded.sock"
JOB_PREFIX = "job"
CANCEL_PREFIX = "cancel"


def cancel_marker(spool: str | Path, job_id: int) -> Path:
    return Path(spool) / f"{CANCEL_PREFIX}{job_id}"


def job_dir(spool: str | Path, job_id: int) -> Path:
    return Path(spool) / f"{JOB_PREFIX}{job_id}"


def job_id_of(path: Path) -> int | None:
    """The job id of a spool entry named job<id>, else None."""
    name = path.name
    if not name.startswith(JOB_PREFIX) or not name[len(JOB_PREFIX) :].isdigit():
        return None
    return int(name[len(JOB_PREFIX) :])


def write_json_atomic(path: Path, data: dict[str, Any], mode: int = 0o644) -> None:
    """Write JSON so that readers see the old file or the whole new one, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(data))  # json.dumps's encoder is C, json.dump's Python
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def process_stat(pid: int) -> tuple[int, int, int] | None:
    """(process group, session, start time in clock ticks since boot) of a live process; None if gone
    or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[2]), int(fields[3]), int(fields[19])


def process_start_time(pid: int) -> int | None:
    """The start time (clock ticks since boot) of a live process; None if gone or a zombie."""
    found = process_stat(pid)
    return found[2] if found else None


def write_pid_file(path: Path, pid: int) -> None:
    """Atomically: a job scan that read a half-written pid file would take a live stepd for lost."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{pid} {process_start_time(pid) or 0}\n")
    os.replace(tmp, path)


def read_pid_file(path: Path) -> tuple[int, int] | None:
    """(pid, start time) as write_pid_file recorded them."""
    try:
        pid_text, start_text = path.read_text().split()
        return int(pid_text), int(start_text)
    except (OSError, ValueError):
        return None


def live_pid(path: Path) -> int | None:
    """The pid recorded in a pid file if that very process still runs, else None."""
    recorded = read_pid_file(path)
    if recorded is None:
        return None
    pid, start = recorded
    if pid <= 0 or process_start_time(pid) != start:
        return None
    return pid
