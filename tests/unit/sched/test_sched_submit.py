"""Submit-time refusals (the "could it ever run" question) and partition limits."""

from __future__ import annotations

import pytest

from ctld.sched.limits import effective_time_limit, partition_limit_reason
from ctld.sched.model import UNLIMITED, Config, JobRequest, Node, Partition
from ctld.sched.placement import could_ever_run
from ctld.sched.submit import candidate_partitions, check_submission, pending_note
from tests.unit.sched.builders import cluster, job, node, partition, snapshot

NODES = (
    *cluster(2),
    node("cpu1").cpus(64).mem(256000).features("bigmem").obj(),
)
PARTS = [
    partition("batch", ["node1", "node2"], max_time_min=UNLIMITED),
    partition("cpu", ["cpu1"]),
    partition("both", ["node1", "node2", "cpu1"]),
    partition("drain", ["node1"], state="DRAIN"),
    partition("down", ["node1"], state="DOWN"),
    partition("sized", ["node1", "node2"], total_cpus=32),  # as the controller builds them
]

NOT_AVAILABLE = "Requested node configuration is not available"
REFUSALS = [
    ("fits", job(1).obj(), None),
    ("too many cpus per node", job(1).tasks(17).obj(), NOT_AVAILABLE),
    ("spread -n fits over nodes", job(1).tasks(32, spread=True).obj(), None),
    ("spread -n exceeds cluster", job(1).tasks(33, spread=True).obj(), NOT_AVAILABLE),
    ("memory beyond RealMemory", job(1).mem(64001).obj(), NOT_AVAILABLE),
    ("too many gpus per node", job(1).gpus_per_node(9).obj(), NOT_AVAILABLE),
    ("gpu type nobody has", job(1).gpus_per_node(1, "a100").obj(), NOT_AVAILABLE),
    (
        "gpus where no node has any",
        job(1).partition("cpu").gpus_per_node(1).obj(),
        "Invalid generic resource (gres) specification",
    ),
    ("feature nobody has", job(1).features("ib").obj(), NOT_AVAILABLE),
    ("feature in another candidate", job(1).partition("batch", "cpu").features("bigmem").obj(), None),
    ("-w unknown name", job(1).nodelist("nosuch").obj(), "Invalid node name specified"),
    ("-w not in partition", job(1).nodelist("cpu1").obj(), NOT_AVAILABLE),
    ("unknown partition", job(1).partition("nosuch").obj(), "Invalid partition name specified"),
    ("too many nodes pends instead", job(1).nodes(10).obj(), None),
    ("too many nodes and too big per node", job(1).nodes(10).tasks(200).obj(), NOT_AVAILABLE),
    ("bad node range", job(1).nodes(3, 2).obj(), "Node count specification invalid"),
    ("busy and down nodes still count", job(1).partition("down").tasks(16).obj(), None),
    (
        "drain partition refuses",
        job(1).partition("drain").obj(),
        "Required partition not available (inactive or drain)",
    ),
    ("exclusive whole node", job(1).exclusive().gpus_per_node(8).obj(), None),
    # 22.05 (checked on the real one): more CPUs in all than the partition has queues the job with
    # PartitionConfig, whatever each task needs; within the partition's CPUs a task too big refuses
    ("-n beyond the partition's CPUs pends", job(1).partition("sized").tasks(33, spread=True).obj(), None),
    (
        "and so does a task too big for any node",
        job(1).partition("sized").tasks(33).cpus_per_task(17).obj(),
        None,
    ),
    (
        "within its CPUs, too many for one node",
        job(1).partition("sized").tasks(20).nodes(1).obj(),
        NOT_AVAILABLE,
    ),
]


