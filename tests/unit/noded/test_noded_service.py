"""The NodeAgent service over real gRPC (noded.main's building blocks), and shoal-noded itself."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from noded import jobs, spool
from noded.main import main, select_nodes, start_servers
from noded.node import HostedNode
from noded.service import NodeAgentService
from shoal.auth.job_credential import sign_job_credential
from shoal.auth.key import generate_key
from shoal.conf import load_slurm_conf
from shoal.rpc.client import Stub
from shoal.v1 import controller_pb2, controller_pb2_grpc, node_pb2
from tests.unit.noded.noded_builders import job

NODE_SVC = "/shoal.v1.NodeAgent/"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_conf(root: Path, port: int, ctld_port: int, extra: str = "") -> Path:
    (root / "shoal.key").parent.mkdir(parents=True, exist_ok=True)
    generate_key(str(root / "shoal.key"))
    conf = root / "slurm.conf"
    conf.write_text(
        f"ClusterName=test\nSlurmctldHost=head(127.0.0.1)\nSlurmctldPort={ctld_port}\n"
        f"AuthKeyFile={root}/shoal.key\nAgentSocket={root}/agent.sock\n"
        f"SlurmdSpoolDir={root}/spool/%n\nSlurmdPidFile={root}/noded.pid\nKillWait=2\n{extra}"
        f"NodeName=n[1-2] NodeAddr=127.0.0.1 Port={port} CPUs=4 RealMemory=2000\n"
        f"PartitionName=p Nodes=n[1-2] Default=YES\n"
    )
    return conf


@pytest.fixture
def agent(open_dirs: tuple[Path, Path]) -> Iterator[tuple[Stub, bytes, HostedNode, Path]]:
    """A NodeAgent server for emulated node n1, and a daemon client (uid 0) for it."""
    spool_root, work = open_dirs
    port = free_port()
    conf = write_conf(spool_root.parent, port, free_port())
    cfg = load_slurm_conf(conf)
    node = select_nodes(cfg, ["n1"], report_config=False)[0]
    node = HostedNode(node.conf, spool_root, node.port, node.emulated)
    key = (spool_root.parent / "shoal.key").read_text().strip()
    key_bytes = bytes.fromhex(key)
    service = NodeAgentService({"n1": node}, key_bytes, frozenset({0}), 2.0, start_time=123)
    servers = start_servers([node], service, key_bytes)
    stub = Stub(f"127.0.0.1:{port}", key_bytes)
    try:
        yield stub, key_bytes, node, work
    finally:
        stub.close()
        for server in servers:
            server.stop(None)


def launch_request(
    key: bytes, work: Path, script: str, job_id: int = 30, cred: dict[str, object] | None = None
) -> node_pb2.LaunchBatchRequest:
    uid, gid = os.geteuid(), os.getegid()
    info = (
        job(job_id).user("root", uid, gid).spec(script=script.encode(), work_dir=str(work)).node("n1").obj()
    )
    fields: dict[str, object] = {
        "job_id": job_id,
        "uid": uid,
        "gid": gid,
        "nodes": "n1",
        "expiry": int(time.time()) + 60,
    }
    fields.update(cred or {})
    credential = sign_job_credential(key, node_pb2.JobCredential(**fields))  # type: ignore[arg-type]
    return node_pb2.LaunchBatchRequest(node="n1", job=info, credential=credential, cluster_name="test")


def call(stub: Stub, method: str, request: object, reply: type) -> object:
    return stub.call(NODE_SVC + method, request, reply)  # type: ignore[arg-type]


def test_launch_with_valid_credential_runs_the_job(agent: tuple[Stub, bytes, HostedNode, Path]) -> None:
    stub, key, node, work = agent
    req = launch_request(key, work, "#!/bin/bash\necho ran $SLURMD_NODENAME\nsleep 0.5\n")
    call(stub, "LaunchBatch", req, node_pb2.LaunchBatchResponse)
    ping = call(stub, "Ping", node_pb2.NodePingRequest(node="n1"), node_pb2.NodePingResponse)
    assert isinstance(ping, node_pb2.NodePingResponse)
    assert list(ping.running_jobs) == [30] and ping.start_time == 123 and ping.free_mem_mb <= 2000
    deadline = time.monotonic() + 20
    while jobs.scan(node.spool)[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [(f.job_id, f.exit_code) for f in jobs.scan(node.spool)[1]] == [(30, 0)]
    assert (work / "slurm-30.out").read_text() == "ran n1\n"


@pytest.mark.parametrize(
    ("tamper", "code", "message"),
    [
        ({"signature": b"x" * 32}, grpc.StatusCode.PERMISSION_DENIED, "Invalid job credential"),
        ({"job_id": 31}, grpc.StatusCode.PERMISSION_DENIED, "Invalid job credential"),
        ({"nodes": "n2"}, grpc.StatusCode.PERMISSION_DENIED, "Invalid job credential"),
        ({"expiry": 1}, grpc.StatusCode.PERMISSION_DENIED, "Job credential expired"),
    ],
    ids=["forged", "other-job", "other-node", "expired"],
)
def test_bad_credential_is_refused(
    agent: tuple[Stub, bytes, HostedNode, Path],
    tamper: dict[str, object],
    code: grpc.StatusCode,
    message: str,
) -> None:
    stub, key, node, work = agent
    req = launch_request(
        key, work, "#!/bin/bash\ntrue\n", cred={k: v for k, v in tamper.items() if k != "signature"}
    )
    if "signature" in tamper:
        req.credential.signature = tamper["signature"]  # type: ignore[assignment]
    with pytest.raises(grpc.RpcError) as err:
        call(stub, "LaunchBatch", req, node_pb2.LaunchBatchResponse)
    assert (err.value.code(), err.value.details()) == (code, message)
    assert not spool.job_dir(node.spool, 30).exists()


def test_unknown_node_and_non_admin_caller_are_refused(agent: tuple[Stub, bytes, HostedNode, Path]) -> None:
    stub, key, _, work = agent
    req = launch_request(key, work, "#!/bin/bash\ntrue\n")
    req.node = "n9"
    with pytest.raises(grpc.RpcError) as err:
        call(stub, "LaunchBatch", req, node_pb2.LaunchBatchResponse)
    assert (err.value.code(), err.value.details()) == (
        grpc.StatusCode.NOT_FOUND,
        "Invalid node name specified: n9",
    )
    user = Stub(stub.target, key, uid=1000, gid=1000)
    try:
        with pytest.raises(grpc.RpcError) as err:
            user.call(
                NODE_SVC + "LaunchBatch",
                launch_request(key, work, "#!/bin/bash\n"),
                node_pb2.LaunchBatchResponse,
            )
    finally:
        user.close()
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_terminate_and_signal(agent: tuple[Stub, bytes, HostedNode, Path]) -> None:
    stub, key, node, work = agent
    call(
        stub,
        "LaunchBatch",
        launch_request(key, work, "#!/bin/bash\necho up\nsleep 60\n"),
        node_pb2.LaunchBatchResponse,
    )
    with pytest.raises(grpc.RpcError) as err:
        call(
            stub,
            "SignalJob",
            node_pb2.NodeSignalJobRequest(node="n1", job_id=99, signal=10),
            node_pb2.NodeSignalJobResponse,
        )
    assert err.value.details() == "Job 99 is not running on node n1"
    call(
        stub,
        "TerminateJob",
        node_pb2.TerminateJobRequest(node="n1", job_id=30, kill_wait=1),
        node_pb2.TerminateJobResponse,
    )
    deadline = time.monotonic() + 20
    while not jobs.scan(node.spool)[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [f.exit_signal for f in jobs.scan(node.spool)[1]] == [signal.SIGTERM]
    call(
        stub,
        "TerminateJob",
        node_pb2.TerminateJobRequest(node="n1", job_id=30),
        node_pb2.TerminateJobResponse,
    )


class RecordingController(controller_pb2_grpc.ControllerServicer):
    """Stands in for ctld (another process) and records what noded tells it."""

    def __init__(self) -> None:
        self.registered: list[str] = []
        self.completed: list[tuple[str, int, int]] = []
        self.event = threading.Event()

    def RegisterNode(self, request, context):  # type: ignore[no-untyped-def]
        self.registered.append(request.name)
        self.event.set()
        return controller_pb2.RegisterNodeResponse(accepted=True)

    def CompleteBatch(self, request, context):  # type: ignore[no-untyped-def]
        self.completed.append((request.node, request.job_id, request.exit_code))
        self.event.set()
        return controller_pb2.CompleteBatchResponse()


def test_noded_registers_reports_completion_and_stops_cleanly(open_dirs: tuple[Path, Path]) -> None:
    spool_root, work = open_dirs
    root = spool_root.parent
    port, ctld_port = free_port(), free_port()
    conf = write_conf(root, port, ctld_port)
    ctld = RecordingController()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    controller_pb2_grpc.add_ControllerServicer_to_server(ctld, server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"127.0.0.1:{ctld_port}")
    server.start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "noded.main", "-f", str(conf), "-N", "n1", "-D"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while "n1" not in ctld.registered and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ctld.registered == ["n1"]
        assert (root / "noded.pid").read_text() == f"{proc.pid}\n"
        key = bytes.fromhex((root / "shoal.key").read_text().strip())
        stub = Stub(f"127.0.0.1:{port}", key)
        req = launch_request(key, work, "#!/bin/bash\nexit 4\n", job_id=40)
        stub.call(NODE_SVC + "LaunchBatch", req, node_pb2.LaunchBatchResponse)
        req = launch_request(key, work, "#!/bin/bash\nsleep 3\n", job_id=41)
        stub.call(NODE_SVC + "LaunchBatch", req, node_pb2.LaunchBatchResponse)
        stub.close()
        while ("n1", 40, 4) not in ctld.completed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ctld.completed == [("n1", 40, 4)]
        # noded removes the run's directory once ctld has answered the report (just after we saw it)
        while spool.job_dir(root / "spool" / "n1", 40).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not spool.job_dir(root / "spool" / "n1", 40).exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert not (root / "noded.pid").exists()
        assert jobs.scan(root / "spool" / "n1")[0] == [41]  # the running job outlives noded
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop(None)


@pytest.mark.parametrize(
    ("args", "conf_extra", "want"),
    [
        (["-N", "n7"], "", "shoal-noded: error: node n7 not found in {conf}\n"),
        (["-N", "n1"], "Bogus Line Here\n", "shoal-noded: error: {conf}:"),
        (["-N", "n1"], "BUSY", "shoal-noded: error: cannot bind 127.0.0.1:{port}: address in use\n"),
    ],
    ids=["unknown-node", "bad-config", "port-in-use"],
)
def test_start_errors(
    open_dirs: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    conf_extra: str,
    want: str,
) -> None:
    root = open_dirs[0].parent
    port = free_port()
    conf = write_conf(root, port, free_port(), "" if conf_extra == "BUSY" else conf_extra)
    busy = socket.socket()
    if conf_extra == "BUSY":
        busy.bind(("127.0.0.1", port))
        busy.listen()
    try:
        assert main([*args, "-f", str(conf), "--no-agent"]) == 1
    finally:
        busy.close()
    err = capsys.readouterr().err
    assert err.startswith(want.format(conf=conf, port=port))
    assert "Traceback" not in err


def test_signal_job_spares_the_batch_shell_unless_asked(agent: tuple[Stub, bytes, HostedNode, Path]) -> None:
    """Without batch_only/full a job signal is for the steps: the shell and what it runs (here no
    step) never see it; batch_only reaches the shell alone, full its whole process group."""
    stub, key, node, work = agent
    script = (
        f"#!/bin/bash\ntrap 'echo shell USR1 >> {work}/got' USR1\n"
        f"bash -c \"trap 'echo child USR1 >> {work}/got; exit 0' USR1; touch {work}/up; "
        f'while true; do sleep 0.1; done" &\nwhile true; do sleep 0.1; done\n'
    )
    call(stub, "LaunchBatch", launch_request(key, work, script), node_pb2.LaunchBatchResponse)
    deadline = time.monotonic() + 20
    while not (work / "up").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    got = work / "got"

    def send(want: int, **how: bool) -> list[str]:
        """Signal, then the lines noted once there are `want` of them."""
        call(
            stub,
            "SignalJob",
            node_pb2.NodeSignalJobRequest(node="n1", job_id=30, signal=10, **how),
            node_pb2.NodeSignalJobResponse,
        )
        deadline = time.monotonic() + 20
        while (
            len(got.read_text().splitlines()) if got.exists() else 0
        ) < want and time.monotonic() < deadline:
            time.sleep(0.05)
        return sorted(got.read_text().splitlines()) if got.exists() else []

    send(0)  # steps only: nothing here, so the next signal is the first the shell sees
    assert send(1, batch_only=True) == ["shell USR1"]
    assert send(3, full=True) == ["child USR1", "shell USR1", "shell USR1"]
    call(
        stub,
        "TerminateJob",
        node_pb2.TerminateJobRequest(node="n1", job_id=30, kill_wait=1),
        node_pb2.TerminateJobResponse,
    )


def test_a_refused_or_failed_launch_answers_its_status(agent: tuple[Stub, bytes, HostedNode, Path]) -> None:
    """A launch this node refuses (an unknown user) is FAILED_PRECONDITION; one it fails at (its spool
    unwritable) is INTERNAL; both with noded's words, which ctld shows as the job's reason."""
    stub, key, node, work = agent
    unknown_uid = 4_242_424
    req = launch_request(key, work, "#!/bin/bash\ntrue\n", cred={"uid": unknown_uid})
    req.job.user_id = unknown_uid
    with pytest.raises(grpc.RpcError) as err:
        call(stub, "LaunchBatch", req, node_pb2.LaunchBatchResponse)
    assert (err.value.code(), err.value.details()) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        f"User id {unknown_uid} not found on node n1",
    )
    spool.job_dir(node.spool, 30).parent.mkdir(parents=True, exist_ok=True)
    spool.job_dir(node.spool, 30).write_text("not a directory")
    with pytest.raises(grpc.RpcError) as err:
        call(
            stub,
            "LaunchBatch",
            launch_request(key, work, "#!/bin/bash\ntrue\n"),
            node_pb2.LaunchBatchResponse,
        )
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert err.value.details().startswith(f"cannot create {spool.job_dir(node.spool, 30)}")
