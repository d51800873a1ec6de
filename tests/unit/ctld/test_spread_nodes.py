"""How many nodes a -N A-B job starts on when they are free (the controller's reading of the request;
placement then takes as many as can hold a task). Measured on the real 22.05, 2026-12-01: see
tests/unit/sched/test_node_range.py and scenarios 211-214."""

from __future__ import annotations

import pytest

from ctld.jobs import gpu_request, spread_nodes
from shoal.v1 import jobs_pb2


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        (jobs_pb2.JobSpec(min_nodes=1, max_nodes=2), 2),
        (jobs_pb2.JobSpec(min_nodes=1, max_nodes=8), 8),
        (jobs_pb2.JobSpec(min_nodes=1, max_nodes=4, num_tasks=3), 3),
        (jobs_pb2.JobSpec(min_nodes=1, max_nodes=2, num_tasks=1), 1),
        (jobs_pb2.JobSpec(min_nodes=1, max_nodes=2, gpus_per_node="1"), 2),
        (jobs_pb2.JobSpec(min_nodes=1, max_nodes=4, gpus="3"), 0),  # --gpus packs onto the fewest
        (jobs_pb2.JobSpec(min_nodes=2, max_nodes=2), 0),  # -N2: no range
        (jobs_pb2.JobSpec(num_tasks=4), 0),  # -n4 without -N packs
    ],
    ids=["N1-2", "N1-8", "N1-4-n3", "N1-2-n1", "N1-2-gpus-per-node", "N1-4-gpus", "N2", "n4"],
)
def test_spread_nodes(spec: jobs_pb2.JobSpec, want: int) -> None:
    assert spread_nodes(spec, gpu_request(spec)) == want
