"""A gRPC server whose every call is authenticated, and the caller's identity for servicers.

`AuthInterceptor` wraps each method handler so that, inside the worker thread that runs it:
the credential in metadata `shoal-cred-bin` is verified (refused -> UNAUTHENTICATED), the request
bytes are parsed (garbage -> INVALID_ARGUMENT), `current_caller()` answers who is calling, and
an unexpected exception becomes INTERNAL "Unexpected error: ..." (traceback logged here only).
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from shoal.auth.credential import ReplayCache, verify
from shoal.auth.errors import AuthError
from shoal.rpc import MAX_MESSAGE_BYTES, METADATA_KEY

log = logging.getLogger("shoal.rpc")

MISSING = "Authentication credential missing"

SERVER_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # A busy port must fail to bind instead of being silently shared.
    ("grpc.so_reuseport", 0),
    # Accept the keepalive pings of shoal's own clients (see shoal.rpc.client).
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 0),
]


class BindError(Exception):
    """A listening address could not be bound; the message names it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Caller:
    """Who made the current RPC, as vouched for by a verified credential."""

    uid: int
    gid: int
    host: str


_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("shoal_rpc_caller", default=None)


def current_caller() -> Caller:
    """The verified caller of the RPC being handled in this thread."""
    caller = _caller.get()
    if caller is None:
        raise RuntimeError("current_caller() used outside an authenticated RPC")
    return caller


class _Aborted(Exception):
    """Raised after context.abort() to leave the handler wrapper."""


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> None:
    context.abort(code, message)
    raise _Aborted(message)  # context.abort always raises; this keeps type checkers honest


def _parse(deserializer: Callable[[bytes], Any] | None, data: Any, context: grpc.ServicerContext) -> Any:
    if deserializer is None:
        return data
    try:
        return deserializer(data)
    except (DecodeError, ValueError, TypeError) as exc:
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"Invalid request: {exc}")
        raise  # unreachable


class AuthInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Verify every call's credential and expose it through `current_caller()`."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._replay = ReplayCache()
        # method -> its wrapped handler, built on the method's first call: the servicers are registered
        # before the server starts, so one method always resolves to the same handler (unknown methods are
        # not kept: a caller cannot grow this)
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is None:
            handler = continuation(handler_call_details)
            if handler is None:
                return None
            wrapped = self._wrapped[method] = self._wrap(method, handler)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        deserializer = handler.request_deserializer
        serializer = handler.response_serializer
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap_unary(method, handler.unary_unary, deserializer, request_stream=False),
                response_serializer=serializer,
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._wrap_unary(method, handler.stream_unary, deserializer, request_stream=True),
                response_serializer=serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(method, handler.unary_stream, deserializer, request_stream=False),
                response_serializer=serializer,
            )
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._wrap_stream(method, handler.stream_stream, deserializer, request_stream=True),
                response_serializer=serializer,
            )
        return handler

    def _authenticate(self, context: grpc.ServicerContext) -> Caller:
        blob: bytes | None = None
        for key, value in context.invocation_metadata() or ():
            if key == METADATA_KEY and isinstance(value, bytes):
                blob = value
                break
        if blob is None:
            _abort(context, grpc.StatusCode.UNAUTHENTICATED, MISSING)
            raise AssertionError("unreachable")
        try:
            cred = verify(self._key, blob, now=time.time(), replay=self._replay)
        except AuthError as exc:
            _abort(context, grpc.StatusCode.UNAUTHENTICATED, exc.message)
            raise AssertionError("unreachable") from exc
        return Caller(uid=cred.uid, gid=cred.gid, host=cred.host)

    def _requests(
        self,
        raw: Any,
        deserializer: Callable[[bytes], Any] | None,
        context: grpc.ServicerContext,
        stream: bool,
    ) -> Any:
        if not stream:
            return _parse(deserializer, raw, context)
        return (_parse(deserializer, item, context) for item in raw)

    def _wrap_unary(
        self,
        method: str,
        behavior: Callable[[Any, grpc.ServicerContext], Any],
        deserializer: Callable[[bytes], Any] | None,
        request_stream: bool,
    ) -> Callable[[Any, grpc.ServicerContext], Any]:
        def handle(raw: Any, context: grpc.ServicerContext) -> Any:
            caller = self._authenticate(context)
            request = self._requests(raw, deserializer, context, request_stream)
            token = _caller.set(caller)
            try:
                return behavior(request, context)
            except Exception as exc:
                _internal_error(method, exc, context)
                raise
            finally:
                _caller.reset(token)

        return handle

    def _wrap_stream(
        self,
        method: str,
        behavior: Callable[[Any, grpc.ServicerContext], Iterator[Any]],
        deserializer: Callable[[bytes], Any] | None,
        request_stream: bool,
    ) -> Callable[[Any, grpc.ServicerContext], Iterator[Any]]:
        def handle(raw: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            caller = self._authenticate(context)
            request = self._requests(raw, deserializer, context, request_stream)
            token = _caller.set(caller)
            try:
                yield from behavior(request, context)
            except Exception as exc:
                _internal_error(method, exc, context)
                raise
            finally:
                try:
                    _caller.reset(token)
                except ValueError:  # closed from another context: nothing left to restore
                    pass

        return handle


def _internal_error(method: str, exc: Exception, context: grpc.ServicerContext) -> None:
    """Turn an exception a handler did not mean to raise into INTERNAL; keep deliberate aborts."""
    if isinstance(exc, _Aborted) or context.code() not in (None, grpc.StatusCode.OK):
        return
    log.exception("unexpected error in %s", method)
    context.abort(grpc.StatusCode.INTERNAL, f"Unexpected error: {exc}")


def bind(server: grpc.Server, address: str) -> int:
    """Listen on `address` ("host:port", "[::]:port" or "unix:/path"); return the bound port."""
    try:
        port = int(server.add_insecure_port(address))
    except RuntimeError as exc:
        raise BindError(f"cannot bind {address}: address in use") from exc
    if port == 0:
        raise BindError(f"cannot bind {address}: address in use")
    return port


def make_server(addresses: list[str], key: bytes, max_workers: int = 16) -> grpc.Server:
    """An unstarted gRPC server that authenticates every call, bound to each address.

    Add servicers, then `start()` it. Raises BindError when an address cannot be bound.
    """
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="shoal-rpc"),
        interceptors=[AuthInterceptor(key)],
        options=SERVER_OPTIONS,
    )
    try:
        for address in addresses:
            bind(server, address)
    except BindError:
        server.stop(None)
        raise
    return server
