"""A real authenticated gRPC server on loopback with a tiny Controller servicer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from shoal.rpc.server import bind, current_caller, make_server
from shoal.v1 import controller_pb2

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
