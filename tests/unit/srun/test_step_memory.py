"""Step memory (Slurm 22.05): --mem / --mem-per-cpu held out of the job's memory on each node;
more than the job has is refused, more than is free waits, a step asking none holds none."""

from __future__ import annotations

import pytest

from ctld.sched.steps import (
    MEMORY_NOT_AVAILABLE,
    NODES_BUSY,
    AllocNode,
    StepRefused,
    StepRequest,
    layout_step,
)

NODES = [AllocNode("node1", 4, mem_mb=100), AllocNode("node2", 4, mem_mb=100)]


@pytest.mark.parametrize(
    ("req", "mem"),
    [
        (StepRequest(min_nodes=2, num_tasks=2), (0, 0)),
        (StepRequest(min_nodes=2, num_tasks=2, mem_per_node_mb=60), (60, 60)),
        (StepRequest(min_nodes=1, num_tasks=3, exact=True, mem_per_cpu_mb=20), (60,)),
        (StepRequest(min_nodes=1, num_tasks=1, cpus_per_task=2, exact=True, mem_per_cpu_mb=30), (60,)),
        # without --exact a step holds all the job's CPUs on its node, and --mem-per-cpu counts them
        # all (measured on 22.05: `srun -n1` in `sbatch -n2 --mem-per-cpu=500` holds mem=1000M)
        (StepRequest(min_nodes=1, num_tasks=1, mem_per_cpu_mb=20), (80,)),
    ],
    ids=["none-asked", "per-node", "per-cpu-times-tasks", "per-cpu-times-cpus-per-task", "per-cpu-all-held"],
)
def test_step_holds_its_memory(req: StepRequest, mem: tuple[int, ...]) -> None:
    assert layout_step(NODES, {}, req).mem_mb == mem


def test_more_than_the_job_has_is_refused_in_slurms_words() -> None:
    with pytest.raises(StepRefused) as err:
        layout_step(NODES, {}, StepRequest(num_tasks=1, mem_per_node_mb=200))
    assert err.value.message == MEMORY_NOT_AVAILABLE == "Memory required by task is not available"
    assert not err.value.retry
    with pytest.raises(StepRefused) as err:
        layout_step(NODES, {}, StepRequest(num_tasks=1, exact=True, mem_per_cpu_mb=300))
    assert err.value.message == MEMORY_NOT_AVAILABLE


def test_more_than_is_free_waits_and_what_fits_runs() -> None:
    busy = {"node1": 30, "node2": 30}
    with pytest.raises(StepRefused) as err:
        layout_step(NODES, {}, StepRequest(num_tasks=1, exact=True, mem_per_node_mb=80), busy_mem=busy)
    assert err.value.message == NODES_BUSY and err.value.retry
    assert layout_step(
        NODES, {}, StepRequest(num_tasks=1, exact=True, mem_per_node_mb=60), busy_mem=busy
    ).mem_mb == (60,)
    # a step that asks none, or overlaps, is never held back by memory
    assert layout_step(NODES, {}, StepRequest(num_tasks=1, exact=True), busy_mem={"node1": 100, "node2": 100})
    overlap = StepRequest(num_tasks=1, overlap=True, mem_per_node_mb=80)
    assert layout_step(NODES, {}, overlap, busy_mem=busy).mem_mb == (80,)


def test_untracked_job_memory_never_refuses() -> None:
    assert layout_step(
        [AllocNode("node1", 2)], {}, StepRequest(num_tasks=1, mem_per_node_mb=10**6)
    ).mem_mb == (10**6,)
