"""restd's calls to ctld and dbd, each with a fresh credential for the requesting user (not restd's)."""

from __future__ import annotations

import socket
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from restd.auth import Identity
from restd.errors import from_daemon
from shoal.auth.credential import encode, mint
from shoal.rpc import METADATA_KEY
from shoal.rpc.client import channel, may_try_next

M = TypeVar("M", bound=Message)

CONTROLLER = "/shoal.v1.Controller/"
ACCOUNTING = "/shoal.v1.Accounting/"
NO_DBD = "Unable to contact slurm database (connect failure)"
NO_CTLD = "Unable to contact slurm controller (connect failure)"


class _TryNext(Exception):
    """This ctld did nothing (not reachable, or a standby): ask the next SlurmctldHost."""


class Backend:
    """Persistent channels to ctld and (when accounting is on) dbd; blocking calls, run in a thread."""

    def __init__(self, key: bytes, ctld_target: str, dbd_target: str | None, timeout: float = 10.0) -> None:
        self._key = key
        self._host = socket.gethostname()
        self._timeout = timeout
        # every SlurmctldHost (comma-separated), tried in order; the one that answered goes first
        self._ctlds = [channel(a.strip()) for a in ctld_target.split(",") if a.strip()]
        self._dbd = channel(dbd_target) if dbd_target else None
        self._methods: dict[tuple[grpc.Channel, str, type[Message]], Any] = {}

    def ctld(self, who: Identity, method: str, request: Message, response_type: type[M], source: str) -> M:
        for chan in list(self._ctlds):
            try:
                result = self._call(
                    chan,
                    who,
                    CONTROLLER + method,
                    request,
                    response_type,
                    source,
                    dbd=False,
                    last=chan is self._ctlds[-1],
                )
            except _TryNext:
                continue
            if chan is not self._ctlds[0]:
                self._ctlds.remove(chan)
                self._ctlds.insert(0, chan)
            return result
        raise from_daemon(NO_CTLD, source, unavailable=True, dbd=False)

    def dbd(self, who: Identity, method: str, request: Message, response_type: type[M], source: str) -> M:
        if self._dbd is None:
            raise from_daemon(NO_DBD, source, unavailable=True, dbd=True)
        return self._call(self._dbd, who, ACCOUNTING + method, request, response_type, source, dbd=True)

    def _call(
        self,
        chan: grpc.Channel,
        who: Identity,
        method: str,
        request: Message,
        response_type: type[M],
        source: str,
        *,
        dbd: bool,
        last: bool = True,
    ) -> M:
        fn = self._methods.get((chan, method, response_type))
        if fn is None:
            fn = chan.unary_unary(
                method,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response_type.FromString,
            )
            self._methods[(chan, method, response_type)] = fn
        cred = mint(self._key, who.uid, who.gid, host=self._host)
        try:
            result: M = fn(request, metadata=((METADATA_KEY, encode(cred)),), timeout=self._timeout)
        except grpc.RpcError as exc:
            if not last and may_try_next(exc):
                raise _TryNext from exc
            code = exc.code() if hasattr(exc, "code") else None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise from_daemon(NO_DBD if dbd else NO_CTLD, source, unavailable=True, dbd=dbd) from exc
            details = exc.details() if hasattr(exc, "details") else ""
            raise from_daemon(details or "Unspecified error", source) from exc
        return result

    def close(self) -> None:
        for chan in self._ctlds:
            chan.close()
        if self._dbd is not None:
            self._dbd.close()
