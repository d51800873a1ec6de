"""A job step's supervisor with real processes: what a terminate does to tasks not yet started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from noded import jobs, spool, tasks
from noded.launcher import LaunchFailed, LaunchRefused
from noded.taskd import StepSpec, TaskSpec
from shoal import taskio
from shoal.v1 import jobs_pb2, node_pb2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_terminate_before_the_tasks_start_keeps_them_from_starting(open_dirs: tuple[Path, Path]) -> None:
    """scancel while a step is being launched: TerminateJob can reach the step's supervisor while it
    is still connecting to srun. The tasks must not start after that (they would outlive the job)."""
    spool_root, work = open_dirs
    port = _free_port()
    step = tasks.step_dir(spool_root, 10, 0)
    step.mkdir()
    spec = StepSpec(
        job_id=10,
        step_id=0,
        node="n1",
        uid=os.geteuid(),
        gid=os.getegid(),
        groups=[],
        cwd=str(work),
        argv=["/bin/sh", "-c", f"touch {work / 'started'}; sleep 300"],
        tasks=[TaskSpec(gtid=0, env={"PATH": "/usr/bin:/bin"}, stdin="/dev/null")],
        io_host="127.0.0.1",
        io_port=port,
        io_token="t",
        kill_wait=1,
    )
    spec.save(step / "tasks.json")
    # returns once the supervisor's pid is on record; srun does not listen yet, so it keeps connecting
    subprocess.run([sys.executable, "-m", "noded.stepd", str(step / "tasks.json")], check=True, timeout=30)
    assert tasks.terminate_steps(spool_root, 10) == 1
    frames = []
    with socket.create_server(("127.0.0.1", port)) as server:
        server.settimeout(20)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(20)
            while (got := taskio.read_frame(conn)) is not None and got[0] != taskio.DONE:
                frames.append(got)
    exits = [(task, json.loads(payload)) for kind, task, payload in frames if kind == taskio.EXIT]
    assert exits == [(0, {"code": 0, "signal": signal.SIGTERM})]
    assert not (work / "started").exists()


def _launch_request(work: Path, start_time: int) -> node_pb2.LaunchTasksRequest:
    job = jobs_pb2.JobInfo(
        job_id=11, nodes="n1", num_nodes=1, user_id=os.geteuid(), group_id=os.getegid(), start_time=start_time
    )
    job.spec.work_dir = str(work)
    job.allocation.add(node="n1", cpus=1)
    step = jobs_pb2.JobStep(job_id=11, step_id=0, nodes="n1", num_nodes=1, num_tasks=1)
    step.layout.add(node="n1", addr="127.0.0.1", task_ids=[0], cpus=1)
    step.launch.argv.extend(["/bin/sh", "-c", f"touch {work / 'started'}"])
    step.launch.io_host, step.launch.io_port = "127.0.0.1", _free_port()
    return node_pb2.LaunchTasksRequest(node="n1", job=job, step=step, cluster_name="c", ctld_addr="h:6817")


def test_a_step_launch_that_arrives_after_the_jobs_terminate_is_refused(open_dirs: tuple[Path, Path]) -> None:
    """TerminateJob (scancel) and LaunchTasks (an srun in the job) cross: the terminate reaches this node
    first, so there is no step to end yet. The late launch must not start tasks that outlive the job."""
    spool_root, work = open_dirs
    now = int(time.time())
    assert not jobs.terminate_job(spool_root, 11, kill_wait=None)  # nothing ran here: only the marker
    with pytest.raises(LaunchRefused, match="Job/step already completing or completed"):
        tasks.launch_tasks(_launch_request(work, start_time=now), "n1", spool_root, kill_wait=1)
    assert not list(spool_root.glob("step11.*"))
    assert not (work / "started").exists()


def test_a_cancel_from_a_run_before_a_requeue_does_not_refuse_the_next_run(
    open_dirs: tuple[Path, Path],
) -> None:
    spool_root, work = open_dirs
    jobs.terminate_job(spool_root, 11, kill_wait=None)
    marker = spool.cancel_marker(spool_root, 11)
    os.utime(marker, (time.time() - 600, time.time() - 600))  # that run was cancelled ten minutes ago
    tasks.launch_tasks(_launch_request(work, start_time=int(time.time())), "n1", spool_root, kill_wait=1)
    # its supervisor started (and waits for srun, which is not listening): a terminate now reaches it
    assert tasks.terminate_steps(spool_root, 11) == 1


def test_a_requeued_jobs_step_starts_once_the_previous_runs_step_has_gone(
    open_dirs: tuple[Path, Path],
) -> None:
    """After a requeue the next run's step 0 can arrive while the previous run's step 0 (tasks in their
    KillWait) still holds its directory: the launch waits for it rather than starting nothing."""
    spool_root, work = open_dirs
    old = tasks.step_dir(spool_root, 11, 0)
    old.mkdir()
    (old / "tasks.json").write_text("{}")
    os.utime(old / "tasks.json", (time.time() - 60, time.time() - 60))  # the run before the requeue
    threading.Timer(0.5, shutil.rmtree, (old,)).start()  # its supervisor ends half a second later
    tasks.launch_tasks(_launch_request(work, start_time=int(time.time())), "n1", spool_root, kill_wait=1)
    assert tasks.terminate_steps(spool_root, 11) == 1  # this run's supervisor is there


def test_a_previous_runs_step_that_will_not_end_fails_the_launch(
    open_dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    spool_root, work = open_dirs
    old = tasks.step_dir(spool_root, 11, 0)
    old.mkdir()
    (old / "tasks.json").write_text("{}")
    os.utime(old / "tasks.json", (time.time() - 60, time.time() - 60))
    monkeypatch.setattr(tasks, "EARLIER_RUN_WAIT_S", 0.3)
    with pytest.raises(LaunchFailed, match=r"StepId=11.0 of the job's previous run is still ending"):
        tasks.launch_tasks(_launch_request(work, start_time=int(time.time())), "n1", spool_root, kill_wait=1)


def test_a_repeated_launch_of_the_same_run_starts_nothing_more(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    req = _launch_request(work, start_time=int(time.time()))
    tasks.launch_tasks(req, "n1", spool_root, kill_wait=1)
    tasks.launch_tasks(req, "n1", spool_root, kill_wait=1)  # ctld retried: the step is this run's
    assert tasks.terminate_steps(spool_root, 11) == 1
