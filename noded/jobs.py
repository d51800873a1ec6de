"""The node's table of jobs, which is its spool directory: no state is kept in noded's memory.

A job is *running* while its stepd lives and has written no status.json, *finished* once
status.json exists (until ctld has acknowledged it and the job's directory is removed).
A stepd that died without a status (killed, machine trouble) makes its job finished, failed;
whatever the job left running is killed and its cgroup removed first (noded.reap). One found gone
when noded starts died while nothing watched the node (a crash): that is a node failure.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from noded import reap, spool

log = logging.getLogger("shoal.noded")

# How long a job directory may exist without a stepd.pid before it counts as lost.
STARTING_GRACE_S = 30.0
# How long a cancel marker waits for a launch that may still be on its way.
CANCEL_MARKER_TTL_S = 3600.0

# Held while a job directory is created, judged lost or removed: the reporter thread removes a
# reported run while an RPC thread may be launching the next run of the same (requeued) job.
DIRS_LOCK = threading.Lock()


@dataclass(frozen=True)
class FinishedJob:
    job_id: int
    exit_code: int
    exit_signal: int
    end_time: int
    launch_failed: bool
    message: str
    oom: bool = False  # the kernel killed part of the job for exceeding its memory
    max_rss_kb: int = 0  # peak memory of the script (cgroup, else rusage)
    cpu_time_us: int = 0
    run: int = 0  # which run of a requeued job (its restart count at launch)
    node_fail: bool = False  # lost with its node (its stepd was gone when noded started)
    prolog_failed: bool = False  # the node's Prolog failed: the script never started
    epilog_failed: bool = False  # the node's Epilog failed after the script ended
    hook_message: str = ""  # what the failed Epilog did


def _job_dirs(spool_root: Path) -> list[tuple[int, Path]]:
    try:
        entries = list(spool_root.iterdir())
    except OSError:
        return []
    found = [(job_id, path) for path in entries if (job_id := spool.job_id_of(path)) is not None]
    return sorted(found)


def _is_running(path: Path, now: float) -> bool:
    if spool.live_pid(path / spool.STEPD_PID) is not None:
        return True
    if (path / spool.STEPD_PID).exists():
        return False
    try:
        return now - (path / spool.LAUNCH).stat().st_mtime < STARTING_GRACE_S
    except OSError:
        return False


def run_of(path: Path) -> int:
    """The run a job directory holds (launch.json's restart count); -1 if it has no launch.json."""
    data = spool.read_json(path / spool.LAUNCH)
    if data is None:
        return -1
    run = data.get("run", 0)
    return run if isinstance(run, int) else 0


def _finished(job_id: int, data: dict[str, object], run: int) -> FinishedJob:
    def num(key: str) -> int:
        value = data.get(key, 0)
        return int(value) if isinstance(value, int | float | str) else 0

    usage = data.get("usage")
    used = usage if isinstance(usage, dict) else {}
    return FinishedJob(
        max_rss_kb=int(used.get("max_rss_bytes", 0)) // 1024,
        cpu_time_us=int(used.get("cpu_time_us", 0)),
        job_id=job_id,
        exit_code=num("exit_code"),
        exit_signal=num("exit_signal"),
        end_time=num("end_time"),
        launch_failed=bool(data.get("launch_failed", False)),
        message=str(data.get("message", "")),
        oom=bool(data.get("oom", False)),
        run=run,
        node_fail=bool(data.get("node_fail", False)),
        prolog_failed=bool(data.get("prolog_failed", False)),
        epilog_failed=bool(data.get("epilog_failed", False)),
        hook_message=str(data.get("hook_message", "")),
    )


def scan(spool_root: Path, now: float | None = None) -> tuple[list[int], list[FinishedJob]]:
    """(running job ids, finished jobs) on this node's spool."""
    now = time.time() if now is None else now
    running: list[int] = []
    finished: list[FinishedJob] = []
    for job_id, path in _job_dirs(spool_root):
        data = spool.read_json(path / spool.STATUS)
        if data is None and _is_running(path, now):
            running.append(job_id)
            continue
        if data is None:
            data = _mark_lost(job_id, path, now)
            if data is None:
                if path.exists():
                    running.append(job_id)  # a launch was writing the directory; it runs now
                continue
        finished.append(_finished(job_id, data, run_of(path)))
    _prune_cancel_markers(spool_root, now)
    return running, finished


def _mark_lost(job_id: int, path: Path, now: float, node_fail: bool = False) -> dict[str, object] | None:
    """Record that the job's stepd ended without a status, once every process it left is killed;
    None if the job turns out to run."""
    with DIRS_LOCK:  # not while a launch is still writing this directory
        if not path.exists():
            return None
        data = spool.read_json(path / spool.STATUS)
        if data is not None:
            return data
        if _is_running(path, now):
            return None
        if not (path / spool.LAUNCH).exists():
            # no launch writes it now (that holds the lock): what a removal left (a file written into
            # it meanwhile), no job
            shutil.rmtree(path, ignore_errors=True)
            return None
        left = reap.reap_job(path)
        if left:
            log.warning("job %d: killed %d process(es) its lost slurmstepd left", job_id, left)
        data = {
            "exit_code": 0,
            "exit_signal": int(signal.SIGKILL),
            "end_time": int(now),
            "launch_failed": False,
            "message": (
                f"slurmstepd of job {job_id} was gone when shoal-noded started"
                if node_fail
                else f"slurmstepd of job {job_id} ended without a status"
            ),
            "node_fail": node_fail,
        }
        spool.write_json_atomic(path / spool.STATUS, data)
        return data


def sweep_after_start(spool_root: Path, now: float | None = None) -> list[int]:
    """At noded's start, before it serves: jobs whose stepd is gone without a status died while no
    noded watched the node (every process killed, a crash), so they are lost with the node, not
    failed by a signal of their own (Slurm: "batch job missing from batch node"). Their ids."""
    now = time.time() if now is None else now
    lost: list[int] = []
    for job_id, path in _job_dirs(spool_root):
        if spool.read_json(path / spool.STATUS) is None and not _is_running(path, now):
            if _mark_lost(job_id, path, now, node_fail=True) is not None:
                lost.append(job_id)
    return lost


def _prune_cancel_markers(spool_root: Path, now: float) -> None:
    """Forget cancel markers of jobs that never came to this node."""
    try:
        markers = list(spool_root.glob(f"{spool.CANCEL_PREFIX}*"))
    except OSError:
        return
    for marker in markers:
        try:
            if now - marker.stat().st_mtime > CANCEL_MARKER_TTL_S:
                marker.unlink()
        except OSError:
            pass


def running_jobs(spool_root: Path) -> list[int]:
    return scan(spool_root)[0]


def remove_job(spool_root: Path, job_id: int, run: int = 0) -> None:
    """Forget a finished run of a job once ctld has acknowledged it.

    ctld may have requeued the job and launched its next run here already: that run's directory,
    and a cancel marker newer than this run's end, are left alone.
    """
    with DIRS_LOCK:
        path = spool.job_dir(spool_root, job_id)
        if run_of(path) == run:
            _remove_finished(spool_root, job_id, path)


def _remove_finished(spool_root: Path, job_id: int, path: Path) -> None:
    """Remove a finished run's directory and the cancel marker that ended it (not a later one)."""
    marker = spool.cancel_marker(spool_root, job_id)
    try:
        ended = (path / spool.STATUS).stat().st_mtime
    except OSError:
        ended = time.time()
    try:
        if marker.stat().st_mtime <= ended:
            marker.unlink()
    except OSError:
        pass
    shutil.rmtree(path, ignore_errors=True)


def make_way_for_run(spool_root: Path, job_id: int, run: int) -> bool:
    """Before launching run `run` of a job (DIRS_LOCK held): False if the job is here already.

    A finished earlier run whose directory is still here (ctld acknowledged its end and requeued
    the job before the reporter removed it) is removed: ctld has recorded it and moved on.
    An earlier run that still runs (its launch outlasted ctld's timeout, so ctld requeued it)
    goes on as the job's run, as a retried launch of the same run would.
    """
    path = spool.job_dir(spool_root, job_id)
    if not path.exists():
        return True
    if run_of(path) >= run:
        return False
    if spool.read_json(path / spool.STATUS) is None and _is_running(path, time.time()):
        log.warning("job %d: run %d still runs here; it stands for run %d", job_id, run_of(path), run)
        return False
    _remove_finished(spool_root, job_id, path)
    return True


def job_exists(spool_root: Path, job_id: int) -> bool:
    return spool.job_dir(spool_root, job_id).exists()


def signal_job(spool_root: Path, job_id: int, sig: int, batch_only: bool) -> bool:
    """Send `sig` to the job's process group (or only the script with batch_only).

    False when the job does not run here.
    """
    path = spool.job_dir(spool_root, job_id)
    if (path / spool.STATUS).exists():
        return False
    pid = spool.live_pid(path / spool.JOB_PID)
    if pid is None:
        return False
    try:
        if batch_only:
            os.kill(pid, sig)
        else:
            os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    return True


def leave_cancel_note(spool_root: Path, job_id: int, node: str, why: str) -> None:
    """What the job's stepd adds to its stderr as it ends it: `slurmstepd-node1: error: *** JOB 12 ON
    node1 CANCELLED AT 2026-12-01T15:40:00 DUE TO TIME LIMIT ***`, as 22.05's stepd says it (its
    prefix names the node), and shoal's own IDLE GPUS in the same words."""
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
    path = spool.job_dir(spool_root, job_id)
    with DIRS_LOCK:
        if path.is_dir():
            try:
                (path / spool.CANCEL_NOTE).write_text(
                    f"slurmstepd-{node}: error: *** JOB {job_id} ON {node} CANCELLED AT {when} DUE TO {why} ***\n"
                )
            except OSError:
                pass


def terminate_job(spool_root: Path, job_id: int, kill_wait: float | None, mark: bool = True) -> bool:
    """Ask the job's stepd to end it (SIGTERM, KillWait, SIGKILL). False if it is not running.

    The cancel marker is written first: a launch still on its way (or a stepd that has not yet
    written its pid) sees it and ends the job at once, so a cancel never loses the race. `mark`
    False: no launch of this run can be on its way (ctld heard it end, or has it nowhere here), and
    a marker would only stop the job's next run here.
    """
    path = spool.job_dir(spool_root, job_id)
    with DIRS_LOCK:  # not into a directory the reporter is removing (a file there would outlive it)
        if (path / spool.STATUS).exists():
            return False
        if mark:
            spool.cancel_marker(spool_root, job_id).touch()
        pid = spool.live_pid(path / spool.STEPD_PID)
        if pid is None:
            return False
        if kill_wait is not None:
            try:
                (path / spool.KILL_WAIT).write_text(f"{kill_wait}\n")
            except OSError:
                pass
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True
