"""gRPC channels and calls between daemons, each call carrying a fresh credential."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from shoal.auth.credential import encode, mint
from shoal.rpc import MAX_MESSAGE_BYTES, METADATA_KEY

M = TypeVar("M", bound=Message)

Metadata = tuple[tuple[str, bytes], ...]

CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # Notice a dead peer on an idle persistent channel within about a minute.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # Reconnect promptly once a restarted daemon is back.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 5_000),
]

RETRY_CODES: tuple[grpc.StatusCode, ...] = (grpc.StatusCode.UNAVAILABLE,)


def channel(target: str) -> grpc.Channel:
    """An insecure channel to "host:port" (or "unix:/path") with shoal's options."""
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


def daemon_metadata(key: bytes, uid: int = 0, gid: int = 0) -> Metadata:
    """Call metadata with a freshly minted credential (one per call: nonces are single-use)."""
    cred = mint(key, uid, gid, host=socket.gethostname())
    return ((METADATA_KEY, encode(cred)),)


def call_with_retry(
    fn: Callable[..., M],
    request: Message,
    *,
    metadata_fn: Callable[[], Metadata],
    timeout: float,
    attempts: int = 3,
    backoff: float = 0.5,
    retry_codes: Sequence[grpc.StatusCode] = RETRY_CODES,
) -> M:
    """Call `fn(request, metadata=..., timeout=...)`, retrying on UNAVAILABLE with doubling backoff.

    Each attempt gets new metadata from `metadata_fn`, so a retry never replays a credential.
    The last error is re-raised (a grpc.RpcError).
    """
    attempts = max(1, attempts)
    for attempt in range(attempts):
        try:
            return fn(request, metadata=metadata_fn(), timeout=timeout)
        except grpc.RpcError as exc:
            if attempt + 1 >= attempts or exc.code() not in retry_codes:
                raise
            time.sleep(backoff * (2**attempt))
    raise AssertionError("unreachable")


class Stub:
    """A persistent channel to one daemon and a method call by full name, credential attached.

    `Stub(target, key).call("/shoal.v1.Node/Ping", req, NodePingResponse)`.
    """

    def __init__(self, target: str, key: bytes, *, uid: int = 0, gid: int = 0) -> None:
        self.target = target
        self._key = key
        self._uid = uid
        self._gid = gid
        self._channel = channel(target)
        self._methods: dict[tuple[str, type[Message]], Callable[..., Any]] = {}

    def call(
        self,
        method: str,
        request: Message,
        response_type: type[M],
        *,
        timeout: float = 10.0,
        attempts: int = 1,
        backoff: float = 0.5,
    ) -> M:
        """Call `method`; grpc.RpcError on failure (after `attempts` tries on UNAVAILABLE)."""
        fn = self._methods.get((method, response_type))
        if fn is None:
            fn = self._channel.unary_unary(
                method,
                request_serializer=_serialize,
                response_deserializer=response_type.FromString,
            )
            self._methods[(method, response_type)] = fn
        result: M = call_with_retry(
            fn,
            request,
            metadata_fn=lambda: daemon_metadata(self._key, self._uid, self._gid),
            timeout=timeout,
            attempts=attempts,
            backoff=backoff,
        )
        return result

    def close(self) -> None:
        self._channel.close()


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()
