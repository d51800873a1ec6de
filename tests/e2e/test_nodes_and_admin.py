"""Node health as the controller sees it, and the admin's controls over nodes and jobs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal.auth.credential import encode, mint
from shoal.auth.key import load_key
from shoal.conf import load_slurm_conf
from shoal.rpc import METADATA_KEY
from shoal.v1 import cluster_pb2, controller_pb2, controller_pb2_grpc
from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e


def _node_field(cluster: Cluster, node: str, key: str) -> str:
    show = cluster.ok("scontrol", "show", "node", node)
    for word in show.replace("\n", " ").split():
        if word.startswith(f"{key}="):
            return word.split("=", 1)[1]
    raise AssertionError(f"{key} not in {show}")


def test_node_reporting_less_than_configured_is_drained_with_reason(cluster: Cluster) -> None:
    cfg = load_slurm_conf(str(cluster.conf))
    stub = controller_pb2_grpc.ControllerStub(
        __import__("grpc").insecure_channel(f"{cfg.control_addr}:{cfg.slurmctld_port}")
    )
    key = load_key(cfg.auth_key_file)
    hw = cluster_pb2.NodeHardware(
        cpus=2, sockets=1, cores_per_socket=2, threads_per_core=1, real_memory_mb=1000
    )
    stub.RegisterNode(
        controller_pb2.RegisterNodeRequest(name="node2", hardware=hw, version="test"),
        metadata=((METADATA_KEY, encode(mint(key, 0, 0))),),
    )
    assert "DRAIN" in _node_field(cluster, "node2", "State")
    show = cluster.ok("scontrol", "show", "node", "node2")
    assert "Reason=Low CPUs (reported:2 < configured:4)" in show
    assert "Low RealMemory (reported:1000 < 100.00% of configured:8000)" in show
    reasons = cluster.ok("sinfo", "-R", "-h")
    assert "node2" in reasons and "Low CPUs" in reasons
    # a drained node takes no new work
    job = cluster.submit("-w", "node2", "--wrap", "true", "-o", "/dev/null")
    time.sleep(1.5)
    assert cluster.state(job) == "PENDING"
    cluster.ok("scontrol", "update", "NodeName=node2", "State=RESUME")
    assert cluster.wait_state(job, {"COMPLETED"}) == "COMPLETED"


def test_admin_drains_and_resumes_nodes_users_may_not(cluster: Cluster) -> None:
    out = cluster.run("scontrol", "update", "NodeName=node1", "State=DRAIN")
    assert out.returncode == 1 and "reason" in out.stderr.lower()
    denied = cluster.run("scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason=x", user=NOBODY)
    assert (denied.returncode, denied.stderr) == (1, "slurm_update error: Invalid user id\n")  # 22.05's
    cluster.ok("scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason=disk swap")
    assert _node_field(cluster, "node1", "State") == "IDLE+DRAIN"
    assert cluster.ok("sinfo", "-h", "-N", "-n", "node1", "-o", "%t").split()[0] == "drain"
    cluster.ok("scontrol", "update", "NodeName=node1", "State=RESUME")
    assert _node_field(cluster, "node1", "State") == "IDLE"


def test_reboot_without_a_reboot_program_is_refused_as_2205(cluster: Cluster) -> None:
    out = cluster.run("scontrol", "reboot", "node1")
    assert (out.returncode, out.stderr) == (
        1,
        "scontrol: error: RebootProgram isn't defined\nscontrol_reboot_nodes error: Unspecified error\n",
    )
    assert _node_field(cluster, "node1", "State") == "IDLE"


def test_scancel_by_name_and_user_filters(cluster: Cluster) -> None:
    a = cluster.submit("-H", "-J", "keepme", "--wrap", "true", "-o", "/dev/null")
    b = cluster.submit("-H", "-J", "dropme", "--wrap", "true", "-o", "/dev/null")
    c = cluster.submit("-H", "-J", "dropme", "--wrap", "true", "-o", "/dev/null")
    cluster.ok("scancel", "-n", "dropme")
    assert [cluster.state(j) for j in (a, b, c)] == ["PENDING", "CANCELLED", "CANCELLED"]
    cluster.ok("scancel", "-u", "root", "-t", "PENDING")
    assert cluster.state(a) == "CANCELLED"


def test_array_tasks_cancel_and_display(cluster: Cluster) -> None:
    first = cluster.submit("-H", "--array=1-4", "--wrap", "true", "-o", "/dev/null")
    assert cluster.ok("squeue", "-h", "-j", str(first), "-o", "%i").split() == [f"{first}_[1-4]"]
    cluster.ok("scancel", f"{first}_2")
    assert cluster.ok("squeue", "-h", "-t", "pd", "-j", str(first), "-o", "%i").split() == [
        f"{first}_[1,3-4]"
    ]
    assert cluster.state(f"{first}_2") == "CANCELLED"
    show = cluster.ok("scontrol", "show", "job", str(first))
    assert f"ArrayJobId={first} ArrayTaskId=1,3-4" in show
    cluster.ok("scancel", str(first))
    assert cluster.ok("squeue", "-h", "-t", "pd", "-j", str(first), "-o", "%i").split() == []


def test_test_only_says_when_and_where(cluster: Cluster) -> None:
    before = cluster.ok("squeue", "-h", "-t", "all", "-o", "%i").split()
    out = cluster.run("sbatch", "--test-only", "-N2", "--wrap", "true")
    assert out.returncode == 0
    assert (
        " to start at " in out.stderr
        and "using 2 processors on nodes node[1-2] in partition batch" in out.stderr
    )
    assert cluster.ok("squeue", "-h", "-t", "all", "-o", "%i").split() == before


def test_unresponsive_node_goes_down_and_returns(tmp_path: Path) -> None:
    c = start_cluster(tmp_path / "c", nodes=1, extra=("SlurmdTimeout=3",))
    try:
        job = c.submit("--no-requeue", "--wrap", "sleep 60", "-o", "/dev/null")  # requeued it would pend
        c.wait_state(job, {"RUNNING"})
        noded = int((c.dir / "run" / "noded.pid").read_text().split()[0])
        os.kill(noded, signal.SIGSTOP)  # alive but silent
        try:
            wait_until("node1 DOWN", lambda: _node_field(c, "node1", "State").startswith("DOWN"))
            assert "Reason=Not responding" in c.ok("scontrol", "show", "node", "node1")
            assert c.wait_state(job, {"NODE_FAIL"}) == "NODE_FAIL"
        finally:
            os.kill(noded, signal.SIGCONT)
        os.kill(noded, signal.SIGTERM)
        time.sleep(1)
        log = open(c.dir / "log" / "noded.restart.out", "ab")
        subprocess.Popen(
            [sys.executable, "-m", "noded.main", "-f", str(c.conf), "--no-agent", "-N", "node1"],
            env=c.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_until("node1 IDLE", lambda: _node_field(c, "node1", "State") == "IDLE")
    finally:
        stop_cluster(c)
