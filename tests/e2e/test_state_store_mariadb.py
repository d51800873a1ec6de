"""A cluster whose ctld keeps its state on MariaDB (ShoalStateStore=mysql://...): kill -9 of ctld loses
nothing, and the restarted ctld (which first waits out the dead one's leadership lease) finishes the jobs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until
from tests.state_db import HOST, PORT, Relay, admin, scratch_database

pytestmark = pytest.mark.e2e


def _pid(cluster: Cluster, name: str) -> int:
    return int((cluster.dir / "run" / f"{name}.pid").read_text().split()[0])


def _restart_ctld(cluster: Cluster) -> None:
    log = open(cluster.dir / "log" / "ctld.restart.out", "ab")  # noqa: SIM115 - the daemon keeps it
    subprocess.Popen(
        [sys.executable, "-m", "ctld.main", "-f", str(cluster.conf)],
        env=cluster.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stored_job_ids(database: str) -> set[int]:
    conn = admin()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT job_id FROM `{database}`.jobs")
            return {int(row[0]) for row in cur.fetchall()}
    finally:
        conn.close()


def test_kill_9_ctld_on_mariadb_keeps_the_jobs_and_they_complete(tmp_path: Path, workdir: Path) -> None:
    with scratch_database() as db:
        cluster = start_cluster(
            tmp_path / "c",
            nodes=1,
            extra=(f"ShoalStateStore=mysql://root@{HOST}:{PORT}/{db.database}", "ShoalLeaseTimeout=2"),
        )
        try:
            running = cluster.submit("--wrap", "sleep 4; echo finished", "-o", str(workdir / "out-%j"))
            held = cluster.submit("-H", "--wrap", "echo later", "-o", str(workdir / "out-%j"))
            cluster.wait_state(running, {"RUNNING"})
            assert {running, held} <= _stored_job_ids(db.database)  # the state is in MariaDB ...
            assert not list(cluster.dir.rglob("ctld_state.db"))  # ... and not in a SQLite file
            os.kill(_pid(cluster, "ctld"), signal.SIGKILL)
            time.sleep(0.5)
            _restart_ctld(cluster)
            wait_until(
                "the restarted ctld answering", lambda: "is UP" in cluster.run("scontrol", "ping").stdout
            )
            assert cluster.state(held) == "PENDING"
            assert (
                cluster.wait_state(running, {"COMPLETED", "FAILED", "NODE_FAIL"}, timeout=90) == "COMPLETED"
            )
            assert (workdir / f"out-{running}").read_text().strip() == "finished"
            cluster.ok("scontrol", "release", str(held))
            assert cluster.wait_state(held, {"COMPLETED", "FAILED"}, timeout=60) == "COMPLETED"
            assert (workdir / f"out-{held}").read_text().strip() == "later"
            log = cluster.log("ctld")
            assert f"state store mysql://root@{HOST}:{PORT}/{db.database}" in log
            assert "took the leadership lease (epoch 2" in log  # the restart waited out the dead one's lease
        finally:
            stop_cluster(cluster)


def test_a_second_ctld_on_the_same_slurmctldhost_line_refuses_to_start_and_the_first_serves_on(
    tmp_path: Path,
) -> None:
    """Each ctld binds its own SlurmctldHost's address from its start (a standby answers Ping there): a
    second one for the same line cannot, and says so (takeover between two lines: test_ha_takeover.py)."""
    with scratch_database() as db:
        cluster = start_cluster(
            tmp_path / "c",
            nodes=1,
            extra=(f"ShoalStateStore=mysql://root@{HOST}:{PORT}/{db.database}", "ShoalLeaseTimeout=30"),
        )
        try:
            first = _pid(cluster, "ctld")
            second = subprocess.run(
                [sys.executable, "-m", "ctld.main", "-f", str(cluster.conf)],
                env=cluster.env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode == 1
            assert re.fullmatch(r"shoal-ctld: error: cannot bind \S+: address in use\n", second.stderr), (
                second.stderr
            )
            assert _pid(cluster, "ctld") == first
            assert cluster.submit("-H", "--wrap", "true", "-o", "/dev/null") > 0
        finally:
            stop_cluster(cluster)


def test_ctld_rides_out_a_database_restart_and_says_clearly_when_it_stays_down(tmp_path: Path) -> None:
    relay = Relay()
    relay.start()
    with scratch_database() as db:
        location = f"mysql://root@127.0.0.1:{relay.port}/{db.database}"
        cluster = start_cluster(
            tmp_path / "c",
            nodes=1,
            extra=(f"ShoalStateStore={location}", "ShoalLeaseTimeout=60", "MessageTimeout=3"),
        )
        try:
            first = cluster.submit("-H", "--wrap", "true", "-o", "/dev/null")
            relay.cut()  # the server restarted: every connection of ctld is gone
            second = cluster.submit("-H", "--wrap", "true", "-o", "/dev/null")  # reconnected, not an error
            relay.stop()  # and now it stays down
            refused = cluster.run("sbatch", "-H", "--wrap", "true", "-o", "/dev/null")
            assert refused.returncode != 0 and "Submitted batch job" not in refused.stdout
            assert f"cannot reach the state store {location}: " in refused.stderr, refused.stderr
            assert "Traceback" not in refused.stderr
            assert f"lost the connection to the state store {location}" in cluster.log("ctld")
            relay.start()  # back: ctld goes on without a restart, and nothing acknowledged was lost
            third = cluster.submit("-H", "--wrap", "true", "-o", "/dev/null")
            listed = set(map(int, cluster.ok("squeue", "-h", "-o", "%i").split()))
            assert {first, second, third} <= listed and third > second > first
            assert listed <= _stored_job_ids(db.database)
        finally:
            stop_cluster(cluster)
            relay.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_a_sigstopped_ctld_is_replaced_and_steps_down_to_standby_when_continued(tmp_path: Path) -> None:
    """The issue's SIGSTOP case with real shoal-ctlds. The second one listens on another port (one host
    cannot give both the cluster's address before the clients follow SlurmctldHost lines, docs/ha.md)."""
    with scratch_database() as db:
        cluster = start_cluster(
            tmp_path / "c",
            nodes=1,
            extra=(f"ShoalStateStore=mysql://root@{HOST}:{PORT}/{db.database}", "ShoalLeaseTimeout=2"),
        )
        backup = None
        try:
            held = cluster.submit("-H", "--wrap", "true", "-o", "/dev/null")
            text = cluster.conf.read_text()
            conf2 = cluster.dir / "slurm-backup.conf"  # beside slurm.conf: the same key and gres.conf
            conf2.write_text(
                re.sub(r"(?m)^SlurmctldPort=\d+", f"SlurmctldPort={_free_port()}", text)
                .replace("/run/ctld.pid", "/run/ctld2.pid")
                .replace("/log/ctld.log", "/log/ctld2.log")
            )
            primary = _pid(cluster, "ctld")
            os.kill(primary, signal.SIGSTOP)
            backup = subprocess.Popen(
                [sys.executable, "-m", "ctld.main", "-f", str(conf2)],
                env=cluster.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            wait_until(
                "the backup taking over", lambda: "took the leadership lease (epoch 2" in cluster.log("ctld2")
            )
            os.kill(primary, signal.SIGCONT)
            wait_until(
                "the deposed primary standing by",
                lambda: "standing by: another shoal-ctld is the primary" in cluster.log("ctld"),
            )
            assert "leadership lease lost to another shoal-ctld: stepping down" in cluster.log("ctld")
            assert _alive(primary)  # back as a backup, not exited
            refused = cluster.run("squeue")  # the agent's only host is the standby now: not the primary
            assert refused.returncode != 0 and "Unable to contact slurm controller" in refused.stderr
            assert held in _stored_job_ids(db.database)
            assert backup.poll() is None  # the new primary goes on
        finally:
            if backup is not None and backup.poll() is None:
                backup.terminate()
                backup.wait(30)
            stop_cluster(cluster)
