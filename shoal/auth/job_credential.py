"""Job credentials: ctld signs each allocation; noded launches tasks only for a valid one."""

from __future__ import annotations

import hashlib
import hmac

from shoal.auth.errors import AuthError
from shoal.v1 import node_pb2

INVALID_JOB = "Invalid job credential"
EXPIRED_JOB = "Job credential expired"


def _signature(key: bytes, cred: node_pb2.JobCredential) -> bytes:
    unsigned = node_pb2.JobCredential()
    unsigned.CopyFrom(cred)
    unsigned.signature = b""
    return hmac.new(key, unsigned.SerializeToString(deterministic=True), hashlib.sha256).digest()


def sign_job_credential(key: bytes, cred: node_pb2.JobCredential) -> node_pb2.JobCredential:
    """A signed copy of `cred` (the argument is left unchanged)."""
    signed = node_pb2.JobCredential()
    signed.CopyFrom(cred)
    signed.signature = _signature(key, signed)
    return signed


def verify_job_credential(key: bytes, cred: node_pb2.JobCredential, now: float) -> None:
    """Raise AuthError unless `cred` was signed with `key` and has not expired."""
    if not cred.signature or not hmac.compare_digest(_signature(key, cred), cred.signature):
        raise AuthError(INVALID_JOB)
    if cred.expiry < now:
        raise AuthError(EXPIRED_JOB)
