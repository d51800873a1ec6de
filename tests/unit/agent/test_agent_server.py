"""Commands -> agent (unix socket, SO_PEERCRED) -> authenticated gRPC server, with real sockets."""

from __future__ import annotations

import os
import socket
import stat
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from shoal.agent.client import AgentError, call, get_credential
from shoal.agent.protocol import recv_frame, send_frame
from shoal.agent.server import AgentServer, AgentServerError
from shoal.auth import ReplayCache, verify
from shoal.v1 import common_pb2, controller_pb2

KEY = b"a" * 32  # the key of the conftest fixtures
PING = "/shoal.v1.Controller/Ping"
NOBODY = 65534


def ping() -> controller_pb2.PingResponse:
    return call(PING, controller_pb2.PingRequest(), controller_pb2.PingResponse, timeout=5)


def test_server_sees_the_callers_real_identity(agent: AgentServer) -> None:
    reply = ping()
    assert reply.role == f"{os.getuid()}:{os.getgid()}"
    assert reply.hostname == "login-test"


def test_socket_is_open_to_every_local_user(agent: AgentServer) -> None:
    assert stat.S_IMODE(os.stat(agent.socket_path).st_mode) == 0o666


def test_identity_comes_from_the_kernel_not_the_client(agent: AgentServer) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to become nobody")
    script = textwrap.dedent(
        f"""
        import os
        from shoal.agent.client import call
        from shoal.v1 import controller_pb2
        os.setgid({NOBODY})
        os.setuid({NOBODY})
        reply = call({PING!r}, controller_pb2.PingRequest(), controller_pb2.PingResponse, timeout=5)
        print(reply.role)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{NOBODY}:{NOBODY}"


def test_server_errors_reach_the_command(agent: AgentServer) -> None:
    with pytest.raises(AgentError) as info:
        call("/shoal.v1.Controller/Missing", controller_pb2.PingRequest(), controller_pb2.PingResponse)
    assert (info.value.code, info.value.message) == (5, "Invalid job id specified")


def _raw_exchange(path: str, data: bytes) -> bytes | None:
    """Send raw bytes as one frame; the agent's answer, or None when it closed the connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        send_frame(sock, data)
        try:
            return recv_frame(sock)
        except ConnectionError:
            return None


def test_garbage_request_body_is_invalid_argument_and_agent_survives(agent: AgentServer) -> None:
    request = common_pb2.AgentRequest(method=PING, body=b"\xff\xff\xff garbage", timeout=5)
    reply = _raw_exchange(agent.socket_path, request.SerializeToString())
    assert reply is not None
    assert common_pb2.AgentResponse.FromString(reply).code == 3
    assert ping().role == f"{os.getuid()}:{os.getgid()}"


@pytest.mark.parametrize(
    "junk",
    [b"\xff\xff\xff not a request", struct.pack(">I", 0xFFFFFFFF), b"\x00\x00"],
    ids=["not-protobuf", "oversized-length", "truncated-header"],
)
def test_malformed_frames_close_only_that_connection(agent: AgentServer, junk: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(agent.socket_path)
        sock.sendall(junk)
        sock.shutdown(socket.SHUT_WR)
        try:
            while sock.recv(4096):
                pass
        except ConnectionError:
            pass
    assert ping().role == f"{os.getuid()}:{os.getgid()}"


@pytest.mark.parametrize(
    ("method", "target", "message"),
    [
        (PING, "nowhere", "Unknown agent target 'nowhere'"),
        ("Ping", "ctld", "Invalid method name 'Ping'"),
    ],
    ids=["unknown-target", "bad-method"],
)
def test_bad_requests_are_refused(agent: AgentServer, method: str, target: str, message: str) -> None:
    request = common_pb2.AgentRequest(method=method, target=target)
    reply = _raw_exchange(agent.socket_path, request.SerializeToString())
    assert reply is not None
    response = common_pb2.AgentResponse.FromString(reply)
    assert (response.code, response.message) == (3, message)


def test_several_requests_on_one_connection(agent: AgentServer) -> None:
    request = common_pb2.AgentRequest(method=PING, timeout=5).SerializeToString()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(agent.socket_path)
        for _ in range(3):
            send_frame(sock, request)
            assert common_pb2.AgentResponse.FromString(recv_frame(sock)).code == 0


def test_credential_for_the_caller(agent: AgentServer) -> None:
    cred = verify(KEY, get_credential(), now=time.time(), replay=ReplayCache())
    assert (cred.uid, cred.gid, cred.host) == (os.getuid(), os.getgid(), "login-test")


def _dead_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("ctld", "Unable to contact slurm controller (connect failure)"),
        ("dbd", "Unable to contact slurm database (connect failure)"),
    ],
    ids=["ctld", "dbd"],
)
def test_daemon_down_is_a_connect_failure(
    public_dir: str, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    path = os.path.join(public_dir, "agent.sock")
    server = AgentServer(path, KEY, {"ctld": _dead_address(), "dbd": _dead_address()}, host="h")
    server.start()
    monkeypatch.setenv("SHOAL_AGENT_SOCKET", path)
    try:
        with pytest.raises(AgentError) as info:
            call(PING, controller_pb2.PingRequest(), controller_pb2.PingResponse, timeout=5, target=target)
    finally:
        server.stop()
    assert (info.value.code, info.value.message) == (14, message)


def test_a_live_agent_is_not_replaced(agent: AgentServer) -> None:
    second = AgentServer(agent.socket_path, KEY, {"ctld": "127.0.0.1:1"}, host="h")
    with pytest.raises(AgentServerError, match="already listening"):
        second.start()
    assert ping().role == f"{os.getuid()}:{os.getgid()}"


def test_a_stale_socket_is_replaced_and_stop_removes_it(
    ctld: str, public_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = os.path.join(public_dir, "agent.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()  # the file stays, nobody listens: a dead agent's leftover
    server = AgentServer(path, KEY, {"ctld": ctld}, host="h")
    server.start()
    monkeypatch.setenv("SHOAL_AGENT_SOCKET", path)
    try:
        assert ping().hostname == "h"
    finally:
        server.stop()
    assert not os.path.exists(path)


def test_a_regular_file_at_the_socket_path_is_left_alone(public_dir: str) -> None:
    path = os.path.join(public_dir, "agent.sock")
    with open(path, "w") as fh:
        fh.write("precious")
    with pytest.raises(AgentServerError, match="not a socket"):
        AgentServer(path, KEY, {"ctld": "127.0.0.1:1"}, host="h").start()
    with open(path) as fh:
        assert fh.read() == "precious"


@pytest.fixture
def standby() -> Iterator[str]:
    """A ctld standing by: every call answers UNAVAILABLE "not the primary", as ctld/service.py does."""
    import grpc

    from shoal.rpc import NOT_PRIMARY
    from shoal.rpc.server import bind, make_server

    def refuse(
        request: controller_pb2.PingRequest, context: grpc.ServicerContext
    ) -> controller_pb2.PingResponse:
        context.abort(grpc.StatusCode.UNAVAILABLE, NOT_PRIMARY)
        raise AssertionError("unreachable")

    server = make_server([], KEY, max_workers=2)
    handler = grpc.unary_unary_rpc_method_handler(
        refuse,
        request_deserializer=controller_pb2.PingRequest.FromString,
        response_serializer=controller_pb2.PingResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("shoal.v1.Controller", {"Ping": handler}),)
    )
    port = bind(server, "127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


def test_the_agent_finds_the_primary_among_the_slurmctldhosts(
    public_dir: str, monkeypatch: pytest.MonkeyPatch, ctld: str, standby: str
) -> None:
    """A dead head and a standby first: the request goes on to the live primary; ctld@N asks one alone."""
    path = os.path.join(public_dir, "agent.sock")
    server = AgentServer(
        path, KEY, {"ctld": f"{_dead_address()},{standby},{ctld}", "ctld@1": standby}, host="h"
    )
    server.start()
    monkeypatch.setenv("SHOAL_AGENT_SOCKET", path)
    try:
        assert ping().role == f"{os.getuid()}:{os.getgid()}"
        with pytest.raises(AgentError) as info:
            call(PING, controller_pb2.PingRequest(), controller_pb2.PingResponse, timeout=1, target="ctld@1")
    finally:
        server.stop()
    assert (info.value.code, info.value.message) == (
        14,
        "Unable to contact slurm controller (connect failure)",
    )
