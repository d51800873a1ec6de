"""HealthCheckProgram: noded runs it at start-up and every HealthCheckInterval, as root, and the program
drains its own node through `scontrol update nodename=$(hostname) ...` from the node.

The shipped etc/healthcheck/gpu_check.py runs on nodes whose GPUs are the fake NVML's; a GPU taken out
of the description while the cluster runs (it "fell off the bus") drains the nodes.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from noded.gpu.fake_nvml import DESCRIPTIONS
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CHECK = """#!/bin/sh
echo "$SLURMD_NODENAME $(hostname) $(id -u)" >> {marks}/ran-$SLURMD_NODENAME
if [ -e {marks}/sick-$(hostname) ]; then
  scontrol update nodename=$(hostname) state=drain reason="disk full"
  exit 1
fi
"""
GPU_CHECK = """#!/bin/sh
PYTHONPATH={repo} exec {python} {repo}/etc/healthcheck/gpu_check.py
"""


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _open(path: Path) -> None:
    for p in (path, *path.parents):
        if str(p) in ("/", "/tmp"):
            break
        p.chmod(p.stat().st_mode | 0o011)


@pytest.fixture(scope="module")
def marks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("health")
    _script(path / "check.sh", CHECK.format(marks=path))
    _open(path)
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, marks: Path) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("hc"),
        nodes=2,
        extra=(f"HealthCheckProgram={marks}/check.sh", "HealthCheckInterval=1", "HealthCheckNodeState=ANY"),
    )
    yield c
    stop_cluster(c)


def _node(cluster: Cluster, name: str) -> str:
    return cluster.ok("scontrol", "show", "node", name)


def test_the_check_ran_at_start_up_as_root_under_the_nodes_name(cluster: Cluster, marks: Path) -> None:
    # `shoal up` returned once the nodes registered: the start-up check had run before that
    for name in ("node1", "node2"):
        first = (marks / f"ran-{name}").read_text().splitlines()[0]
        assert first == f"{name} {name} 0"


def test_a_check_that_finds_trouble_drains_its_own_node(cluster: Cluster, marks: Path) -> None:
    (marks / "sick-node2").touch()
    try:
        wait_until("node2 drained", lambda: "Reason=disk full" in _node(cluster, "node2"), timeout=30)
        assert re.search(r"State=IDLE\+DRAIN ", _node(cluster, "node2"))
        assert "DRAIN" not in _node(cluster, "node1")
        assert "health check" in cluster.log("noded") and "exit code 1" in cluster.log("noded")
    finally:
        (marks / "sick-node2").unlink()
        cluster.ok("scontrol", "update", "nodename=node2", "state=resume")


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    base = tmp_path_factory.mktemp("gpucheck")
    nvml = base / "nvml.json"
    shutil.copy(DESCRIPTIONS / "dgx_h100.json", nvml)
    _script(base / "gpu_check.sh", GPU_CHECK.format(repo=REPO, python=sys.executable))
    _open(base)
    c = start_cluster(
        base / "cluster",
        nodes=2,
        extra=(f"HealthCheckProgram={base}/gpu_check.sh", "HealthCheckInterval=1"),
        up_args=("--gpus-per-node", "8", "--gpu-type", "h100", "--fake-nvml", str(nvml), "--no-cgroups"),
    )
    yield c, nvml
    stop_cluster(c)


def test_the_shipped_gpu_check_drains_a_node_that_lost_a_gpu(gpu_cluster: tuple[Cluster, Path]) -> None:
    cluster, nvml = gpu_cluster
    assert "DRAIN" not in _node(cluster, "node1")  # all eight there: the check passes
    description = json.loads(nvml.read_text())
    description["gpus"] = description["gpus"][:-1]
    description["nvlinks"] = [link for link in description.get("nvlinks") or [] if 7 not in link[:2]]
    nvml.write_text(json.dumps(description))
    wait_until(
        "node1 drained by gpu_check",
        lambda: "Reason=gpu_check: 7 of 8 GPUs found" in _node(cluster, "node1"),
        timeout=30,
    )
    assert "DRAIN" in _node(cluster, "node1")
