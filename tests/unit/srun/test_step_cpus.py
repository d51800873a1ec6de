"""Which CPUs a step gets, as Slurm 22.05: without --exact all the job's CPUs on each of its nodes
(so it waits until no other step holds any there), with --exact (implied by -c and --exclusive)
tasks x cpus-per-task of the free ones. Measured on real Slurm 22.05 inside `sbatch -N2 -n4 -c2`
(6 CPUs on node1, 2 on node2): `srun -n2` -> CPUs=8, `srun -n2 --exact` -> CPUs=2."""

from __future__ import annotations

import pytest

from ctld.sched.steps import AllocNode, StepRefused, StepRequest, layout_step

SIX_TWO = [AllocNode("node1", 6, cpu_ids=(0, 1, 2, 3, 4, 5)), AllocNode("node2", 2, cpu_ids=(8, 9))]
FOUR = [AllocNode("node1", 4, cpu_ids=(4, 5, 6, 7))]


@pytest.mark.parametrize(
    ("alloc", "req", "cpus", "cpu_ids"),
    [
        (SIX_TWO, StepRequest(num_tasks=2), (6, 2), ((0, 1, 2, 3, 4, 5), (8, 9))),
        (SIX_TWO, StepRequest(num_tasks=2, exact=True), (1, 1), ((0,), (8,))),
        (SIX_TWO, StepRequest(num_tasks=2, exclusive=True), (1, 1), ((0,), (8,))),
        (SIX_TWO, StepRequest(num_tasks=2, cpus_per_task=2, exact=True), (2, 2), ((0, 1), (8, 9))),
        (SIX_TWO, StepRequest(num_tasks=2, overlap=True), (6, 2), ((0, 1, 2, 3, 4, 5), (8, 9))),
        (FOUR, StepRequest(num_tasks=1), (4,), ((4, 5, 6, 7),)),
    ],
    ids=[
        "whole-by-default",
        "exact",
        "exclusive-implies-exact",
        "exact-cpus-per-task",
        "overlap-whole",
        "one-task-whole-node",
    ],
)
def test_step_cpus(
    alloc: list[AllocNode], req: StepRequest, cpus: tuple[int, ...], cpu_ids: tuple[tuple[int, ...], ...]
) -> None:
    got = layout_step(alloc, {}, req)
    assert got.cpus == cpus
    assert got.cpu_ids == cpu_ids


@pytest.mark.parametrize(
    ("busy", "req", "outcome"),
    [
        ({"node1": frozenset({4})}, StepRequest(num_tasks=1), "waits"),
        ({"node1": frozenset({4})}, StepRequest(num_tasks=1, exact=True), (5,)),
        ({"node1": frozenset({4})}, StepRequest(num_tasks=3, exact=True), (5, 6, 7)),
        ({"node1": frozenset({4, 5})}, StepRequest(num_tasks=3, exact=True), "waits"),
        ({"node1": frozenset({4, 5, 6, 7})}, StepRequest(num_tasks=1, overlap=True), (4, 5, 6, 7)),
    ],
    ids=[
        "whole-waits-for-any-held-cpu",
        "exact-takes-a-free-cpu",
        "exact-takes-the-rest",
        "exact-waits-when-too-few-free",
        "overlap-ignores-held",
    ],
)
def test_beside_a_running_step(
    busy: dict[str, frozenset[int]], req: StepRequest, outcome: str | tuple[int, ...]
) -> None:
    try:
        got = layout_step(FOUR, busy, req)
    except StepRefused as refused:
        assert refused.retry
        assert outcome == "waits"
        return
    assert got.cpu_ids == (outcome,)


def test_whole_step_prefers_a_node_no_step_holds() -> None:
    """Real Slurm: two `srun -n1` in a 2-node allocation run side by side, one per node."""
    got = layout_step(SIX_TWO, {"node1": frozenset(range(6))}, StepRequest(num_tasks=1))
    assert got.nodes == ("node2",)
    assert got.cpus == (2,)


def test_exact_step_refused_beyond_the_allocation() -> None:
    with pytest.raises(StepRefused) as info:
        layout_step(FOUR, {}, StepRequest(num_tasks=5, exact=True))
    assert info.value.message == "More processors requested than permitted"
    assert not info.value.retry
