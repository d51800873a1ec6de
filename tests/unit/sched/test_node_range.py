"""-N A-B: 22.05 starts the job on as many free nodes as it may have, not the fewest that fit.

Measured on the real 22.05 (2026-12-01, 4 idle nodes of 16 CPUs; scenarios 211-214): -N1-2 gets 2
nodes (a task each), -N1-4 -n3 gets 3, -N1-2 -n2 with one node free gets that one (both tasks there),
-N1-8 gets the 4 there are. The controller turns the range into spread_nodes (ctld.jobs.spread_nodes);
these tables drive the core with it, now and at a later time (backfill's question) on a fake clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ctld.sched.model import JobRequest, Node, Start
from ctld.sched.placement import Overlay, earliest_start, place
from tests.unit.sched.builders import cluster, job, node, running, snapshot

NOW = 1_000_000  # the fake clock


@dataclass
class Case:
    name: str
    nodes: tuple[Node, ...]
    job: JobRequest
    want_nodes: list[str] | None  # None: does not start now
    want_tasks: list[int] | None = None


def _busy(name: str) -> Node:
    return node(name).used(cpus=range(16), exclusive=True).obj()


CASES = [
    Case(
        "-N1-2 idle: two nodes",
        cluster(4),
        job(1).nodes(1, 2).most_nodes(2).obj(),
        ["node1", "node2"],
        [1, 1],
    ),
    Case(
        "-N1-8 idle: the four there are",
        cluster(4),
        job(1).nodes(1, 8).most_nodes(8).obj(),
        ["node1", "node2", "node3", "node4"],
    ),
    Case(
        "-N1-4 -n3: a node per task",
        cluster(4),
        job(1).nodes(1, 4).tasks(3).most_nodes(3).obj(),
        ["node1", "node2", "node3"],
        [1, 1, 1],
    ),
    Case(
        "-N1-2 -n3: two nodes, 2+1",
        cluster(4),
        job(1).nodes(1, 2).tasks(3).most_nodes(2).obj(),
        ["node1", "node2"],
        [2, 1],
    ),
    Case(
        "-N1-2 -n2, one node free: it alone",
        (_busy("node1"), _busy("node2"), _busy("node3"), node("node4").obj()),
        job(1).nodes(1, 2).tasks(2).most_nodes(2).obj(),
        ["node4"],
        [2],
    ),
    Case(
        "-N2-4, two nodes free: those two",
        (_busy("node1"), node("node2").obj(), _busy("node3"), node("node4").obj()),
        job(1).nodes(2, 4).most_nodes(4).obj(),
        ["node2", "node4"],
    ),
    Case(
        "-N2-4, one node free: it waits",
        (_busy("node1"), _busy("node2"), _busy("node3"), node("node4").obj()),
        job(1).nodes(2, 4).most_nodes(4).obj(),
        None,
    ),
    Case(
        "-N1-2 -n2 -c16 on half-used nodes: the one that fits both tasks is not needed, two are free",
        (node("node1").used(cpus=range(8)).obj(), node("node2").obj(), node("node3").obj()),
        job(1).nodes(1, 2).tasks(2).cpus_per_task(16).most_nodes(2).obj(),
        ["node2", "node3"],
        [1, 1],
    ),
    Case(
        "-N1-2 -w node3: node3 and one more",
        cluster(4),
        job(1).nodes(1, 2).nodelist("node3").most_nodes(2).obj(),
        ["node1", "node3"],
    ),
    Case(
        "-N1-2 -w a busy node: it waits",
        (_busy("node1"), node("node2").obj()),
        job(1).nodes(1, 2).nodelist("node1").most_nodes(2).obj(),
        None,
    ),
    Case(
        "-N1-2 --exclusive: two whole nodes",
        cluster(4),
        job(1).nodes(1, 2).exclusive().most_nodes(2).obj(),
        ["node1", "node2"],
    ),
    # without spread_nodes (-n without -N, or --gpus): as few nodes as fit, as before
    Case("-n4 without -N packs one node", cluster(4), job(1).tasks(4, spread=True).obj(), ["node1"], [4]),
    Case("-N1-4 --gpus=3 packs one node", cluster(4), job(1).nodes(1, 4).gpus(3).obj(), ["node1"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_range_placement(case: Case) -> None:
    snap = snapshot(case.nodes)
    got = place(case.job, snap.partitions[0], snap, Overlay())
    if case.want_nodes is None:
        assert not isinstance(got, Start)
        return
    assert isinstance(got, Start), got
    assert [a.node for a in got.allocation] == case.want_nodes
    if case.want_tasks is not None:
        assert [a.tasks for a in got.allocation] == case.want_tasks


def test_node_range_starts_when_its_fewest_nodes_free() -> None:
    """Backfill's question on a fake clock: a -N1-2 job on two busy nodes starts when the first of them
    frees (+300), on that one; it does not wait for the second (+900) to have two."""
    nodes = (_busy("node1"), _busy("node2"))
    snap = snapshot(nodes, running=[running(10, ["node1"], NOW + 300), running(11, ["node2"], NOW + 900)])
    found = earliest_start(job(1).nodes(1, 2).most_nodes(2).time(30).obj(), snap, NOW)
    assert found is not None
    at, start = found
    assert (at, [a.node for a in start.allocation]) == (NOW + 300, ["node1"])
