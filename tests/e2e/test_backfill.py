"""sched/backfill end to end: a short job starts beside a reservation, the big job starts after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster


@pytest.fixture(scope="module")
def bf_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("bf"),
        nodes=2,
        extra=("SchedulerType=sched/backfill", "SchedulerParameters=bf_resolution=1,bf_window=60"),
    )
    yield c
    stop_cluster(c)


def test_short_job_backfills_and_big_job_keeps_its_start(bf_cluster: Cluster, tmp_path: Path) -> None:
    c = bf_cluster
    long = c.submit("-N1", "-n4", "-t", "3", "-D", str(tmp_path), "--wrap", "sleep 12")
    c.wait_state(long, {"RUNNING"})
    big = c.submit("-N2", "-t", "1", "-D", str(tmp_path), "--wrap", "sleep 1")
    short = c.submit("-N1", "-t", "1", "-D", str(tmp_path), "--wrap", "sleep 1")
    assert c.wait_state(short, {"RUNNING", "COMPLETING", "COMPLETED"}) in {
        "RUNNING",
        "COMPLETING",
        "COMPLETED",
    }
    pending = c.ok("squeue", "--start", "-h", "-j", str(big), "-o", "%T %r %S %Y").split()
    assert pending[:2] == ["PENDING", "Resources"]
    assert pending[2] != "N/A"  # the planned start: when the long job's limit runs out
    assert pending[3] != "(null)"
    assert c.state(long) == "RUNNING"
    # as 22.05's scontrol (the real one: Scheduler=Backfill for the short job, Main for the others)
    assert " Scheduler=Backfill\n" in c.ok("scontrol", "show", "job", str(short))
    assert " Scheduler=Main\n" in c.ok("scontrol", "show", "job", str(long))
    assert c.wait_state(big, {"RUNNING", "COMPLETING", "COMPLETED"}, timeout=90)
    assert c.wait_state(long, {"COMPLETED", "COMPLETING"}, timeout=5)
