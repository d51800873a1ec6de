"""Bad input gets Slurm's message and a non-zero exit; forged or expired credentials are refused."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest

from shoal.auth.credential import encode, mint
from shoal.auth.key import load_key
from shoal.conf import load_slurm_conf
from shoal.rpc import METADATA_KEY
from shoal.v1 import controller_pb2, controller_pb2_grpc
from tests.e2e.conftest import Cluster

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("-p", "nosuch", "--wrap", "true"), "Batch job submission failed: Invalid partition name specified"),
        # more than a node has (4), within the cluster's 8: refused (more than 8 pends, PartitionConfig)
        (("-c", "5", "--wrap", "true"), "Requested node configuration is not available"),
        (("--mem", "900G", "--wrap", "true"), "Requested node configuration is not available"),
        (("--gres", "gpu:1", "--wrap", "true"), "Invalid generic resource (gres) specification"),
        (("-t", "bogus", "--wrap", "true"), "Invalid --time specification"),
        (
            ("-d", "afterok:abc", "--wrap", "true"),
            "Job dependency problem",
        ),  # an unknown id is accepted (22.05)
        (("-w", "node99", "--wrap", "true"), "Invalid node name specified"),
        (("--bogus-option",), "unrecognized option"),
        (("/nonexistent/script.sh",), "Unable to open file /nonexistent/script.sh"),
    ],
    ids=["partition", "cpus", "mem", "gres", "time", "dependency", "nodelist", "option", "script"],
)
def test_sbatch_refusals(cluster: Cluster, argv: tuple[str, ...], message: str) -> None:
    before = cluster.ok("squeue", "-h", "-t", "all", "-o", "%i").split()
    out = cluster.run("sbatch", *argv)
    assert out.returncode != 0
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert cluster.ok("squeue", "-h", "-t", "all", "-o", "%i").split() == before


def test_a_request_no_node_can_hold_says_why_first(cluster: Cluster) -> None:
    out = cluster.run("sbatch", "-c", "5", "--wrap", "true")  # the nodes have 4 CPUs
    assert (out.returncode, out.stderr) == (
        1,
        "sbatch: error: CPU count per node can not be satisfied\n"
        "sbatch: error: Batch job submission failed: Requested node "
        "configuration is not available\n",
    )
    out = cluster.run("salloc", "--mem", "900G", "true")
    assert (out.returncode, out.stderr) == (
        1,
        "salloc: error: Memory specification can not be satisfied\n"
        "salloc: error: Job submit/allocate failed: Requested node "
        "configuration is not available\n",
    )


@pytest.mark.parametrize(
    ("prog", "failed"),
    [
        ("sbatch", "Batch job submission failed"),
        ("srun", "Unable to allocate resources"),
        ("salloc", "Job submit/allocate failed"),
    ],
)
def test_an_unknown_partition_is_named_first(cluster: Cluster, prog: str, failed: str) -> None:
    # 22.05 (scenarios 100, 108 and the running one): the first unknown name of the -p list
    known = cluster.ok("sinfo", "-h", "-o", "%R").split()[0]
    tail = ("--wrap", "true") if prog == "sbatch" else ("true",)
    for partitions in ("nosuch", f"{known},nosuch,other"):
        out = cluster.run(prog, "-p", partitions, *tail)
        assert (out.returncode, out.stderr) == (
            1,
            f"{prog}: error: invalid partition specified: nosuch\n"
            f"{prog}: error: {failed}: Invalid partition name specified\n",
        )


@pytest.mark.parametrize("prog", ["srun", "salloc"])
def test_immediate_fails_at_once_when_no_partition_can_take_the_job(cluster: Cluster, prog: str) -> None:
    # 22.05 (scenario 116 and the running one): -I alone does not queue a job its partition cannot take
    out = cluster.run(prog, "-N99", "-I", "true")
    failed = "Job submit/allocate failed" if prog == "salloc" else "Unable to allocate resources"
    last = f"{prog}: error: {failed}: Requested partition configuration not available now\n"
    assert out.returncode == 1 and out.stderr.endswith(last), out.stderr
    assert "queued" not in out.stderr and "not available now\n" + last not in out.stderr
    assert cluster.ok("squeue", "-h", "-o", "%i") == ""


def test_malformed_directive_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=lots\necho hi\n")
    out = cluster.run("sbatch", str(script))
    assert (out.returncode, out.stderr) == (
        255,
        'sbatch: error: "lots" is not a valid node count\n',
    )  # as 22.05
    assert "Traceback" not in out.stderr


def test_partition_limits_pend_with_slurm_reasons(cluster: Cluster) -> None:
    too_many = cluster.submit("-N", "10", "--wrap", "true", "-o", "/dev/null")
    too_long = cluster.submit("-p", "debug", "-t", "2:00:00", "--wrap", "true", "-o", "/dev/null")
    too_wide = cluster.submit("-n", "9", "--wrap", "true", "-o", "/dev/null")  # 2 nodes x 4 CPUs
    time.sleep(1.5)
    assert cluster.job_field(too_many, "%T %r") == "PENDING PartitionNodeLimit"
    assert cluster.job_field(too_long, "%T %r") == "PENDING PartitionTimeLimit"
    assert cluster.job_field(too_wide, "%T %r") == "PENDING PartitionConfig"
    cluster.ok("scancel", str(too_many), str(too_long), str(too_wide))


def test_dead_controller_message(tmp_path: Path) -> None:
    from tests.e2e.conftest import start_cluster, stop_cluster

    # the commands keep trying a controller for MessageTimeout, as Slurm's: a short one keeps this quick
    c = start_cluster(tmp_path / "dead", nodes=1, extra=("MessageTimeout=2",))
    try:
        import os
        import signal

        os.kill(int((c.dir / "run" / "ctld.pid").read_text()), signal.SIGTERM)
        time.sleep(1.5)
        for argv in (("sbatch", "--wrap", "true"), ("squeue",), ("sinfo",), ("scancel", "1")):
            out = c.run(*argv)
            assert out.returncode == 1, argv
            assert "Unable to contact slurm controller (connect failure)" in out.stderr, (argv, out.stderr)
            assert "Traceback" not in out.stderr
    finally:
        stop_cluster(c)


def _stub(cluster: Cluster) -> tuple[controller_pb2_grpc.ControllerStub, bytes]:
    cfg = load_slurm_conf(str(cluster.conf))
    channel = grpc.insecure_channel(f"{cfg.control_addr}:{cfg.slurmctld_port}")
    return controller_pb2_grpc.ControllerStub(channel), load_key(cfg.auth_key_file)


def test_forged_expired_and_missing_credentials_are_refused(cluster: Cluster) -> None:
    stub, key = _stub(cluster)
    good = mint(key, 0, 0, host="test")
    assert stub.Ping(controller_pb2.PingRequest(), metadata=((METADATA_KEY, encode(good)),)).role == "primary"
    forged = mint(b"not-the-cluster-key" * 2, 0, 0, host="test")
    expired = mint(key, 0, 0, host="test", lifetime=1, now=time.time() - 3600)
    for metadata, words in (
        (((METADATA_KEY, encode(forged)),), "Invalid authentication credential"),
        (((METADATA_KEY, encode(expired)),), "expired"),
        ((), "credential"),
    ):
        with pytest.raises(grpc.RpcError) as info:
            stub.SubmitJob(controller_pb2.SubmitJobRequest(), metadata=metadata)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert words in (info.value.details() or "")
    replay = ((METADATA_KEY, encode(good)),)
    with pytest.raises(grpc.RpcError) as info:
        stub.Ping(controller_pb2.PingRequest(), metadata=replay)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_garbage_on_the_wire_is_refused_and_ctld_survives(cluster: Cluster) -> None:
    cfg = load_slurm_conf(str(cluster.conf))
    channel = grpc.insecure_channel(f"{cfg.control_addr}:{cfg.slurmctld_port}")
    key = load_key(cfg.auth_key_file)
    raw = channel.unary_unary("/shoal.v1.Controller/SubmitJob")
    with pytest.raises(grpc.RpcError) as info:
        raw(b"\xff\xfe garbage \x00\x01", metadata=((METADATA_KEY, encode(mint(key, 0, 0))),))
    assert info.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL)
    assert cluster.run("scontrol", "ping").returncode == 0
