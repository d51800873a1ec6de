"""`shoal up --ha`: the backup shoal-ctld takes over when the primary is killed (-9) in the middle of a
4-way submit storm and of a running srun step, and a primary stopped past the lease (SIGSTOP) steps down
to standby when continued, without writing (issue 18, docs/ha.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli import local_ha
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until
from tests.state_db import admin, require_mariadb

pytestmark = pytest.mark.e2e


def _head_pid(cluster: Cluster, head: str) -> int:
    return int((cluster.dir / "run" / f"ctld-{head}.pid").read_text().split()[0])


def _head_log(cluster: Cluster, head: str) -> str:
    path = cluster.dir / "log" / f"ctld-{head}.log"
    return path.read_text() if path.exists() else ""


def _stored_job_ids(cluster: Cluster) -> set[int]:
    conn = admin()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT job_id FROM `{local_ha.database(cluster.dir)}`.jobs")
            return {int(row[0]) for row in cur.fetchall()}
    finally:
        conn.close()


@pytest.fixture
def ha_cluster(tmp_path: Path) -> Iterator[Cluster]:
    require_mariadb()
    cluster = start_cluster(tmp_path / "c", nodes=2, up_args=("--ha",), extra=("ShoalLeaseTimeout=3",))
    try:
        yield cluster
    finally:
        stop_cluster(cluster)
        conn = admin()
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{local_ha.database(cluster.dir)}`")
        finally:
            conn.close()


def test_shoal_up_ha_runs_a_primary_and_a_backup_that_scontrol_ping_shows(ha_cluster: Cluster) -> None:
    ping = ha_cluster.run("scontrol", "ping")
    assert (ping.returncode, ping.stdout) == (
        0,
        "Slurmctld(primary) at head1 is UP\nSlurmctld(backup) at head2 is UP\n",
    )
    status = subprocess.run(
        [sys.executable, "-m", "cli.shoal_admin", "status", "--dir", str(ha_cluster.dir)],
        env=ha_cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "shoal-ctld-head1: running" in status.stdout and "shoal-ctld-head2: running" in status.stdout


def test_kill_9_of_the_primary_during_a_submit_storm_and_an_srun_step(
    ha_cluster: Cluster, workdir: Path
) -> None:
    cluster = ha_cluster
    acknowledged: list[int] = []
    after_kill: list[int] = []
    killed = threading.Event()
    lock = threading.Lock()
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            out = cluster.run("sbatch", "-H", "--wrap", "true", "-o", "/dev/null")
            if out.returncode == 0 and out.stdout.startswith("Submitted batch job "):
                with lock:
                    acknowledged.append(int(out.stdout.split()[-1]))
                    if killed.is_set():
                        after_kill.append(acknowledged[-1])
            else:
                assert "Traceback" not in out.stderr, out.stderr

    step = subprocess.Popen(
        ["srun", "-N1", "bash", "-c", "for i in $(seq 1 20); do echo tick $i; sleep 1; done"],
        env=cluster.env,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ticks: list[str] = []
    assert step.stdout is not None
    reader = threading.Thread(target=lambda: ticks.extend(iter(step.stdout.readline, "")))  # type: ignore[union-attr]
    reader.start()
    wait_until("the srun step printing", lambda: bool(ticks))
    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        wait_until("20 acknowledged submissions", lambda: len(acknowledged) >= 20)
        assert step.poll() is None, "the srun step ended before the kill"
        os.kill(_head_pid(cluster, "head1"), signal.SIGKILL)
        killed.set()
        wait_until("submissions resuming on the backup", lambda: len(after_kill) >= 20, timeout=90)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert step.wait(timeout=120) == 0, step.stderr.read() if step.stderr else ""
    reader.join(timeout=30)
    assert [line.strip() for line in ticks if line.startswith("tick")] == [f"tick {i}" for i in range(1, 21)]
    assert "took the leadership lease" in _head_log(cluster, "head2")
    listed = cluster.ok("squeue", "-h", "-t", "all", "-o", "%i").split()
    assert len(listed) == len(set(listed)), "duplicate job ids"
    assert len(set(acknowledged)) == len(acknowledged), "an id acknowledged twice"
    missing = set(map(str, acknowledged)) - set(listed)
    assert not missing, f"acknowledged jobs lost at the takeover: {sorted(missing)[:10]}"
    ping = cluster.run("scontrol", "ping")
    assert ping.stdout.startswith("Slurmctld(primary) at head1 is DOWN\nSlurmctld(backup) at head2 is UP\n")
    assert ping.returncode == 0
    nodes = cluster.ok("sinfo", "-h", "-N", "-o", "%N %T").split("\n")
    assert all(line.split()[1] in {"idle", "mixed", "allocated"} for line in nodes if line), nodes


def test_a_sigstopped_primary_is_replaced_and_steps_down_without_writing(ha_cluster: Cluster) -> None:
    cluster = ha_cluster
    held = cluster.submit("-H", "--wrap", "true", "-o", "/dev/null")
    primary = _head_pid(cluster, "head1")
    os.kill(primary, signal.SIGSTOP)
    try:
        # sent to the stopped primary (the agent's last good host): it waits there
        waiting = subprocess.Popen(
            ["sbatch", "--parsable", "-H", "--wrap", "true", "-o", "/dev/null"],
            env=cluster.env,
            cwd=cluster.dir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(
            "the backup taking over", lambda: "took the leadership lease" in _head_log(cluster, "head2")
        )
        ping = cluster.run("scontrol", "ping")
        assert ping.returncode == 0
        assert ping.stdout.startswith(
            "Slurmctld(primary) at head1 is DOWN\nSlurmctld(backup) at head2 is UP\n"
        )
    finally:
        os.kill(primary, signal.SIGCONT)
    # the continued primary handles the waiting submission: its store refuses the write (fencing), it
    # answers "not the primary", and the agent sends it to the new primary: one job, never two
    out, err = waiting.communicate(timeout=90)
    assert waiting.returncode == 0, err
    moved = int(out.strip())
    wait_until(
        "the old primary standing by",
        lambda: "standing by: another shoal-ctld is the primary" in _head_log(cluster, "head1"),
    )
    assert "leadership lease lost to another shoal-ctld: stepping down" in _head_log(cluster, "head1")
    ping = cluster.run("scontrol", "ping")  # the old primary still answers, now as a standby
    assert (ping.returncode, ping.stdout) == (
        0,
        "Slurmctld(primary) at head1 is UP\nSlurmctld(backup) at head2 is UP\n",
    )
    after = cluster.submit("-H", "--wrap", "true", "-o", "/dev/null")
    listed = set(map(int, cluster.ok("squeue", "-h", "-o", "%i").split()))
    assert listed == {held, moved, after} and after > moved > held
    assert _stored_job_ids(cluster) == listed  # the store holds exactly what the new primary knows


def test_scontrol_takeover_hands_over_to_the_backup_and_jobs_go_on(
    ha_cluster: Cluster, workdir: Path
) -> None:
    cluster = ha_cluster
    before = cluster.submit("-H", "--wrap", "echo before", "-o", str(workdir / "out-%j"))
    denied = cluster.run("scontrol", "takeover", user=65534)  # nobody: operators only
    assert denied.returncode == 1 and "Access/permission denied" in denied.stderr
    done = cluster.run("scontrol", "takeover")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    wait_until(
        "the backup leading", lambda: "took the leadership lease (epoch 2" in _head_log(cluster, "head2")
    )
    wait_until(
        "the primary standing by",
        lambda: "standing by: another shoal-ctld is the primary" in _head_log(cluster, "head1"),
    )
    assert "scontrol takeover: handing over to a backup" in _head_log(cluster, "head1")
    cluster.ok("scontrol", "release", str(before))
    assert cluster.wait_state(before, {"COMPLETED", "FAILED"}, timeout=60) == "COMPLETED"
    assert (workdir / f"out-{before}").read_text().strip() == "before"
    ping = cluster.run("scontrol", "ping")
    assert (ping.returncode, ping.stdout) == (
        0,
        "Slurmctld(primary) at head1 is UP\nSlurmctld(backup) at head2 is UP\n",
    )
