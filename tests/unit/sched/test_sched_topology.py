"""topology/tree in the core: multi-node jobs take the lowest, best-fitting switch and the fewest leaves."""

from __future__ import annotations

import dataclasses

import pytest

from ctld.sched.cycle import run_cycle
from ctld.sched.model import Config, JobRequest, Node, Snapshot, Switch, Topology
from ctld.sched.placement import Overlay, could_ever_run, earliest_start, place
from tests.unit.sched.builders import cluster, job, node, snapshot


def tree(leaves: dict[str, list[str]], top: str = "top") -> Topology:
    """Leaf switches holding nodes, all under one top switch."""
    switches = [Switch(name, 0, frozenset(nodes), (name,)) for name, nodes in leaves.items()]
    every = frozenset(n for nodes in leaves.values() for n in nodes)
    switches.append(Switch(top, 1, every, tuple(leaves)))
    return Topology(tuple(switches), {name: frozenset(nodes) for name, nodes in leaves.items()})


EIGHT = cluster(8, gpus=0)  # node1..node8
TWO_BY_FOUR = tree({"s0": [f"node{i}" for i in (1, 2, 3, 4)], "s1": [f"node{i}" for i in (5, 6, 7, 8)]})


def busy(nodes: tuple[Node, ...], *names: str) -> tuple[Node, ...]:
    """The nodes with `names` wholly used."""
    return tuple(
        dataclasses.replace(n, usage=node(n.name).used(cpus=range(16)).obj().usage) if n.name in names else n
        for n in nodes
    )


def placed(snap: Snapshot, request: JobRequest) -> list[str]:
    found = place(request, snap.partitions[0], snap, Overlay())
    assert not isinstance(found, str), found
    return [a.node for a in found.allocation]


def with_topology(nodes: tuple[Node, ...], topo: Topology | None = TWO_BY_FOUR, **kw: object) -> Snapshot:
    return dataclasses.replace(snapshot(nodes, **kw), topology=topo)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("busy_nodes", "want"),
    [
        ((), ["node1", "node2", "node3", "node4"]),
        # node1 busy: s0 has 3 free, so the 4-node job goes to s1 as a whole rather than spanning
        (("node1",), ["node5", "node6", "node7", "node8"]),
    ],
    ids=["empty-cluster-first-switch", "avoids-spanning-two-switches"],
)
def test_four_node_job_lands_on_one_switch(busy_nodes: tuple[str, ...], want: list[str]) -> None:
    snap = with_topology(busy(EIGHT, *busy_nodes))
    assert placed(snap, job(1).nodes(4).obj()) == want


def test_without_topology_the_same_job_spans_switches() -> None:
    """The control: a flat network takes the first free nodes in order."""
    snap = with_topology(busy(EIGHT, "node1"), topo=None)
    assert placed(snap, job(1).nodes(4).obj()) == ["node2", "node3", "node4", "node5"]


def test_best_fit_picks_the_fuller_switch_that_still_fits() -> None:
    # s0 has 3 free nodes, s1 has 4: a 2-node job takes s0 (fewest free that suffice), keeping s1 whole
    snap = with_topology(busy(EIGHT, "node1"))
    assert placed(snap, job(1).nodes(2).obj()) == ["node2", "node3"]
    # s1 fuller now (2 free) than s0 (3 free): the job moves there
    snap = with_topology(busy(EIGHT, "node1", "node5", "node6"))
    assert placed(snap, job(1).nodes(2).obj()) == ["node7", "node8"]


def test_fewest_leaves_when_no_switch_suffices() -> None:
    """Three leaves of 3, 2 and 1 free nodes: a 4-node job takes the 3 and then the best-fitting 1."""
    nodes = cluster(9, gpus=0)
    topo = tree(
        {"a": ["node1", "node2", "node3"], "b": ["node4", "node5", "node6"], "c": ["node7", "node8", "node9"]}
    )
    snap = with_topology(busy(nodes, "node4", "node7", "node8"), topo)
    assert placed(snap, job(1).nodes(4).obj()) == ["node1", "node2", "node3", "node9"]


def test_single_node_jobs_are_unchanged_by_topology() -> None:
    snap = with_topology(busy(EIGHT, "node1"))
    assert placed(snap, job(1).obj()) == ["node2"]


SWITCH_WAIT = Config(def_mem_per_cpu_mb=1000, max_switch_wait_s=300)


@pytest.mark.parametrize(
    ("now", "wait", "started"),
    [
        (100, -1, False),  # within max_switch_wait (300 s from submit at 0): waits for one switch
        (299, -1, False),
        (300, -1, True),  # waited long enough: takes nodes on two switches
        (59, 60, False),  # --switches=1@60: its own, shorter wait
        (60, 60, True),
    ],
    ids=["waiting", "last-second", "gives-up", "own-wait", "own-wait-over"],
)
def test_switches_waits_then_takes_any(now: int, wait: int, started: bool) -> None:
    """--switches=1[@wait] with only 2 + 2 nodes free: the 4-node job waits, then gives up waiting."""
    nodes = busy(EIGHT, "node1", "node2", "node5", "node6")
    request = job(1).nodes(4).switches(1, wait).submitted(0).obj()
    snap = with_topology(nodes, pending=[request], config=SWITCH_WAIT)
    result = run_cycle(snap, now)
    if started:
        assert [a.node for a in result.starts[0].allocation] == ["node3", "node4", "node7", "node8"]
    else:
        assert result.starts == ()
        assert result.reasons == {1: "Resources"}


def test_switch_wait_is_capped_by_max_switch_wait() -> None:
    nodes = busy(EIGHT, "node1", "node2", "node5", "node6")
    request = job(1).nodes(4).switches(1, 1000).submitted(0).obj()
    snap = with_topology(nodes, pending=[request], config=SWITCH_WAIT)
    assert run_cycle(snap, 299).starts == ()
    assert len(run_cycle(snap, 300).starts) == 1


def test_switches_met_starts_at_once() -> None:
    request = job(1).nodes(4).switches(1).submitted(0).obj()
    snap = with_topology(busy(EIGHT, "node1"), pending=[request], config=SWITCH_WAIT)
    result = run_cycle(snap, 1)
    assert [a.node for a in result.starts[0].allocation] == ["node5", "node6", "node7", "node8"]


def test_earliest_start_uses_the_same_placement() -> None:
    """--test-only / squeue --start: the planned nodes sit on one switch too."""
    snap = with_topology(busy(EIGHT, "node1"))
    found = earliest_start(job(1).nodes(4).obj(), snap, 0)
    assert found is not None
    assert [a.node for a in found[1].allocation] == ["node5", "node6", "node7", "node8"]


def test_switches_never_makes_a_job_impossible() -> None:
    """6 nodes within 1 leaf switch of 4 can never be: accepted at submit, planned across switches."""
    request = job(1).nodes(6).switches(1).obj()
    snap = with_topology(EIGHT, pending=[request])
    assert could_ever_run(request, snap) is None
    found = earliest_start(request, snap, 0)
    assert found is not None and len(found[1].allocation) == 6
