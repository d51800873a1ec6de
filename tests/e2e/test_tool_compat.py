"""Smaller differences from 22.05 that tools and users trip over, each compared with the real one:
squeue --start for a --begin job, a never-started cancelled job's empty reason, -t all's state order,
and sacct's time window leaving out jobs cancelled before they were ever eligible.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("compat"), nodes=1, accounting=True)
    yield c
    stop_cluster(c)


def test_squeue_start_shows_the_begin_time(cluster: Cluster, workdir: Path) -> None:
    job = cluster.submit("-J", "later", "--begin=2031-01-02T03:04:05", "-o", "/dev/null", "--wrap", "true")
    try:
        lines = cluster.ok("squeue", "--start", "-j", str(job)).splitlines()
        assert lines[0].split() == [
            "JOBID",
            "PARTITION",
            "NAME",
            "USER",
            "ST",
            "START_TIME",
            "NODES",
            "SCHEDNODES",
            "NODELIST(REASON)",
        ]
        assert lines[1].split()[5:] == ["2031-01-02T03:04:05", "1", "(null)", "(BeginTime)"]
    finally:
        cluster.ok("scancel", str(job))


def test_cancelled_before_it_ran_shows_no_reason_and_no_window_record(cluster: Cluster) -> None:
    later = cluster.submit("-J", "notyet", "--begin=now+3600", "-o", "/dev/null", "--wrap", "true")
    held = cluster.submit("-J", "held", "-H", "-o", "/dev/null", "--wrap", "true")
    dep = cluster.submit("-J", "dep", f"--dependency=afterok:{later}", "-o", "/dev/null", "--wrap", "true")
    ran = cluster.submit("-J", "ran", "-o", "/dev/null", "--wrap", "true")
    cluster.ok("scancel", str(later), str(held), str(dep))
    # 22.05: `squeue -t all -n later -o '%i %j %T %R'` -> "26 later CANCELLED " (no "(None)")
    assert cluster.ok("squeue", "-t", "all", "-n", "notyet", "-o", "%i %j %T %R").splitlines() == [
        "JOBID NAME STATE NODELIST(REASON)",
        f"{later} notyet CANCELLED ",
    ]
    ids = ",".join(str(j) for j in (later, held, dep, ran))
    wait_until(
        "accounting to have the four jobs",
        lambda: len(cluster.ok("sacct", "-X", "-n", "-P", "-o", "JobID", "-j", ids).split()) == 4,
    )
    wait_until(
        "the job to end",
        lambda: "COMPLETED" in cluster.ok("sacct", "-X", "-n", "-P", "-o", "State", "-j", str(ran)),
    )
    # the default window (since midnight) lists what was ever eligible; -j lists every job asked for
    listed = cluster.ok("sacct", "-X", "-n", "-P", "-o", "JobID,State").split()
    assert f"{ran}|COMPLETED" in listed
    assert not [w for w in listed if w.split("|")[0] in {str(later), str(held), str(dep)}]
    shown = cluster.ok("scontrol", "show", "job", str(held))
    assert "EligibleTime=Unknown" in shown


def test_squeue_all_states_sort_by_state_name(cluster: Cluster) -> None:
    done = cluster.submit("-J", "done", "-o", "/dev/null", "--wrap", "true")
    cluster.wait_state(done, {"COMPLETED"})
    gone = cluster.submit("-J", "gone", "-H", "-o", "/dev/null", "--wrap", "true")
    cluster.ok("scancel", str(gone))
    out = cluster.ok("squeue", "-h", "-t", "all", "-j", f"{done},{gone}", "-o", "%i %T").split("\n")
    assert out[:2] == [f"{gone} CANCELLED", f"{done} COMPLETED"]  # as 22.05, not by state number


def test_sacct_names_a_step_alone(cluster: Cluster) -> None:
    """Snakemake's plugin asks `sacct -j J.0 ... -j J.9 --format=Reason --noheader` for a failed job's
    step reasons: a step the job never had lists nothing (the job's own line is no answer for it)."""
    job = cluster.submit("-J", "steps", "-o", "/dev/null", "--wrap", "exit 3")
    wait_until(
        "accounting to have the batch step",
        lambda: "FAILED" in cluster.ok("sacct", "-n", "-P", "-o", "State", "-j", f"{job}.batch"),
    )
    # 22.05: `sacct -j 574.0 --format=Reason --noheader` -> no output, exit 0
    assert cluster.ok("sacct", "-j", f"{job}.0", "--format=Reason", "--noheader") == ""
    assert cluster.ok("sacct", "-P", "-o", "JobID,State", "-j", f"{job}.batch").splitlines() == [
        "JobID|State",
        f"{job}.batch|FAILED",
    ]
    assert cluster.ok("sacct", "-P", "-o", "JobID,State", "-j", f"{job},{job}.batch").splitlines() == [
        "JobID|State",
        f"{job}|FAILED",
        f"{job}.batch|FAILED",
    ]
    assert cluster.ok("sacct", "-X", "-P", "-n", "-o", "JobID", "-j", f"{job}.batch").split() == [str(job)]
