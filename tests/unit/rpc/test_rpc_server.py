"""Every call to a shoal daemon is authenticated; handlers see who called; failures are clean.

A real server on loopback (make_server) runs a tiny Controller servicer through generic handlers.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from shoal.auth import encode, mint
from shoal.rpc import METADATA_KEY
from shoal.rpc.client import Metadata, Stub, call_with_retry, channel, daemon_metadata
from shoal.rpc.server import BindError, bind, current_caller, make_server
from shoal.v1 import controller_pb2

PING = "/shoal.v1.Controller/Ping"
KEY = b"t" * 32


def _ping(request: controller_pb2.PingRequest, context: grpc.ServicerContext) -> controller_pb2.PingResponse:
    caller = current_caller()
    return controller_pb2.PingResponse(hostname=caller.host, role=f"{caller.uid}:{caller.gid}")


def _boom(request: controller_pb2.PingRequest, context: grpc.ServicerContext) -> controller_pb2.PingResponse:
    raise RuntimeError("boom")


def _missing(
    request: controller_pb2.PingRequest, context: grpc.ServicerContext
) -> controller_pb2.PingResponse:
    context.abort(grpc.StatusCode.NOT_FOUND, "Invalid job id specified")
    raise AssertionError("unreachable")


def _pings(
    request: controller_pb2.PingRequest, context: grpc.ServicerContext
) -> Iterator[controller_pb2.PingResponse]:
    for _ in range(2):
        yield controller_pb2.PingResponse(role=str(current_caller().uid))


def _unary(fn: Callable[..., Any]) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        fn,
        request_deserializer=controller_pb2.PingRequest.FromString,
        response_serializer=controller_pb2.PingResponse.SerializeToString,
    )


HANDLERS = {
    "Ping": _unary(_ping),
    "Boom": _unary(_boom),
    "Missing": _unary(_missing),
    "Pings": grpc.unary_stream_rpc_method_handler(
        _pings,
        request_deserializer=controller_pb2.PingRequest.FromString,
        response_serializer=controller_pb2.PingResponse.SerializeToString,
    ),
}


@pytest.fixture
def ctld() -> Iterator[str]:
    """Address of a started server authenticating with KEY."""
    server = make_server([], KEY, max_workers=4)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("shoal.v1.Controller", HANDLERS),))
    port = bind(server, "127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


def _raw_ping(target: str, body: bytes, metadata: Metadata) -> bytes:
    with channel(target) as chan:
        rpc = chan.unary_unary(PING, request_serializer=None, response_deserializer=None)
        reply: bytes = rpc(body, metadata=metadata, timeout=5)
        return reply


def test_stub_call_carries_the_daemon_identity(ctld: str) -> None:
    stub = Stub(ctld, KEY, uid=1000, gid=100)
    try:
        reply = stub.call(PING, controller_pb2.PingRequest(), controller_pb2.PingResponse)
        assert reply.role == "1000:100"
        assert reply.hostname == socket.gethostname()
        # a second call mints a fresh credential, so it is not a replay
        assert stub.call(PING, controller_pb2.PingRequest(), controller_pb2.PingResponse).role == "1000:100"
    finally:
        stub.close()


def _expired() -> Metadata:
    return ((METADATA_KEY, encode(mint(KEY, 0, 0, now=1_000_000))),)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ((), "Authentication credential missing"),
        (lambda: daemon_metadata(b"forged-key-forged-key-forged-key"), "Invalid authentication credential"),
        (lambda: ((METADATA_KEY, b"\xff\xff not a credential"),), "Invalid authentication credential"),
        (_expired, "Authentication credential expired"),
    ],
    ids=["missing", "forged", "garbage", "expired"],
)
def test_unauthenticated_calls_are_refused(
    ctld: str, metadata: Metadata | Callable[[], Metadata], message: str
) -> None:
    md = metadata() if callable(metadata) else metadata
    with pytest.raises(grpc.RpcError) as info:
        _raw_ping(ctld, b"", md)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert info.value.details() == message


def test_replayed_credential_is_refused(ctld: str) -> None:
    md = daemon_metadata(KEY)
    assert controller_pb2.PingResponse.FromString(_raw_ping(ctld, b"", md)).role == "0:0"
    with pytest.raises(grpc.RpcError) as info:
        _raw_ping(ctld, b"", md)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert info.value.details() == "Authentication credential replayed"


def test_garbage_request_bytes_are_invalid_argument(ctld: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        _raw_ping(ctld, b"\xff\xff\xff garbage", daemon_metadata(KEY))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # the server is still serving
    assert controller_pb2.PingResponse.FromString(_raw_ping(ctld, b"", daemon_metadata(KEY))).role == "0:0"


@pytest.mark.parametrize(
    ("method", "code", "message"),
    [
        ("Boom", grpc.StatusCode.INTERNAL, "Unexpected error: boom"),
        ("Missing", grpc.StatusCode.NOT_FOUND, "Invalid job id specified"),
    ],
    ids=["unexpected-exception", "deliberate-abort"],
)
def test_handler_errors_become_statuses(ctld: str, method: str, code: grpc.StatusCode, message: str) -> None:
    stub = Stub(ctld, KEY)
    try:
        with pytest.raises(grpc.RpcError) as info:
            stub.call(
                f"/shoal.v1.Controller/{method}", controller_pb2.PingRequest(), controller_pb2.PingResponse
            )
    finally:
        stub.close()
    assert info.value.code() == code
    assert info.value.details() == message


def test_streaming_handler_sees_the_caller(ctld: str) -> None:
    with channel(ctld) as chan:
        rpc = chan.unary_stream(
            "/shoal.v1.Controller/Pings",
            request_serializer=controller_pb2.PingRequest.SerializeToString,
            response_deserializer=controller_pb2.PingResponse.FromString,
        )
        replies = list(rpc(controller_pb2.PingRequest(), metadata=daemon_metadata(KEY, uid=7), timeout=5))
    assert [r.role for r in replies] == ["7", "7"]


def test_current_caller_outside_a_call_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        current_caller()


def test_binding_a_busy_port_is_a_bind_error() -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        with pytest.raises(BindError) as info:
            make_server([f"127.0.0.1:{port}"], KEY)
        assert str(info.value) == f"cannot bind 127.0.0.1:{port}: address in use"
    finally:
        busy.close()


def test_binding_a_port_held_by_another_shoal_server_is_a_bind_error(ctld: str) -> None:
    with pytest.raises(BindError):
        make_server([ctld], KEY)


def test_call_with_retry_retries_unavailable_with_fresh_credentials() -> None:
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()
    minted: list[int] = []

    def metadata() -> Metadata:
        minted.append(1)
        return daemon_metadata(KEY)

    with channel(f"127.0.0.1:{port}") as chan:
        rpc = chan.unary_unary(
            PING,
            request_serializer=controller_pb2.PingRequest.SerializeToString,
            response_deserializer=controller_pb2.PingResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as info:
            call_with_retry(
                rpc, controller_pb2.PingRequest(), metadata_fn=metadata, timeout=2, attempts=3, backoff=0.01
            )
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert len(minted) == 3


def test_call_with_retry_does_not_retry_other_errors(ctld: str) -> None:
    minted: list[int] = []

    def metadata() -> Metadata:
        minted.append(1)
        return daemon_metadata(KEY)

    with channel(ctld) as chan:
        rpc = chan.unary_unary(
            "/shoal.v1.Controller/Missing",
            request_serializer=controller_pb2.PingRequest.SerializeToString,
            response_deserializer=controller_pb2.PingResponse.FromString,
        )
        with pytest.raises(grpc.RpcError):
            call_with_retry(
                rpc, controller_pb2.PingRequest(), metadata_fn=metadata, timeout=2, attempts=3, backoff=0.01
            )
    assert len(minted) == 1
