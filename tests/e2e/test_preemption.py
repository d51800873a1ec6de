"""QOS preemption end to end (PreemptType=preempt/qos): a high-QOS job takes the GPUs a low one holds."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e
GRACE = 4  # the low QOS's GraceTime: SIGTERM first, SIGKILL this many seconds later
CACHE_LOADED = "association/QOS cache loaded"


@pytest.fixture(scope="module")
def qos_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("preempt"),
        nodes=1,
        accounting=True,
        extra=("PreemptType=preempt/qos", "PreemptMode=REQUEUE"),
        up_args=("--gpus-per-node", "8", "--gpu-type", "h100", "--no-cgroups"),
    )
    c.ok("sacctmgr", "-i", "add", "qos", "low", f"GraceTime={GRACE}")
    c.ok("sacctmgr", "-i", "add", "qos", "lowcancel", "PreemptMode=cancel")
    loaded = c.log().count(CACHE_LOADED)
    c.ok(
        "sacctmgr",
        "-i",
        "add",
        "qos",
        "high",
        "Preempt=low,lowcancel",
        "PreemptMode=requeue",
        f"GraceTime={GRACE}",
    )
    # ctld polls the association/QOS version every second: wait until it has loaded the last change
    wait_until("ctld to load the QOS", lambda: c.log().count(CACHE_LOADED) > loaded)
    yield c
    stop_cluster(c)


@pytest.fixture
def leftovers(qos_cluster: Cluster) -> Iterator[list[int]]:
    """Jobs a test submits; cancelled afterwards, so that a failure leaves the GPUs free for the next."""
    jobs: list[int] = []
    yield jobs
    if jobs:
        qos_cluster.run("scancel", *map(str, jobs))


def _epoch(stamp: str) -> float:
    """A timestamp as scontrol prints it (local time) in seconds since the epoch."""
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_sacctmgr_shows_the_preemption_settings(qos_cluster: Cluster) -> None:
    out = qos_cluster.ok("sacctmgr", "-P", "-n", "show", "qos", "format=Name,GraceTime,Preempt,PreemptMode")
    rows = {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines()}
    assert rows["high"] == ["00:00:04", "low,lowcancel", "requeue"]
    assert rows["low"] == ["00:00:04", "", "cluster"]
    assert "PreemptMode=REQUEUE" in qos_cluster.ok("scontrol", "show", "partition")  # the cluster's


def test_high_qos_requeues_the_low_job_and_it_runs_again(
    qos_cluster: Cluster, workdir: Path, leftovers: list[int]
) -> None:
    c = qos_cluster
    runs, terms = workdir / "runs", workdir / "terms"
    script = workdir / "low.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"echo run >> {runs}\n"
        f'if [ "$(wc -l < {runs})" -ge 2 ]; then exit 0; fi\n'  # the second run completes
        f"trap 'echo term >> {terms}' TERM\n"  # the first ignores SIGTERM: SIGKILL ends it after GraceTime
        "while true; do sleep 0.2; done\n"
    )
    low = c.submit("--qos=low", "--gres=gpu:8", "-o", "/dev/null", str(script))
    leftovers.append(low)
    c.wait_state(low, {"RUNNING"})
    wait_until("the low job's first run", lambda: lines(runs) == ["run"])

    submitted = time.monotonic()
    high = c.submit(
        "--qos=high", "--gres=gpu:8", "-o", "/dev/null", "--wrap", "sleep 10"
    )  # outlasts the checks below
    leftovers.append(high)

    shown: dict[str, str] = {}

    def preempted() -> bool:
        out = c.ok("scontrol", "show", "job", str(low))
        shown.update(re.findall(r"\b(JobState|PreemptTime|EndTime)=(\S+)", out))
        return shown.get("PreemptTime", "None") != "None"

    wait_until("the low job to be preempted", preempted, timeout=GRACE + 15)
    preempted_at = _epoch(shown["PreemptTime"])
    assert _epoch(shown["EndTime"]) == preempted_at + GRACE  # as Slurm: it ends after its grace time ...
    if time.time() < preempted_at + GRACE - 1:  # ... and runs until then (seen unless the machine crawled)
        assert shown["JobState"] == "RUNNING"
    c.wait_state(high, {"RUNNING"}, timeout=GRACE + 15)
    waited = time.monotonic() - submitted
    assert lines(terms) == ["term"]  # SIGTERM came first ...
    assert GRACE - 1 <= waited <= GRACE + 10  # ... and SIGKILL only after GraceTime
    assert c.state(low) == "PENDING"
    assert "Restarts=1" in c.ok("scontrol", "show", "job", str(low))

    assert c.wait_state(high, {"COMPLETED"}) == "COMPLETED"
    assert c.wait_state(low, {"COMPLETED"}, timeout=60) == "COMPLETED"
    assert lines(runs) == ["run", "run"]

    def accounted() -> bool:
        out = c.ok("sacct", "-D", "-X", "-P", "-n", "-o", "JobID,State", "-j", str(low))
        return out.split() == [f"{low}|PREEMPTED", f"{low}|COMPLETED"]

    wait_until("sacct -D to show the preempted run and the completed one", accounted)
    latest = c.ok("sacct", "-X", "-P", "-n", "-o", "JobID,State", "-j", str(low)).split()
    assert latest == [f"{low}|COMPLETED"]


def test_cancel_mode_ends_the_low_job_preempted(
    qos_cluster: Cluster, workdir: Path, leftovers: list[int]
) -> None:
    c = qos_cluster
    low = c.submit("--qos=lowcancel", "--gres=gpu:6", "-o", "/dev/null", "--wrap", "sleep 300")
    leftovers.append(low)
    c.wait_state(low, {"RUNNING"})
    high = c.submit("--qos=high", "--gres=gpu:8", "-o", "/dev/null", "--wrap", "sleep 1")
    leftovers.append(high)
    c.wait_state(high, {"RUNNING", "COMPLETED"}, timeout=40)
    assert c.state(low) == "PREEMPTED"
    assert c.job_field(low, "%t") == "PR"
    shown = c.ok("scontrol", "show", "job", str(low))
    assert "PreemptEligibleTime=" in shown and "PreemptTime=None" not in shown

    def accounted() -> bool:
        out = c.ok("sacct", "-P", "-n", "-o", "JobID,State", "-j", str(low))
        return f"{low}|PREEMPTED" in out.split()

    wait_until("sacct to show PREEMPTED", accounted)


@pytest.fixture(scope="module")
def tiers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("tiers"),
        nodes=1,
        cpus=4,
        extra=(
            "PreemptType=preempt/partition_prio",
            "PreemptMode=REQUEUE",
            "PartitionName=urgent Nodes=ALL PriorityTier=10 MaxTime=INFINITE",
        ),
    )
    yield c
    stop_cluster(c)


def test_a_higher_priority_tier_partition_requeues_a_lower_one(tiers: Cluster, workdir: Path) -> None:
    runs = workdir / "runs"
    low = tiers.submit("-c", "4", "-o", "/dev/null", "--wrap", f"echo run >> {runs}; sleep 300")
    wait_until("the low job's first run", lambda: lines(runs) == ["run"])  # before it can be preempted
    urgent = tiers.submit("-p", "urgent", "-c", "4", "-o", "/dev/null", "--wrap", "sleep 10")
    tiers.wait_state(urgent, {"RUNNING"}, timeout=40)
    assert tiers.state(low) == "PENDING"
    tiers.wait_state(urgent, {"COMPLETED"})
    tiers.wait_state(low, {"RUNNING"}, timeout=30)
    wait_until("the low job's second run", lambda: lines(runs) == ["run", "run"])
    tiers.ok("scancel", str(low))


def test_scontrol_requeue_keeps_each_run_in_accounting(qos_cluster: Cluster, leftovers: list[int]) -> None:
    """As Slurm 22.05: the run that was requeued is its own record (REQUEUED, its .batch CANCELLED); the
    running one has its .batch RUNNING (measured: 4705|REQUEUED, 4705.batch|CANCELLED, 4705|RUNNING,
    4705.batch|RUNNING)."""
    c = qos_cluster
    job = c.submit("-o", "/dev/null", "--wrap", "sleep 300")
    leftovers.append(job)
    c.wait_state(job, {"RUNNING"})
    c.ok("scontrol", "requeue", str(job))
    c.wait_state(job, {"RUNNING"}, timeout=30)

    seen: list[str] = []

    def accounted() -> bool:
        seen[:] = c.ok("sacct", "-D", "-P", "-n", "-o", "JobID,State", "-j", str(job)).split()
        return seen == [f"{job}|REQUEUED", f"{job}.batch|CANCELLED", f"{job}|RUNNING", f"{job}.batch|RUNNING"]

    try:
        wait_until("sacct -D to show the requeued run and the running one", accounted)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; sacct -D shows {seen}") from None
