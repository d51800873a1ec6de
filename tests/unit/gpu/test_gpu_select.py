"""GPU-topology-aware placement: the scheduling tables of issue 4 and invariants (hypothesis)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from ctld.sched import gpu_select
from ctld.sched.cycle import run_cycle
from ctld.sched.model import Node, NodeUsage
from ctld.sched.placement import Overlay, place
from tests.unit.gpu.fixtures import described_gpus, described_node
from tests.unit.sched.builders import cluster, job, partition, snapshot


def start_of(nodes: tuple[Node, ...], request: object) -> object:
    snap = snapshot(nodes, [request])  # type: ignore[list-item]
    return place(request, partition("batch", [n.name for n in nodes]), snap, Overlay())  # type: ignore[arg-type]


def used(node: Node, gpus: set[int], cpus: set[int] = frozenset()) -> Node:  # type: ignore[assignment]
    return dataclasses.replace(
        node, usage=NodeUsage(cpu_ids=frozenset(cpus), gpu_indices=frozenset(gpus), jobs=1)
    )


def test_two_gpus_on_pcie_node_get_a_linked_pair_on_one_socket_with_its_cores() -> None:
    pcie = described_node("p1", "pcie_a100")
    start = start_of((pcie,), job(1).gpus_per_node(2).cpus_per_task(4).obj())
    alloc = start.allocation[0]  # type: ignore[attr-defined]
    assert alloc.gpu_indices == (0, 2)  # NVLink bridge, both on NUMA node 0 (first fit would give 0,1)
    assert set(alloc.cpu_ids) <= set(range(32))


def test_second_pair_and_single_gpu_keep_pairs_whole() -> None:
    pcie = used(described_node("p1", "pcie_a100"), {0, 2}, set(range(4)))
    assert start_of((pcie,), job(1).gpus_per_node(2).obj()).allocation[0].gpu_indices == (1, 3)  # type: ignore[attr-defined]
    half = used(described_node("p1", "pcie_a100"), {0})
    # one GPU goes where a pair is already broken: GPU 2 (partner of busy GPU 0)
    assert start_of((half,), job(1).gpus_per_node(1).obj()).allocation[0].gpu_indices == (2,)  # type: ignore[attr-defined]


def test_four_gpus_on_dgx_stay_on_one_numa_node_with_affine_cores() -> None:
    dgx = used(described_node("d1", "dgx_h100"), {0})
    alloc = start_of((dgx,), job(1).gpus_per_node(4).cpus_per_task(8).obj()).allocation[0]  # type: ignore[attr-defined]
    assert alloc.gpu_indices == (4, 5, 6, 7)
    assert set(alloc.cpu_ids) <= set(range(56, 112))


def test_four_one_gpu_jobs_on_two_empty_nodes_land_on_one_node() -> None:
    nodes = (described_node("d1", "dgx_h100"), described_node("d2", "dgx_h100"))
    jobs = [job(i).gpus_per_node(1).obj() for i in range(1, 5)]
    result = run_cycle(snapshot(nodes, jobs), now=100)
    assert {a.node for s in result.starts for a in s.allocation} == {"d1"}
    assert sorted(a.gpu_indices[0] for s in result.starts for a in s.allocation) == [0, 1, 2, 3]


def test_partly_used_node_is_packed_before_an_empty_one() -> None:
    nodes = (described_node("d1", "dgx_h100"), used(described_node("d2", "dgx_h100"), {0, 1, 2}))
    result = run_cycle(snapshot(nodes, [job(1).gpus_per_node(2).obj()]), now=100)
    assert result.starts[0].allocation[0].node == "d2"


def test_sixteen_gpus_on_two_nodes_take_both_whole_or_wait() -> None:
    nodes = (described_node("d1", "dgx_h100"), described_node("d2", "dgx_h100"))
    big = job(1).nodes(2).gpus_per_node(8).obj()
    result = run_cycle(snapshot(nodes, [big]), now=100)
    assert [(a.node, a.gpu_indices) for a in result.starts[0].allocation] == [
        ("d1", tuple(range(8))),
        ("d2", tuple(range(8))),
    ]
    busy = (nodes[0], used(nodes[1], {3}))
    waiting = run_cycle(snapshot(busy, [big]), now=100)
    assert not waiting.starts and waiting.reasons[1] == "Resources"


def test_typed_requests_only_land_on_matching_types() -> None:
    nodes = (described_node("p1", "pcie_a100"), described_node("d1", "dgx_h100"))
    for gpu_type, node in (("h100", "d1"), ("a100", "p1")):
        result = run_cycle(snapshot(nodes, [job(1).gpus_per_node(1, gpu_type).obj()]), now=100)
        assert result.starts[0].allocation[0].node == node
    nothing = run_cycle(snapshot(nodes, [job(1).gpus_per_node(1, "v100").obj()]), now=100)
    assert not nothing.starts


def test_untopologised_gpus_are_lowest_first() -> None:
    plain = cluster(1)[0]
    assert gpu_select.choose(plain.gpus, 3) == plain.gpus[:3]
    assert gpu_select.choose(described_gpus("dgx_h100"), 9) is None


@st.composite
def gpu_cluster(draw: st.DrawFn) -> tuple[Node, ...]:
    nodes = []
    for i in range(draw(st.integers(1, 4))):
        base = described_node(f"n{i}", draw(st.sampled_from(["dgx_h100", "pcie_a100"])))
        busy = draw(st.sets(st.integers(0, 7), max_size=8))
        nodes.append(used(base, busy) if busy else base)
    return tuple(nodes)


@settings(max_examples=60, deadline=None)
@given(nodes=gpu_cluster(), data=st.data())
def test_no_gpu_given_twice_and_nothing_exceeds_a_node(nodes: tuple[Node, ...], data: st.DataObject) -> None:
    jobs = []
    for job_id in range(1, data.draw(st.integers(1, 10)) + 1):
        count = data.draw(st.sampled_from([1, 2, 3, 4, 8]))
        kind = data.draw(st.sampled_from(["per_node", "total", "typed"]))
        b = job(job_id).cpus_per_task(data.draw(st.sampled_from([1, 4])))
        if kind == "per_node":
            b = b.gpus_per_node(count)
        elif kind == "total":
            b = b.gpus(count * data.draw(st.integers(1, 2))).nodes(1, 2)
        else:
            b = b.gpus_per_node(count, data.draw(st.sampled_from(["h100", "a100"])))
        jobs.append(b.obj())
    result = run_cycle(snapshot(nodes, jobs), now=100)
    by_name = {n.name: n for n in nodes}
    given_gpus: dict[str, list[int]] = defaultdict(list)
    for start in result.starts:
        for alloc in start.allocation:
            node = by_name[alloc.node]
            assert not set(alloc.gpu_indices) & node.usage.gpu_indices
            assert set(alloc.gpu_indices) <= {g.index for g in node.gpus}
            assert len(alloc.cpu_ids) <= node.cpus
            given_gpus[alloc.node].extend(alloc.gpu_indices)
    for name, indices in given_gpus.items():
        assert len(indices) == len(set(indices)), f"GPU given twice on {name}"
        assert len(indices) + len(by_name[name].usage.gpu_indices) <= len(by_name[name].gpus)
