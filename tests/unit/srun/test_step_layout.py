"""The pure step layout: nodes, tasks per node, task ids (block/cyclic) and Slurm's refusals."""

from __future__ import annotations

import pytest

from ctld.sched.steps import AllocNode, StepRefused, StepRequest, layout_step

TWO_BY_TWO = [AllocNode("node1", 2), AllocNode("node2", 2)]
THREE_ONE = [AllocNode("node1", 3), AllocNode("node2", 1)]


@pytest.mark.parametrize(
    ("alloc", "req", "nodes", "ids"),
    [
        (TWO_BY_TWO, StepRequest(min_nodes=2, num_tasks=4), ("node1", "node2"), ((0, 1), (2, 3))),
        (THREE_ONE, StepRequest(min_nodes=2, num_tasks=4), ("node1", "node2"), ((0, 1, 2), (3,))),
        (
            TWO_BY_TWO,
            StepRequest(min_nodes=2, num_tasks=4, distribution="cyclic"),
            ("node1", "node2"),
            ((0, 2), (1, 3)),
        ),
        (TWO_BY_TWO, StepRequest(num_tasks=1), ("node1",), ((0,),)),
        (TWO_BY_TWO, StepRequest(), ("node1", "node2"), ((0,), (1,))),
        (TWO_BY_TWO, StepRequest(nodelist=("node2",), num_tasks=2), ("node2",), ((0, 1),)),
        (TWO_BY_TWO, StepRequest(min_nodes=2, ntasks_per_node=1), ("node1", "node2"), ((0,), (1,))),
    ],
    ids=["block-2x2", "block-3-1", "cyclic", "one-task", "default-one-per-node", "nodelist", "per-node"],
)
def test_layout(
    alloc: list[AllocNode], req: StepRequest, nodes: tuple[str, ...], ids: tuple[tuple[int, ...], ...]
) -> None:
    got = layout_step(alloc, {}, req)
    assert got.nodes == nodes
    assert got.task_ids == ids


@pytest.mark.parametrize(
    ("req", "busy", "message", "retry"),
    [
        (StepRequest(num_tasks=99), {}, "More processors requested than permitted", False),
        (StepRequest(min_nodes=3), {}, "Requested node configuration is not available", False),
        (StepRequest(nodelist=("node9",)), {}, "Requested node configuration is not available", False),
        (StepRequest(min_nodes=2, num_tasks=4), {"node1": frozenset({0})}, "Requested nodes are busy", True),
        (StepRequest(distribution="plane"), {}, "Invalid --distribution specification", False),
    ],
    ids=["too-many-tasks", "too-many-nodes", "foreign-node", "busy", "bad-distribution"],
)
def test_refusals(req: StepRequest, busy: dict[str, frozenset[int]], message: str, retry: bool) -> None:
    with pytest.raises(StepRefused) as info:
        layout_step(TWO_BY_TWO, busy, req)
    assert info.value.message == message
    assert info.value.retry is retry


def test_overlap_ignores_busy_cpus() -> None:
    got = layout_step(
        TWO_BY_TWO,
        {"node1": frozenset({0, 1}), "node2": frozenset({0, 1})},
        StepRequest(min_nodes=2, num_tasks=4, overlap=True),
    )
    assert got.num_tasks == 4
