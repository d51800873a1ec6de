"""GresUsed as GetNodes reports it (sinfo -O GresUsed, scontrol show node -d), as 22.05 prints it."""

from __future__ import annotations

from pathlib import Path

from shoal.v1 import controller_pb2
from tests.unit.ctld.harness import ROOT, Harness, cluster, job


def test_gres_used_names_the_gpu_indices_and_na_when_none_is_used(tmp_path: Path) -> None:
    """22.05 (scenario 249): gpu:h100:3(IDX:0-2) on the node a job holds three GPUs of, and
    gpu:h100:0(IDX:N/A) on an idle one (shoal said gpu:h100:0)."""
    h = Harness.of(cluster().nodes(2, cpus=4, gpus=8), tmp_path)
    h.submit(job().gpus("3"))
    h.schedule()
    h.effects()
    nodes = h.ctl.get_nodes(controller_pb2.GetNodesRequest(), ROOT).nodes
    assert {n.name: n.gres_used for n in nodes} == {"n1": "gpu:h100:3(IDX:0-2)", "n2": "gpu:h100:0(IDX:N/A)"}
