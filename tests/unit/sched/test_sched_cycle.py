"""run_cycle(): which pending jobs start, and the Slurm reason the others show in squeue."""

from __future__ import annotations

import pytest

from ctld.sched.cycle import run_cycle
from ctld.sched.model import UNLIMITED, Config, JobRequest, JobStatus, Phase, Snapshot
from tests.unit.sched.builders import cluster, job, node, partition, snapshot, status


def _started(snap: Snapshot, now: int = 1000) -> tuple[list[int], dict[int, str]]:
    result = run_cycle(snap, now)
    return [s.job_id for s in result.starts], result.reasons


def test_fifo_fills_cluster() -> None:
    snap = snapshot(cluster(2), pending=[job(i).tasks(16).obj() for i in (1, 2, 3)])
    started, reasons = _started(snap)
    assert started == [1, 2]
    assert reasons == {3: "Resources"}


def test_all_or_nothing_gang() -> None:
    """Two 2-node jobs on a 2-node cluster: one gets both nodes, the other waits whole."""
    snap = snapshot(
        cluster(2), pending=[job(1).nodes(2).exclusive().obj(), job(2).nodes(2).exclusive().obj()]
    )
    result = run_cycle(snap, 0)
    assert [s.job_id for s in result.starts] == [1]
    assert len(result.starts[0].allocation) == 2
    assert result.reasons == {2: "Resources"}


def test_blocked_partition_gives_priority_reason() -> None:
    nodes = (node("n1").used(cpus=range(8)).obj(),)
    snap = snapshot(nodes, pending=[job(1).tasks(16).obj(), job(2).obj(), job(3).obj()])
    started, reasons = _started(snap)
    assert started == []
    assert reasons == {1: "Resources", 2: "Priority", 3: "Priority"}


def test_other_partition_not_blocked() -> None:
    nodes = cluster(2)
    parts = [
        partition("a", ["node1"], max_time_min=UNLIMITED),
        partition("b", ["node2"], max_time_min=UNLIMITED),
    ]
    snap = snapshot(
        nodes,
        partitions=parts,
        pending=[
            job(1).partition("a").tasks(32).nodes(1).obj(),
            job(2).partition("a").obj(),
            job(3).partition("b").obj(),
        ],
    )
    started, reasons = _started(snap)
    assert started == [3]
    assert reasons == {1: "Resources", 2: "Priority"}


def test_multi_partition_job_uses_first_that_fits() -> None:
    parts = [partition("a", ["node1"]), partition("b", ["node2"])]
    nodes = (node("node1").used(cpus=range(16)).obj(), node("node2").obj())
    snap = snapshot(nodes, partitions=parts, pending=[job(1).partition("a", "b").obj()])
    result = run_cycle(snap, 0)
    assert [(s.job_id, s.partition) for s in result.starts] == [(1, "b")]


def test_priority_order_and_tier() -> None:
    parts = [partition("low", ["node1"], priority_tier=1), partition("high", ["node1"], priority_tier=5)]
    snap = snapshot(
        cluster(1),
        partitions=parts,
        pending=[
            job(1).partition("low").tasks(16).obj(),
            job(2).partition("high").tasks(16).obj(),
        ],
    )
    started, reasons = _started(snap)
    assert started == [2]
    assert reasons == {1: "Resources"}


def test_admin_priority_and_nice() -> None:
    snap = snapshot(cluster(1), pending=[job(1).tasks(16).obj(), job(2).tasks(16).priority(10**10).obj()])
    assert _started(snap)[0] == [2]
    snap = snapshot(cluster(1), pending=[job(1).tasks(16).nice(100).obj(), job(2).tasks(16).obj()])
    result = run_cycle(snap, 0)
    assert [s.job_id for s in result.starts] == [2]
    assert result.priorities[2] > result.priorities[1]


ELIGIBILITY = [
    ("held by user", job(1).hold().obj(), "JobHeldUser"),
    ("held by admin", job(1).admin_hold().hold().obj(), "JobHeldAdmin"),
    ("begin time later", job(1).begin(5000).obj(), "BeginTime"),
    ("begin time passed", job(1).begin(500).obj(), None),
    ("dependency waits", job(1).depends("afterok:50").obj(), "Dependency"),
    ("dependency never", job(1).depends("afterok:51").obj(), "DependencyNeverSatisfied"),
    ("dependency met", job(1).depends("afterok:52").obj(), None),
    ("partition node limit", job(1).nodes(10).obj(), "PartitionNodeLimit"),
    ("partition max nodes", job(1).nodes(3).partition("small").obj(), "PartitionNodeLimit"),
    ("partition time limit", job(1).partition("debug").time(120).obj(), "PartitionTimeLimit"),
    ("partition unlimited time", job(1).partition("debug").time(UNLIMITED).obj(), "PartitionTimeLimit"),
    ("partition down", job(1).partition("down").obj(), "PartitionDown"),
    ("partition inactive", job(1).partition("inactive").obj(), "PartitionInactive"),
]
KNOWN: list[JobStatus] = [
    status(50, Phase.ACTIVE),
    status(51, Phase.FAILED),
    status(52, Phase.COMPLETED),
]


