"""Short-lived signed credentials: who is calling (uid, gid, host), for how long, once.

A credential is a `shoal.v1.Credential` whose `signature` is HMAC-SHA256 under the cluster key
over the message's deterministic serialization with `signature` empty. The random nonce lets a
verifier refuse a credential it has already seen (ReplayCache).
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import secrets
import threading
import time

from google.protobuf.message import DecodeError

from shoal.auth.errors import AuthError
from shoal.auth.job_credential import sign_job_credential, verify_job_credential
from shoal.v1 import common_pb2

NONCE_BYTES = 16
DEFAULT_LIFETIME = 300
CLOCK_SKEW = 60

__all__ = [
    "AuthError",
    "ReplayCache",
    "encode",
    "mint",
    "sign_job_credential",
    "verify",
    "verify_job_credential",
]

INVALID = "Invalid authentication credential"
EXPIRED = "Authentication credential expired"
REPLAYED = "Authentication credential replayed"


def _signature(key: bytes, cred: common_pb2.Credential) -> bytes:
    unsigned = common_pb2.Credential()
    unsigned.CopyFrom(cred)
    unsigned.signature = b""
    return hmac.new(key, unsigned.SerializeToString(deterministic=True), hashlib.sha256).digest()


def mint(
    key: bytes,
    uid: int,
    gid: int,
    host: str | None = None,
    lifetime: int = DEFAULT_LIFETIME,
    now: float | None = None,
) -> common_pb2.Credential:
    """A fresh signed credential for uid/gid, valid `lifetime` seconds from `now`."""
    issued = int(time.time() if now is None else now)
    cred = common_pb2.Credential(
        uid=uid,
        gid=gid,
        host=host or "",
        issued=issued,
        expiry=issued + lifetime,
        nonce=secrets.token_bytes(NONCE_BYTES),
    )
    cred.signature = _signature(key, cred)
    return cred


def encode(cred: common_pb2.Credential) -> bytes:
    """The bytes carried in gRPC metadata (`shoal-cred-bin`) or handed to srun."""
    return cred.SerializeToString(deterministic=True)


class ReplayCache:
    """Nonces seen recently, each kept until its credential expires (then pruned).

    Memory is bounded by the number of credentials that can be valid at once; expired entries
    are dropped on every check. Thread-safe: a server verifies from many worker threads.
    """

    def __init__(self) -> None:
        self._seen: dict[bytes, float] = {}
        self._by_expiry: list[tuple[float, bytes]] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def check_and_add(self, nonce: bytes, expiry: float, now: float) -> bool:
        """Record `nonce`; False if it was already recorded (a replay)."""
        with self._lock:
            self._prune(now)
            if nonce in self._seen:
                return False
            self._seen[nonce] = expiry
            heapq.heappush(self._by_expiry, (expiry, nonce))
            return True

    def _prune(self, now: float) -> None:
        while self._by_expiry and self._by_expiry[0][0] < now:
            _, nonce = heapq.heappop(self._by_expiry)
            self._seen.pop(nonce, None)


def verify(key: bytes, blob: bytes, *, now: float, replay: ReplayCache | None) -> common_pb2.Credential:
    """Parse and check a credential; raise AuthError saying why it is refused."""
    try:
        cred = common_pb2.Credential.FromString(blob)
    except DecodeError as exc:
        raise AuthError(INVALID) from exc
    if len(cred.nonce) != NONCE_BYTES or not cred.signature:
        raise AuthError(INVALID)
    if not hmac.compare_digest(_signature(key, cred), cred.signature):
        raise AuthError(INVALID)
    if cred.issued > now + CLOCK_SKEW:
        raise AuthError(INVALID)
    if cred.expiry < now:
        raise AuthError(EXPIRED)
    if replay is not None and not replay.check_and_add(cred.nonce, cred.expiry, now):
        raise AuthError(REPLAYED)
    return cred
