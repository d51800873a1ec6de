"""place(): which nodes, CPUs, memory and GPUs a job gets now, or the reason it waits."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ctld.sched.model import Config, JobRequest, Node, NodeAllocation, Partition, Pend, Snapshot, Start
from ctld.sched.placement import Overlay, earliest_start, place
from ctld.sched.resources import MEM_WHOLE_NODE
from tests.unit.sched.builders import cluster, job, node, partition, running, snapshot


def _place(snap: Snapshot, req: JobRequest, part: Partition | None = None) -> Start | str:
    """The Start, or the reason word squeue would show."""
    found = place(req, part or snap.partitions[0], snap, Overlay())
    return found if isinstance(found, Start) else found.reason


@dataclass
class Case:
    name: str
    nodes: tuple[Node, ...]
    job: JobRequest
    want_nodes: list[str] | None  # None: does not fit now
    want_reason: str = "Resources"
    want_tasks: list[int] = field(default_factory=list)
    config: Config | None = None


CASES = [
    Case("one task lowest node", cluster(4), job(1).obj(), ["node1"], want_tasks=[1]),
    Case(
        "cpu fit skips full node",
        (node("a").used(cpus=range(16)).obj(), node("b").obj()),
        job(1).obj(),
        ["b"],
    ),
    Case("cpus per task", cluster(2), job(1).tasks(4).cpus_per_task(4).obj(), ["node1"], want_tasks=[4]),
    Case("too many cpus for one node", cluster(2), job(1).tasks(17).obj(), None),
    Case(
        "-n spreads when no -N",
        cluster(2),
        job(1).tasks(20, spread=True).obj(),
        ["node1", "node2"],
        want_tasks=[16, 4],
    ),
    Case(
        "-n packs one node when it fits",
        cluster(4),
        job(1).tasks(4, spread=True).obj(),
        ["node1"],
        want_tasks=[4],
    ),
    Case(
        "-N2 -n3 block 2+1", cluster(4), job(1).nodes(2).tasks(3).obj(), ["node1", "node2"], want_tasks=[2, 1]
    ),
    # 22.05 fills the first node after one task each (tests/compat/layouts/srun_N2_n4.txt)
    Case("-N2 -n4 3+1", cluster(4), job(1).nodes(2).tasks(4).obj(), ["node1", "node2"], want_tasks=[3, 1]),
    Case("-N2 one task per node", cluster(4), job(1).nodes(2).obj(), ["node1", "node2"], want_tasks=[1, 1]),
    Case(
        "--ntasks-per-node",
        cluster(4),
        job(1).nodes(2).tasks_per_node(3).obj(),
        ["node1", "node2"],
        want_tasks=[3, 3],
    ),
    Case(
        "-n8 --ntasks-per-node=4 takes two nodes",
        cluster(4),
        job(1).tasks(8).tasks_per_node(4).obj(),
        ["node1", "node2"],
        want_tasks=[4, 4],
    ),
    Case("memory too big for free", (node("a").used(mem=60000).obj(),), job(1).mem(8000).obj(), None),
    Case(
        "memory fits other node",
        (node("a").used(mem=60000).obj(), node("b").obj()),
        job(1).mem(8000).obj(),
        ["b"],
    ),
    Case("mem per cpu", (node("a").mem(4000).obj(),), job(1).tasks(4).mem_per_cpu(1001).obj(), None),
    Case("gpus per node", cluster(2), job(1).gpus_per_node(8).obj(), ["node1"]),
    Case(
        "gpus per node busy",
        (node("a").gpus(8, "h100").used(gpus=[0]).obj(),),
        job(1).gpus_per_node(8).obj(),
        None,
    ),
    Case(
        "gpu type match",
        (node("a").gpus(4, "a100").obj(), node("b").gpus(4, "h100").obj()),
        job(1).gpus_per_node(2, "h100").obj(),
        ["b"],
    ),
    Case("-G spread over nodes", cluster(2), job(1).nodes(2).gpus(12).obj(), ["node1", "node2"]),
    Case("gpus per task", cluster(1), job(1).tasks(3).gpus_per_task(3).obj(), None),
    Case(
        "exclusive needs idle node",
        (node("a").used(cpus=[0]).obj(), node("b").obj()),
        job(1).exclusive().obj(),
        ["b"],
    ),
    Case("exclusive none idle", (node("a").used(cpus=[0]).obj(),), job(1).exclusive().obj(), None),
    Case("node held exclusively", (node("a").used(cpus=[0], exclusive=True).obj(),), job(1).obj(), None),
    Case("-w required node", cluster(4), job(1).nodelist("node3").obj(), ["node3"]),
    Case("-w plus more nodes", cluster(4), job(1).nodes(2).nodelist("node3").obj(), ["node1", "node3"]),
    Case(
        "-w busy", (node("a").used(cpus=range(16)).obj(), node("b").obj()), job(1).nodelist("a").obj(), None
    ),
    Case(
        "-w down",
        (node("a").down().obj(), node("b").obj()),
        job(1).nodelist("a").obj(),
        None,
        want_reason="ReqNodeNotAvail",
    ),
    Case("-x excluded", cluster(2), job(1).exclude("node1").obj(), ["node2"]),
    Case(
        "features",
        (node("a").obj(), node("b").features("ib", "fast").obj()),
        job(1).features("ib").obj(),
        ["b"],
    ),
    Case("weights first", (node("a").weight(10).obj(), node("b").weight(1).obj()), job(1).obj(), ["b"]),
    Case("down and drained skipped", (node("a").down().obj(), node("b").obj()), job(1).obj(), ["b"]),
    Case(
        "no default memory takes whole node",
        (node("a").used(mem=1).obj(), node("b").obj()),
        job(1).obj(),
        ["b"],
        config=Config(),
    ),
    Case(
        "--mem=0 takes whole node",
        (node("a").used(mem=1).obj(), node("b").obj()),
        job(1).mem(MEM_WHOLE_NODE).obj(),
        ["b"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_place(case: Case) -> None:
    snap = snapshot(case.nodes, config=case.config)
    got = _place(snap, case.job)
    if case.want_nodes is None:
        assert got == case.want_reason
        return
    assert isinstance(got, Start), got
    assert [a.node for a in got.allocation] == case.want_nodes
    if case.want_tasks:
        assert [a.tasks for a in got.allocation] == case.want_tasks


def test_allocation_details() -> None:
    snap = snapshot((node("a").gpus(8, "h100").used(cpus=[0, 1], mem=2000, gpus=[0]).obj(),))
    got = _place(snap, job(7).tasks(2).cpus_per_task(2).gpus_per_node(2).obj())
    assert isinstance(got, Start)
    assert got.allocation == (NodeAllocation("a", (2, 3, 4, 5), 4000, (1, 2), 2),)
    assert got.partition == "batch"
    assert not got.exclusive


@pytest.mark.parametrize(
    ("mem", "config", "want_mem"),
    [
        (0, None, 16000),  # DefMemPerCPU=1000 x all 16 CPUs, as 22.05 charges it (AllocTRES mem=16000M)
        (30000, None, 30000),  # --mem
        (0, Config(), 64000),  # no default at all: the whole node
    ],
    ids=["DefMemPerCPU x all CPUs", "--mem", "no default: whole node"],
)
def test_exclusive_takes_whole_node(mem: int, config: Config | None, want_mem: int) -> None:
    snap = snapshot(cluster(1), config=config)
    want = job(1).exclusive()
    got = _place(snap, (want.mem(mem) if mem else want).obj())
    assert isinstance(got, Start)
    (alloc,) = got.allocation
    assert (alloc.cpus, alloc.mem_mb, alloc.gpu_indices) == (16, want_mem, tuple(range(8)))
    assert got.exclusive


def test_whole_cores_preferred() -> None:
    """A 2-thread core with one thread in use is left for last."""
    n = node("a").cpus(8).cores(1, 4, 2).used(cpus=[1]).obj()
    got = _place(snapshot((n,)), job(1).tasks(3).obj())
    assert isinstance(got, Start)
    assert got.allocation[0].cpu_ids == (2, 3, 4)


def test_overlay_counts_tentative_starts() -> None:
    snap = snapshot(cluster(1))
    overlay = Overlay()
    first = place(job(1).tasks(10).obj(), snap.partitions[0], snap, overlay)
    assert isinstance(first, Start)
    trial = overlay.copy()
    trial.add(first)
    assert place(job(2).tasks(10).obj(), snap.partitions[0], snap, trial) == Pend(
        "Resources", busy=True
    )  # the one verdict that invites preemption
    # the original overlay is untouched by the what-if
    assert isinstance(place(job(2).tasks(10).obj(), snap.partitions[0], snap, overlay), Start)


def test_partition_nodes_only() -> None:
    nodes = cluster(4)
    debug = partition("debug", ["node3", "node4"])
    snap = snapshot(nodes, partitions=[partition("batch", [n.name for n in nodes]), debug])
    got = place(job(1).partition("debug").obj(), debug, snap, Overlay())
    assert isinstance(got, Start)
    assert got.allocation[0].node == "node3"


def test_time_limit_from_partition() -> None:
    debug = partition("debug", ["node1"], default_time_min=30, max_time_min=60)
    snap = snapshot(cluster(1), partitions=[debug])
    got = place(job(1).partition("debug").obj(), debug, snap, Overlay())
    assert isinstance(got, Start) and got.time_limit_min == 30


# ---- earliest_start ----


def test_earliest_start_now_when_free() -> None:
    snap = snapshot(cluster(2))
    found = earliest_start(job(1).obj(), snap, now=100)
    assert found is not None and found[0] == 100


def test_earliest_start_waits_for_running_jobs() -> None:
    nodes = (
        node("node1").used(cpus=range(16), mem=16000).obj(),
        node("node2").used(cpus=range(16), mem=16000).obj(),
    )
    snap = snapshot(
        nodes,
        running=[running(10, ["node1"], end_time=500), running(11, ["node2"], end_time=300)],
    )
    found = earliest_start(job(1).obj(), snap, now=100)
    assert found is not None
    when, start = found
    assert when == 300 and start.allocation[0].node == "node2"
    both = earliest_start(job(2).nodes(2).obj(), snap, now=100)
    assert both is not None and both[0] == 500


def test_earliest_start_releases_exact_allocation() -> None:
    held = NodeAllocation("node1", tuple(range(8)), 8000)
    nodes = (node("node1").used(cpus=range(16), mem=16000).obj(),)
    snap = snapshot(
        nodes,
        running=[
            running(10, ["node1"], end_time=200, allocation=(held,)),
            running(11, ["node1"], end_time=900),
        ],
    )
    found = earliest_start(job(1).tasks(8).obj(), snap, now=0)
    assert found is not None and found[0] == 200
    bigger = earliest_start(job(2).tasks(9).obj(), snap, now=0)
    assert bigger is not None and bigger[0] == 900


def test_earliest_start_unknown_end_never() -> None:
    snap = snapshot((node("node1").used(cpus=range(16)).obj(),), running=[running(10, ["node1"], end_time=0)])
    assert earliest_start(job(1).obj(), snap, now=0) is None


def test_earliest_start_respects_begin_time() -> None:
    snap = snapshot(cluster(1))
    found = earliest_start(job(1).begin(5000).obj(), snap, now=100)
    assert found is not None and found[0] == 5000
