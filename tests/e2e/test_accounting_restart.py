"""dbd killed while 100 jobs run and finish, ctld restarted meanwhile, dbd restarted DBD_DOWN_S (5 s) after it
was killed: every record arrives exactly once, on each storage engine (SQLite, and MariaDB at
127.0.0.1:3306 when it answers: the restarted dbd stores into a fresh database there).

dbd comes back no earlier than DBD_DOWN_S after the kill and no earlier than the last job's end, so every
record waits in ctld's queue across its restart; SHOAL_TEST_DBD_DOWN_S makes the outage longer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from shoal.arrayspec import parse_array
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until
from tests.state_db import HOST, PORT, scratch_database

pytestmark = pytest.mark.e2e
JOBS = 100
DBD_DOWN_S = float(os.environ.get("SHOAL_TEST_DBD_DOWN_S", "5"))


@pytest.fixture(params=["sqlite", "mariadb"])
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The engine: "sqlite" (the file `shoal up` writes), or a fresh MariaDB database's name (dropped after)."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    with scratch_database() as db:
        yield db.database


def _use_mariadb(conf: Path, database: str) -> str:
    """Point slurmdbd.conf at `database` on the MariaDB server; returns its SQLAlchemy URL."""
    lines = [
        line for line in conf.read_text().splitlines() if not line.startswith(("StorageType", "StorageLoc"))
    ]
    lines += [
        "StorageType=accounting_storage/mysql",
        f"StorageHost={HOST}",
        f"StoragePort={PORT}",
        "StorageUser=root",
        f"StorageLoc={database}",
    ]
    conf.write_text("\n".join(lines) + "\n")
    return f"mysql+pymysql://root@{HOST}:{PORT}/{database}?charset=utf8mb4"


def _pid(cluster: Cluster, name: str) -> int:
    return int((cluster.dir / "run" / f"{name}.pid").read_text().split()[0])


def _start(cluster: Cluster, module: str, conf: Path) -> None:
    log = open(cluster.dir / "log" / f"{module}.restart.out", "ab")  # noqa: SIM115 - the daemon keeps it
    subprocess.Popen(
        [sys.executable, "-m", module, "-f", str(conf)],
        env=cluster.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_dbd_down_and_ctld_restart_lose_and_duplicate_nothing(tmp_path: Path, engine: str) -> None:
    cluster = start_cluster(tmp_path / "c", nodes=2, cpus=4, accounting=True)
    try:
        os.kill(_pid(cluster, "dbd"), signal.SIGKILL)
        killed = time.monotonic()
        url = f"sqlite:///{cluster.dir / 'state' / 'slurm_acct_db.sqlite'}"
        if engine != "sqlite":  # the restarted dbd stores what ctld queued meanwhile in MariaDB
            url = _use_mariadb(cluster.dir / "slurmdbd.conf", engine)
        array = cluster.submit("-a", f"1-{JOBS}", "--wrap", "true", cwd=tmp_path)
        # a task has started (its output file is made at its start): squeue may never catch one RUNNING,
        # 100 `true` tasks can all be done within the first squeue call on a loaded host
        wait_until("jobs to run", lambda: any(tmp_path.glob(f"slurm-{array}_*.out")))
        os.kill(_pid(cluster, "ctld"), signal.SIGKILL)  # records queued so far must survive
        time.sleep(1)
        _start(cluster, "ctld.main", cluster.conf)
        wait_until(
            "every job to finish",
            lambda: cluster.run("squeue", "-h").returncode == 0 and not cluster.ok("squeue", "-h").strip(),
            240,
        )
        time.sleep(max(0.0, killed + DBD_DOWN_S - time.monotonic()))
        _start(cluster, "dbd.main", cluster.dir / "slurmdbd.conf")

        def all_arrived() -> bool:
            out = cluster.run("sacct", "-a", "-P", "-n", "-D", "-o", "JobID,State", "-j", str(array))
            return out.returncode == 0 and out.stdout.count(".batch|COMPLETED") == JOBS

        wait_until("every record in sacct", all_arrived, 120)

        def counts() -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
            db = create_engine(url)
            try:
                with db.connect() as conn:
                    return (
                        tuple(conn.execute(text("SELECT COUNT(*), COUNT(DISTINCT job_id) FROM jobs")).one()),
                        tuple(
                            conn.execute(text("SELECT COUNT(*), COUNT(DISTINCT job_row) FROM steps")).one()
                        ),
                        tuple(conn.execute(text("SELECT COUNT(*) FROM jobs WHERE end_time = 0")).one()),
                    )
            finally:
                db.dispose()

        def runs_shown() -> list[tuple[str, str]]:
            """sacct's rows, never-started array tasks folded into one row (`A_[6,8]`) unfolded."""
            out = cluster.ok("sacct", "-a", "-P", "-n", "-D", "-o", "JobID,State", "-j", str(array))
            rows: list[tuple[str, str]] = []
            for job, state, *_ in (line.split("|") for line in out.splitlines()):
                if job.endswith("]"):
                    head, _, tasks = job[:-1].partition("_[")
                    rows.extend((f"{head}_{t}", state) for t in parse_array(tasks).task_ids)
                else:
                    rows.append((job, state))
            return rows

        # a requeued task's first run (below) may arrive after the .batch records: wait until sacct shows it
        wait_until(
            "sacct to show every run in the database",
            lambda: sum(not job.endswith(".batch") for job, _ in runs_shown()) == counts()[0][0],
            60,
        )
        records = runs_shown()
        runs = [(job, state) for job, state in records if not job.endswith(".batch")]
        assert sorted(job for job, _ in records if job.endswith(".batch")) == sorted(
            f"{array}_{t}.batch" for t in range(1, JOBS + 1)
        )
        assert sorted(job for job, state in runs if state == "COMPLETED") == sorted(
            f"{array}_{t}" for t in range(1, JOBS + 1)
        )
        # a task ctld had started but not yet launched when it was killed never reached its node: the
        # restarted ctld requeues it, and that first run is its own record (NODE_FAIL), as in Slurm
        assert all(state == "NODE_FAIL" for _, state in runs if state != "COMPLETED")
        jobs, steps, unfinished = counts()
        assert jobs == (len(runs), JOBS) and steps == (JOBS, JOBS) and unfinished == (0,)
    finally:
        stop_cluster(cluster)