@pytest.mark.parametrize("req,want", [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_check_submission(req: JobRequest, want: str | None) -> None:
    nodes: tuple[Node, ...] = tuple(
        node(n.name).used(cpus=range(n.cpus)).obj() if n.name == "node1" else n for n in NODES
    )
    refusal = check_submission(req, snapshot(nodes, partitions=PARTS))
    assert (refusal.message if refusal else None) == want


def test_could_ever_run_ignores_down_nodes() -> None:
    snap = snapshot((node("a").down().obj(),))
    assert could_ever_run(job(1).obj(), snap) is None


def test_candidate_partitions_in_user_order() -> None:
    snap = snapshot(NODES, partitions=PARTS)
    got = candidate_partitions(job(1).partition("cpu", "nosuch", "batch").obj(), snap)
    assert [p.name for p in got] == ["cpu", "batch"]


LIMITS = [
    ("ok", job(1).obj(), partition(nodes=["a", "b"]), None),
    (
        "more nodes than partition has",
        job(1).nodes(3).obj(),
        partition(nodes=["a", "b"]),
        "PartitionNodeLimit",
    ),
    (
        "more than MaxNodes",
        job(1).nodes(2).obj(),
        partition(nodes=["a", "b"], max_nodes=1),
        "PartitionNodeLimit",
    ),
    ("fewer than MinNodes", job(1).obj(), partition(nodes=["a", "b"], min_nodes=2), "PartitionNodeLimit"),
    (
        "more CPUs than it has",
        job(1).tasks(33, spread=True).obj(),
        partition(nodes=["a", "b"], total_cpus=32),
        "PartitionConfig",
    ),
    (
        "all of its CPUs",
        job(1).tasks(32, spread=True).obj(),
        partition(nodes=["a", "b"], total_cpus=32),
        None,
    ),
    (
        "time over MaxTime",
        job(1).time(61).obj(),
        partition(nodes=["a"], max_time_min=60),
        "PartitionTimeLimit",
    ),
    ("time at MaxTime", job(1).time(60).obj(), partition(nodes=["a"], max_time_min=60), None),
    (
        "unlimited job",
        job(1).time(UNLIMITED).obj(),
        partition(nodes=["a"], max_time_min=60),
        "PartitionTimeLimit",
    ),
    ("down", job(1).obj(), partition(nodes=["a"], state="DOWN"), "PartitionDown"),
    ("inactive", job(1).obj(), partition(nodes=["a"], state="INACTIVE"), "PartitionInactive"),
    ("drain still runs queued jobs", job(1).obj(), partition(nodes=["a"], state="DRAIN"), None),
]


@pytest.mark.parametrize("req,part,want", [c[1:] for c in LIMITS], ids=[c[0] for c in LIMITS])
def test_partition_limits(req: JobRequest, part: Partition, want: str | None) -> None:
    assert partition_limit_reason(req, part) == want


TIME = [
    ("job's own", job(1).time(10).obj(), partition(default_time_min=30, max_time_min=60), 10),
    ("partition default", job(1).obj(), partition(default_time_min=30, max_time_min=60), 30),
    ("partition max", job(1).obj(), partition(max_time_min=60), 60),
    ("unlimited", job(1).obj(), partition(), UNLIMITED),
]


@pytest.mark.parametrize("req,part,want", [c[1:] for c in TIME], ids=[c[0] for c in TIME])
def test_effective_time_limit(req: JobRequest, part: Partition, want: int) -> None:
    assert effective_time_limit(req, part) == want


@pytest.mark.parametrize(
    ("enforce", "req", "refusal", "note"),
    [
        ("NO", job(1).nodes(99).obj(), None, "Requested partition configuration not available now"),
        ("NO", job(1).nodes(2).obj(), None, ""),
        ("ANY", job(1).nodes(99).obj(), "Node count specification invalid", ""),
        ("YES", job(1).nodes(99).obj(), "Node count specification invalid", ""),
        ("ANY", job(1).nodes(3).partition("batch", "both").obj(), None, ""),
        ("ALL", job(1).nodes(3).partition("batch", "both").obj(), "Node count specification invalid", ""),
    ],
    ids=[
        "queued-with-a-note",
        "fits-no-note",
        "any-refuses",
        "yes-is-any",
        "any-one-partition-allows",
        "all-needs-every-partition",
    ],
)
def test_node_count_beyond_the_partition(
    enforce: str, req: JobRequest, refusal: str | None, note: str
) -> None:
    """Slurm 22.05 (EnforcePartLimits=NO, its default) queues `srun -N 99` on a 4-node partition:
    srun prints `Requested partition configuration not available now` and waits."""
    snap = snapshot(NODES, partitions=PARTS, config=Config(enforce_part_limits=enforce))
    got = check_submission(req, snap)
    assert (got.message if got else None) == refusal
    if got is None:
        assert pending_note(req, snap) == note


@pytest.mark.parametrize(
    ("req", "details"),
    [
        (job(1).cpus_per_task(17).obj(), ("CPU count per node can not be satisfied",)),
        (job(1).tasks_per_node(5).cpus_per_task(4).obj(), ("CPU count per node can not be satisfied",)),
        (job(1).mem(64001).obj(), ("Memory specification can not be satisfied",)),
        (job(1).tasks(17).obj(), ()),  # 17 tasks on one node: refused, but Slurm says only the message
    ],
    ids=["cpus-per-task", "tasks-per-node", "memory", "tasks-on-one-node"],
)
def test_refusals_say_first_what_no_node_can_hold(req: JobRequest, details: tuple[str, ...]) -> None:
    refusal = check_submission(req, snapshot(cluster(2), partitions=[partition("batch", ["node1", "node2"])]))
    assert refusal is not None
    assert (refusal.details, refusal.message) == (details, NOT_AVAILABLE)
