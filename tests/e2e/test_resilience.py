"""Crashes and restarts: kill -9 of ctld during submits, noded restart under a running job, time limits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e


def _pid(cluster: Cluster, name: str) -> int:
    return int((cluster.dir / "run" / f"{name}.pid").read_text().split()[0])


def _restart(cluster: Cluster, module: str, *args: str) -> None:
    log = open(cluster.dir / "log" / f"{module}.restart.out", "ab")
    subprocess.Popen(
        [sys.executable, "-m", module, "-f", str(cluster.conf), *args],
        env=cluster.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait_ping(cluster: Cluster, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster.run("scontrol", "ping").returncode == 0 and "UP" in cluster.run("scontrol", "ping").stdout:
            return
        time.sleep(0.2)
    raise AssertionError("controller did not come back")


def test_kill_9_ctld_during_parallel_submits_loses_no_acknowledged_job(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    acknowledged: list[int] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        for _ in range(50):
            out = cluster.run("sbatch", "-H", "-J", f"crash{n}", "--wrap", "true", "-o", "/dev/null")
            if out.returncode == 0 and out.stdout.startswith("Submitted batch job "):
                with lock:
                    acknowledged.append(int(out.stdout.split()[-1]))
            else:
                assert "Unable to contact slurm controller" in out.stderr or "error" in out.stderr, out.stderr
                time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    try:
        for t in threads:
            t.start()
        while len(acknowledged) < 60:
            time.sleep(0.01)
        os.kill(_pid(cluster, "ctld"), signal.SIGKILL)
        time.sleep(0.5)
        _restart(cluster, "ctld.main")
        for t in threads:
            t.join(timeout=300)
        _wait_ping(cluster)
        listed = cluster.ok("squeue", "-h", "-o", "%i").split()
        assert len(acknowledged) >= 100
        assert len(listed) == len(set(listed))
        missing = set(map(str, acknowledged)) - set(listed)
        assert not missing, f"acknowledged jobs lost after kill -9: {sorted(missing)[:10]}"
        assert len(set(acknowledged)) == len(acknowledged)
    finally:
        stop_cluster(cluster)


def test_noded_restart_while_job_runs_job_finishes_and_is_reported(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", nodes=1)
    try:
        work = tmp_path / "w"
        work.mkdir()
        job = cluster.submit("--wrap", "sleep 3; echo survived", "-o", str(work / "out-%j"))
        cluster.wait_state(job, {"RUNNING"})
        os.kill(_pid(cluster, "noded"), signal.SIGKILL)
        time.sleep(0.5)
        _restart(cluster, "noded.main", "--no-agent", "-N", "node1")
        assert cluster.wait_state(job, {"COMPLETED", "FAILED", "NODE_FAIL"}, timeout=60) == "COMPLETED"
        assert (work / f"out-{job}").read_text().strip() == "survived"
    finally:
        stop_cluster(cluster)


def test_time_limit_ends_job_as_timeout(cluster_one_node: Cluster, tmp_path: Path) -> None:
    marker = tmp_path / "term"
    job = cluster_one_node.submit(
        "-t",
        "1",
        "-o",
        "/dev/null",
        "--wrap",
        f"trap 'echo got TERM > {marker}; exit 143' TERM; sleep 600 & wait",
    )
    cluster_one_node.wait_state(job, {"RUNNING"})
    assert cluster_one_node.wait_state(job, {"TIMEOUT", "FAILED", "COMPLETED"}, timeout=120) == "TIMEOUT"
    assert marker.read_text().strip() == "got TERM"


@pytest.fixture
def cluster_one_node(tmp_path: Path):  # type: ignore[no-untyped-def]
    c = start_cluster(tmp_path / "c1", nodes=1)
    yield c
    stop_cluster(c)


def test_job_that_finishes_while_ctld_is_down_is_reported_completed(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", nodes=1)
    try:
        job = cluster.submit("--wrap", "sleep 2", "-o", "/dev/null")
        cluster.wait_state(job, {"RUNNING"})
        os.kill(_pid(cluster, "ctld"), signal.SIGKILL)
        time.sleep(4)  # the job ends while nobody listens
        _restart(cluster, "ctld.main")
        _wait_ping(cluster)
        assert cluster.wait_state(job, {"COMPLETED", "NODE_FAIL", "FAILED"}, timeout=60) == "COMPLETED"
    finally:
        stop_cluster(cluster)


def test_nodes_take_work_again_at_once_after_ctld_is_killed_and_restarted(tmp_path: Path) -> None:
    """A new ctld knows nothing of its nodes until they register; as slurmd answers a new slurmctld, every
    noded registers again when a ctld that started since its last ping pings it (it waited up to 5 min)."""
    cluster = start_cluster(tmp_path / "c")
    try:
        os.kill(_pid(cluster, "ctld"), signal.SIGKILL)
        time.sleep(0.5)
        _restart(cluster, "ctld.main")
        _wait_ping(cluster)
        job = cluster.submit("-N2", "--wrap", "true", "-o", "/dev/null")
        assert cluster.wait_state(job, {"COMPLETED"}, timeout=60) == "COMPLETED"
        assert set(cluster.ok("sinfo", "-h", "-o", "%t").split()) == {"idle"}
        assert "a new ctld" in (cluster.dir / "log" / "noded.log").read_text()
    finally:
        stop_cluster(cluster)


def test_kill_9_ctld_right_after_a_big_arrays_answer_loses_no_task(tmp_path: Path) -> None:
    """Every task of an array is committed before sbatch hears its job id: the store and the accounting
    queue (sacct lists every task once dbd has them). Larger than MaxArraySize (1001) is refused as 22.05."""
    cluster = start_cluster(tmp_path / "c", accounting=True)
    try:
        too_big = cluster.run("sbatch", "-H", "-a", "0-1001", "--wrap", "true")
        assert too_big.returncode == 1 and "Invalid job array specification" in too_big.stderr
        out = cluster.run("sbatch", "-H", "-a", "0-1000", "-o", "/dev/null", "--wrap", "true")
        assert out.returncode == 0, out.stderr
        job = int(out.stdout.split()[-1])
        os.kill(_pid(cluster, "ctld"), signal.SIGKILL)
        time.sleep(0.5)
        _restart(cluster, "ctld.main")
        _wait_ping(cluster)
        listed = cluster.ok("squeue", "-h", "-r", "-o", "%i %T").splitlines()
        assert sorted(listed) == sorted(f"{job}_{k} PENDING" for k in range(1001))
        after = cluster.ok("sbatch", "-H", "--parsable", "--wrap", "true").strip()
        assert int(after) > job + 1000  # the tasks' ids are not handed out again
        # sacct folds never-started tasks into one row from the task records dbd holds: a gap would show
        folded = [f"{job}_[0-1000]|PENDING"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            acct = cluster.run("sacct", "-n", "-X", "-P", "-j", str(job), "-o", "JobID,State").stdout.split()
            if acct == folded:
                break
            time.sleep(1)
        assert acct == folded
        cluster.ok("scancel", str(job), after)
    finally:
        stop_cluster(cluster)
