"""gRPC channels and calls between daemons, each call carrying a fresh credential."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from shoal.auth.credential import encode, mint
from shoal.rpc import MAX_MESSAGE_BYTES, METADATA_KEY, NOT_PRIMARY

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

_READY = grpc.ChannelConnectivity.READY.value[0]  # as grpc's core reports it

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

    `Stub(target, key).call("/shoal.v1.Node/Ping", req, NodePingResponse)`. A target listing several
    addresses, comma-separated (ctld's SlurmctldHost lines), tries them in order, the last that answered
    first, moving on when the call never left (no connection) or a standby said "not the primary".
    """

    def __init__(self, target: str, key: bytes, *, uid: int = 0, gid: int = 0) -> None:
        self.target = target
        self._key = key
        self._uid = uid
        self._gid = gid
        self._addresses = [a.strip() for a in target.split(",") if a.strip()] or [target]
        self._channels = {a: channel(a) for a in self._addresses}
        self._methods: dict[tuple[str, str, type[Message]], Callable[..., Any]] = {}
        self._ready: dict[str, bool] = {}  # address -> its channel was connected at the last look

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
        result: M = call_with_retry(
            lambda req, metadata, timeout: self._call_any(method, req, response_type, metadata, timeout),
            request,
            metadata_fn=lambda: daemon_metadata(self._key, self._uid, self._gid),
            timeout=timeout,
            attempts=attempts,
            backoff=backoff,
        )
        return result

    def _call_any(
        self, method: str, request: Message, response_type: type[M], metadata: Metadata, timeout: float
    ) -> M:
        last: grpc.RpcError | None = None
        for address in list(self._addresses):
            fn = self._methods.get((address, method, response_type))
            if fn is None:
                fn = self._channels[address].unary_unary(
                    method, request_serializer=_serialize, response_deserializer=response_type.FromString
                )
                self._methods[(address, method, response_type)] = fn
            try:
                result: M = fn(request, metadata=metadata, timeout=timeout)
            except grpc.RpcError as exc:
                if len(self._addresses) == 1 or not may_try_next(exc):
                    raise
                last = exc
                metadata = daemon_metadata(self._key, self._uid, self._gid)  # nonces are single-use
                continue
            if address != self._addresses[0]:  # the primary moved: ask it first next time
                self._addresses.remove(address)
                self._addresses.insert(0, address)
            return result
        assert last is not None
        raise last

    def disconnected(self) -> bool:
        """Whether a connection this stub had made was lost since the last ask (the peer went away or
        restarted: whatever it learnt from this caller may be gone with it). A non-blocking look at each
        channel's state: grpc's public `subscribe` runs a thread that wakes 5 times a second (~3 ms of CPU
        per second), which costs more than the polls this check spares; without the look (another grpc)
        the answer is always False."""
        lost = False
        for address, chan in self._channels.items():
            check = getattr(getattr(chan, "_channel", None), "check_connectivity_state", None)
            if check is None:
                continue
            ready = check(False) == _READY
            if self._ready.get(address) and not ready:
                lost = True
            self._ready[address] = ready
        return lost

    def close(self) -> None:
        for chan in self._channels.values():
            chan.close()


def may_try_next(exc: grpc.RpcError) -> bool:
    """The call did nothing: no connection existed (gRPC never sent it), or a standby ctld refused it."""
    if exc.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    details = exc.details() or ""
    lowered = details.lower()
    return details == NOT_PRIMARY or "failed to connect" in lowered or "connection refused" in lowered


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()
