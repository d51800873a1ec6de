"""A job step's supervisor with real processes: what a terminate does to tasks not yet started."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from noded import tasks
from noded.taskd import StepSpec, TaskSpec
from shoal import taskio


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
        job_id=10, step_id=0, node="n1", uid=os.geteuid(), gid=os.getegid(), groups=[], cwd=str(work),
        argv=["/bin/sh", "-c", f"touch {work / 'started'}; sleep 300"],
        tasks=[TaskSpec(gtid=0, env={"PATH": "/usr/bin:/bin"}, stdin="/dev/null")],
        io_host="127.0.0.1", io_port=port, io_token="t", kill_wait=1,
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
