"""priority/multifactor end to end: the bigger job goes first, an admin's Priority=, scontrol top, the site
factor, CALCULATE_RUNNING."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until
from tests.e2e.test_resilience import _pid, _restart, _wait_ping


@pytest.fixture(scope="module")
def prio_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("prio"),
        nodes=1,
        extra=("PriorityType=priority/multifactor", "PriorityWeightJobSize=1000", "PriorityWeightAge=10"),
    )
    yield c
    stop_cluster(c)


def _priority(c: Cluster, job_id: int, timeout: float = 30) -> int:
    """The job's priority once a scheduling cycle has computed it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = c.job_field(job_id, "%Q").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} got no priority")


def test_bigger_job_first_then_admin_priority_and_top(prio_cluster: Cluster, tmp_path: Path) -> None:
    c = prio_cluster
    common = ("-t", "1", "-D", str(tmp_path))
    blocker = c.submit("-n4", *common, "--wrap", "sleep 30")
    c.wait_state(blocker, {"RUNNING"})
    small = c.submit("-n1", *common, "--wrap", "sleep 1")
    big = c.submit("-n4", *common, "--wrap", "sleep 1")
    # job size: (1 node / 1 + CPUs / 4) / 2 -> 1 CPU: 625, 4 CPUs: 1000 (plus a little age)
    assert _priority(c, big) > _priority(c, small)
    listed = c.ok("squeue", "-h", "-t", "PD", "-o", "%i").split()
    assert listed[:2] == [str(big), str(small)]

    # an admin's Priority= sticks; Priority=0 holds the job; release recomputes it
    c.ok("scontrol", "update", f"JobId={small}", "Priority=5000")
    assert _priority(c, small) == 5000
    assert c.ok("squeue", "-h", "-t", "PD", "-o", "%i").split()[:2] == [str(small), str(big)]
    c.ok("scontrol", "update", f"JobId={small}", "Priority=0")
    assert c.job_field(small, "%r").strip() == "JobHeldAdmin"
    c.ok("scontrol", "release", str(small))
    assert _priority(c, small) < 5000

    # scontrol top: the small job moves ahead of the same user's big one (nice values traded)
    c.ok("scontrol", "top", str(small))
    assert _priority(c, small) > _priority(c, big)
    assert c.ok("squeue", "-h", "-t", "PD", "-o", "%i").split()[:2] == [str(small), str(big)]
    nice = {
        int(i): int(n) for i, n in (line.split() for line in c.ok("squeue", "-h", "-o", "%i %y").splitlines())
    }
    assert nice[small] < 0 < nice[big] and nice[small] + nice[big] == 0
    c.ok("scancel", str(blocker), str(small), str(big))


def test_site_factor_is_added_and_shown_by_sprio(prio_cluster: Cluster, tmp_path: Path) -> None:
    c = prio_cluster
    common = ("-t", "1", "-D", str(tmp_path))
    blocker = c.submit("-n4", *common, "--wrap", "sleep 30")
    c.wait_state(blocker, {"RUNNING"})
    job = c.submit("-n1", *common, "--wrap", "sleep 1")
    before = _priority(c, job)
    c.ok("scontrol", "update", f"JobId={job}", "SiteFactor=100000")
    assert _priority(c, job) >= before + 100000
    row = c.ok("sprio", "-h", "-j", str(job), "-o", "%i %S %Y").split()
    assert row[:2] == [str(job), "100000"] and int(row[2]) >= before + 100000
    # kept in the job record: a killed and restarted ctld still has it
    os.kill(_pid(c, "ctld"), signal.SIGKILL)
    time.sleep(0.5)
    _restart(c, "ctld.main")
    _wait_ping(c)
    assert c.ok("sprio", "-h", "-j", str(job), "-o", "%S").split() == ["100000"]
    # Slurm's bound is checked by scontrol; only operators may set it
    out = c.run("scontrol", "update", f"JobId={job}", "SiteFactor=-3000000000")
    assert (
        out.returncode == 1 and "SiteFactor value out of range (+/- 2147483645). Value ignored" in out.stderr
    )
    mine = c.submit("-n1", "-t", "1", "--wrap", "sleep 1", "-o", "/dev/null", user=NOBODY, cwd="/tmp")
    denied = c.run("scontrol", "update", f"JobId={mine}", "SiteFactor=5", user=NOBODY)
    assert denied.returncode == 1 and "Access/permission denied" in denied.stderr
    assert c.ok("sprio", "-h", "-j", str(mine), "-o", "%S").split() == ["0"]
    c.ok("scancel", str(blocker), str(job), str(mine))


@pytest.fixture(params=["CALCULATE_RUNNING", ""], ids=["calculate-running", "default"])
def aging_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Age saturates in a minute, so a priority visibly grows by the second while it is recalculated."""
    flags = (f"PriorityFlags={request.param}",) if request.param else ()
    c = start_cluster(
        tmp_path_factory.mktemp("aging"),
        nodes=1,
        extra=("PriorityType=priority/multifactor", "PriorityWeightAge=1000000", "PriorityMaxAge=1", *flags),
    )
    yield c
    stop_cluster(c)


def test_running_priority_recalculated_only_with_calculate_running(
    aging_cluster: Cluster, tmp_path: Path
) -> None:
    c = aging_cluster
    blocker = c.submit("-n4", "-t", "1", "-D", str(tmp_path), "--wrap", "sleep 30")
    c.wait_state(blocker, {"RUNNING"})
    job = c.submit("-n1", "-t", "1", "-D", str(tmp_path), "--wrap", "sleep 30")
    time.sleep(2)  # it ages while it waits
    c.ok("scancel", str(blocker))
    c.wait_state(job, {"RUNNING"})
    started = _priority(c, job)
    time.sleep(3)  # about 50,000 more of age, recalculated every cycle or not at all
    later = _priority(c, job)
    if "CALCULATE_RUNNING" in c.conf.read_text():
        assert later >= started + 30000
    else:
        assert later == started
    c.ok("scancel", str(job))


def test_sprio_lists_the_jobs_the_scheduler_may_start_one_row_per_array(
    prio_cluster: Cluster, tmp_path: Path
) -> None:
    """22.05 leaves out held jobs and those waiting for a dependency or a begin time, and shows an array's
    pending tasks as one row under the array's id (checked against the real one)."""
    c = prio_cluster
    for user in ("root", "nobody"):  # what earlier tests of the module left queued
        c.run("scancel", "-u", user)
    wait_until("an empty queue", lambda: not c.ok("squeue", "-h", "-o", "%i").strip())
    common = ("-t", "1", "-D", str(tmp_path), "--wrap", "sleep 1")
    blocker = c.submit("-n4", "-t", "1", "-D", str(tmp_path), "--wrap", "sleep 30")
    c.wait_state(blocker, {"RUNNING"})
    held = c.submit("-H", *common)
    dependent = c.submit("-d", f"afterok:{blocker}", *common)
    later = c.submit("--begin=now+600", *common)
    eligible = c.submit(*common)
    array = c.submit("-a", "1-3", *common)
    _priority(c, eligible)
    rows = c.ok("sprio", "-h", "-o", "%i").split()
    assert sorted(rows) == sorted([str(eligible), str(array)])
    c.ok("scancel", str(blocker), str(held), str(dependent), str(later), str(eligible), str(array))
