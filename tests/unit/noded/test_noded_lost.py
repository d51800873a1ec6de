"""What noded does about supervisors that died without cleaning up: jobs' and steps' processes are
killed and their directories go; live steps count as the job running here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from noded import jobs, reap, spool, tasks


def _pid_file(path: Path, pid: int) -> None:
    path.write_text(f"{pid} {spool.process_start_time(pid) or 1}\n")


def test_live_steps_count_as_running_and_lost_ones_are_reaped(tmp_path: Path) -> None:
    live, lost, starting = (tmp_path / name for name in ("step7.0", "step8.0", "step9.0"))
    for path in (live, lost, starting):
        path.mkdir()
    _pid_file(live / spool.STEPD_PID, os.getpid())
    (lost / spool.STEPD_PID).write_text("999999999 1\n")  # a supervisor that is gone
    (lost / "tasks.json").write_text(json.dumps({"extra": {}}))
    assert tasks.running_step_jobs(tmp_path) == [7]
    assert tasks.reap_lost_steps(tmp_path) == ["step8.0"]
    assert live.exists() and starting.exists() and not lost.exists()


def test_a_lost_stepds_session_is_killed_before_its_job_is_reported(tmp_path: Path) -> None:
    # a stand-in supervisor: a session leader whose child lingers after the leader is killed
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE, start_new_session=True, text=True
    )
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    job_dir = spool.job_dir(tmp_path, 5)
    job_dir.mkdir()
    (job_dir / spool.LAUNCH).write_text(json.dumps({"job_id": 5, "run": 0}))
    _pid_file(job_dir / spool.STEPD_PID, leader.pid)
    os.kill(leader.pid, signal.SIGKILL)
    leader.wait()
    assert spool.process_start_time(child) is not None  # the child outlives its supervisor ...
    running, finished = jobs.scan(tmp_path, now=time.time())
    assert running == [] and [f.exit_signal for f in finished] == [signal.SIGKILL]
    assert reap.members(leader.pid, 0) == []  # ... until noded judges the job lost
    assert spool.process_start_time(child) is None
