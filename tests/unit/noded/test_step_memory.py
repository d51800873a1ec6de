"""noded.tasks.step_memory: the MB a step's tasks get as their RSS limit on a node (22.05: `srun
-n1` in a 4000 MB job -> `ulimit -m` 4096000, `srun -n1 --mem=300` -> 307200)."""

from __future__ import annotations

import pytest

from noded.tasks import step_memory
from shoal.v1 import jobs_pb2
from tests.unit.noded.noded_builders import job


@pytest.mark.parametrize(
    ("step_mem", "node", "expected"),
    [(0, "n1", 4000), (300, "n1", 300), (0, "n2", 1000), (0, "n3", 0)],
    ids=["the-jobs", "its-own", "the-jobs-on-that-node", "not-here"],
)
def test_step_memory(step_mem: int, node: str, expected: int) -> None:
    info = job(5).node("n1", cpus=4, mem_mb=4000).node("n2", cpus=1, mem_mb=1000).obj()
    step = jobs_pb2.JobStep(
        job_id=5,
        step_id=0,
        layout=[
            jobs_pb2.StepNode(node="n1", mem_mb=step_mem),
            jobs_pb2.StepNode(node="n2", mem_mb=0),
        ],
    )
    assert step_memory(info, step, node) == expected