@pytest.mark.parametrize("req,want", [(c[1], c[2]) for c in ELIGIBILITY], ids=[c[0] for c in ELIGIBILITY])
def test_eligibility_reasons(req: JobRequest, want: str | None) -> None:
    nodes = cluster(4)
    names = [n.name for n in nodes]
    parts = [
        partition("batch", names, max_time_min=UNLIMITED),
        partition("small", names, max_nodes=2),
        partition("debug", names[:2], default_time_min=30, max_time_min=60),
        partition("down", names, state="DOWN"),
        partition("inactive", names, state="INACTIVE"),
    ]
    snap = snapshot(nodes, partitions=parts, pending=[req], jobs=KNOWN)
    started, reasons = _started(snap)
    if want is None:
        assert started == [1] and reasons == {}
    else:
        assert started == [] and reasons == {1: want}


def test_ineligible_jobs_do_not_block() -> None:
    snap = snapshot(
        cluster(1),
        pending=[job(1).hold().obj(), job(2).depends("afterany:99").obj(), job(3).obj()],
        jobs=[status(99, Phase.PENDING)],
    )
    started, reasons = _started(snap)
    assert started == [3]
    assert reasons == {1: "JobHeldUser", 2: "Dependency"}


def test_array_throttle() -> None:
    """--array=1-5%2 with one task running: one more starts, the rest wait JobArrayTaskLimit."""
    jobs = [status(100, Phase.ACTIVE, array_job_id=100, array_task_id=1)]
    pending = [job(100 + t).array(100, t, max_running=2).obj() for t in (2, 3, 4)]
    snap = snapshot(cluster(4), pending=pending, jobs=jobs)
    started, reasons = _started(snap)
    assert started == [102]
    assert reasons == {103: "JobArrayTaskLimit", 104: "JobArrayTaskLimit"}


def test_array_throttle_counts_starts_this_cycle() -> None:
    pending = [job(200 + t).array(200, t, max_running=2).obj() for t in range(5)]
    started, reasons = _started(snapshot(cluster(4), pending=pending))
    assert started == [200, 201]
    assert set(reasons.values()) == {"JobArrayTaskLimit"}


def test_max_job_test() -> None:
    pending = [job(i).tasks(32).obj() for i in (1, 2)] + [job(3).partition("other").obj()]
    nodes = cluster(2)
    parts = [partition("batch", ["node1"]), partition("other", ["node2"])]
    snap = snapshot(
        nodes, partitions=parts, pending=pending, config=Config(def_mem_per_cpu_mb=100, max_job_test=1)
    )
    started, reasons = _started(snap)
    assert started == []
    assert reasons == {1: "Resources", 2: "Priority", 3: "Priority"}


def test_started_jobs_have_no_reason_and_all_get_priority() -> None:
    snap = snapshot(cluster(1), pending=[job(1).obj(), job(2).tasks(16).obj()])
    result = run_cycle(snap, 0)
    assert 1 not in result.reasons
    assert set(result.priorities) == {1, 2}


def test_backfill_seam_is_noop() -> None:
    cfg = Config(def_mem_per_cpu_mb=1000, scheduler="sched/backfill")
    snap = snapshot(cluster(1), pending=[job(1).tasks(17).obj(), job(2).obj()], config=cfg)
    started, reasons = _started(snap)
    assert started == [] and reasons == {1: "Resources", 2: "Priority"}


def test_reference_busy_cluster() -> None:
    """The shape of /work/shared/reference/slurm-22.05/60_squeue_busy.txt (four full nodes)."""
    nodes = tuple(
        node(f"node{i}").gpus(8, "h100").used(cpus=range(16), mem=64000, gpus=range(8)).obj()
        for i in range(1, 5)
    )
    names = [n.name for n in nodes]
    parts = [partition("batch", names), partition("debug", names[:2], default_time_min=30, max_time_min=60)]
    pending = [
        job(12).nodes(10).obj(),
        job(14).partition("debug").time(120).obj(),
        job(24).gpus_per_node(4).obj(),
        job(25).nodes(2).gpus_per_node(2).obj(),
        job(26).begin(5000).obj(),
        job(27).depends("afterok:20").obj(),
        job(28).hold().obj(),
        job(29).nodes(4).obj(),
    ]
    snap = snapshot(nodes, partitions=parts, pending=pending, jobs=[status(20, Phase.ACTIVE)])
    started, reasons = _started(snap)
    assert started == []
    assert reasons == {
        12: "PartitionNodeLimit",
        14: "PartitionTimeLimit",
        24: "Resources",
        25: "Priority",
        26: "BeginTime",
        27: "Dependency",
        28: "JobHeldUser",
        29: "Priority",
    }
