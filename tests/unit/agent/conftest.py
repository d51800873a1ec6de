"""A real authenticated gRPC "ctld" on loopback and a real agent in front of it on a unix socket."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import grpc
import pytest

from shoal.agent.server import AgentServer
from shoal.rpc.server import bind, current_caller, make_server
from shoal.v1 import controller_pb2

KEY = b"a" * 32
AGENT_HOST = "login-test"
PINGED_BY: list[tuple[int, int, str]] = []  # (uid, gid, host) of each Ping's caller, as the server saw it


def _ping(request: controller_pb2.PingRequest, context: grpc.ServicerContext) -> controller_pb2.PingResponse:
    """Answers with the caller the server saw: role "uid:gid", hostname the credential's host."""
    caller = current_caller()
    PINGED_BY.append((caller.uid, caller.gid, caller.host))
    return controller_pb2.PingResponse(hostname=caller.host, role=f"{caller.uid}:{caller.gid}")


def _missing(
    request: controller_pb2.PingRequest, context: grpc.ServicerContext
) -> controller_pb2.PingResponse:
    context.abort(grpc.StatusCode.NOT_FOUND, "Invalid job id specified")
    raise AssertionError("unreachable")


def _handler(fn: object) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        fn,
        request_deserializer=controller_pb2.PingRequest.FromString,
        response_serializer=controller_pb2.PingResponse.SerializeToString,
    )


@pytest.fixture
def ctld() -> Iterator[str]:
    """Address of a started server that authenticates with KEY."""
    server = make_server([], KEY, max_workers=4)
    handlers = {"Ping": _handler(_ping), "Missing": _handler(_missing)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("shoal.v1.Controller", handlers),))
    port = bind(server, "127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


@pytest.fixture
def public_dir() -> Iterator[str]:
    """A directory every user may enter (pytest's tmp_path is private to root)."""
    path = tempfile.mkdtemp(prefix="shoal-agent-test-")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def agent(ctld: str, public_dir: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[AgentServer]:
    """A started agent forwarding to `ctld`; SHOAL_AGENT_SOCKET points the client at it."""
    path = os.path.join(public_dir, "run", "agent.sock")
    server = AgentServer(path, KEY, {"ctld": ctld}, host=AGENT_HOST)
    server.start()
    monkeypatch.setenv("SHOAL_AGENT_SOCKET", path)
    yield server
    server.stop()
