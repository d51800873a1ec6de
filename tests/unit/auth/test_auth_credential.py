"""Caller credentials and job credentials: accepted when genuine, refused with a clear reason."""

from __future__ import annotations

import pytest

from shoal.auth import (
    AuthError,
    ReplayCache,
    encode,
    mint,
    sign_job_credential,
    verify,
    verify_job_credential,
)
from shoal.v1 import common_pb2, node_pb2

KEY = b"k" * 32
NOW = 1_700_000_000.0


def test_round_trip_keeps_identity() -> None:
    blob = encode(mint(KEY, 1000, 100, host="login1", now=NOW))
    cred = verify(KEY, blob, now=NOW + 1, replay=ReplayCache())
    assert (cred.uid, cred.gid, cred.host) == (1000, 100, "login1")
    assert cred.expiry - cred.issued == 300
    assert len(cred.nonce) == 16


def test_each_credential_has_its_own_nonce() -> None:
    assert mint(KEY, 1, 1, now=NOW).nonce != mint(KEY, 1, 1, now=NOW).nonce


def _tampered_uid() -> bytes:
    cred = mint(KEY, 1000, 100, now=NOW)
    cred.uid = 0
    return encode(cred)


def _other_key() -> bytes:
    return encode(mint(b"x" * 32, 1000, 100, now=NOW))


def _unsigned() -> bytes:
    cred = mint(KEY, 1000, 100, now=NOW)
    cred.signature = b""
    return encode(cred)


def _no_nonce() -> bytes:
    cred = common_pb2.Credential(uid=0, gid=0, issued=int(NOW), expiry=int(NOW) + 300)
    return encode(cred)


@pytest.mark.parametrize(
    ("blob", "now", "message"),
    [
        (_tampered_uid(), NOW, "Invalid authentication credential"),
        (_other_key(), NOW, "Invalid authentication credential"),
        (_unsigned(), NOW, "Invalid authentication credential"),
        (_no_nonce(), NOW, "Invalid authentication credential"),
        (b"\xff\xfe garbage", NOW, "Invalid authentication credential"),
        (b"", NOW, "Invalid authentication credential"),
        (encode(mint(KEY, 1, 1, now=NOW)), NOW + 301, "Authentication credential expired"),
        (encode(mint(KEY, 1, 1, now=NOW + 61)), NOW, "Invalid authentication credential"),
    ],
    ids=["tampered", "wrong-key", "unsigned", "no-nonce", "garbage", "empty", "expired", "from-future"],
)
def test_refused(blob: bytes, now: float, message: str) -> None:
    with pytest.raises(AuthError) as info:
        verify(KEY, blob, now=now, replay=ReplayCache())
    assert str(info.value) == message


def test_small_clock_skew_is_tolerated() -> None:
    blob = encode(mint(KEY, 1, 1, now=NOW + 59))
    assert verify(KEY, blob, now=NOW, replay=None).uid == 1


def test_replay_is_refused_only_with_a_cache() -> None:
    blob = encode(mint(KEY, 1000, 100, now=NOW))
    cache = ReplayCache()
    verify(KEY, blob, now=NOW, replay=cache)
    with pytest.raises(AuthError, match="^Authentication credential replayed$"):
        verify(KEY, blob, now=NOW + 1, replay=cache)
    verify(KEY, blob, now=NOW + 1, replay=None)


def test_replay_cache_forgets_expired_nonces() -> None:
    cache = ReplayCache()
    for i in range(100):
        verify(KEY, encode(mint(KEY, i, i, lifetime=10, now=NOW)), now=NOW, replay=cache)
    assert len(cache) == 100
    verify(KEY, encode(mint(KEY, 1, 1, now=NOW + 20)), now=NOW + 20, replay=cache)
    assert len(cache) == 1


def _job(expiry: float = NOW + 60) -> node_pb2.JobCredential:
    return node_pb2.JobCredential(job_id=42, uid=1000, gid=100, nodes="gpu[1-2]", expiry=int(expiry))


def test_job_credential_round_trip_leaves_input_unsigned() -> None:
    unsigned = _job()
    signed = sign_job_credential(KEY, unsigned)
    assert unsigned.signature == b""
    verify_job_credential(KEY, signed, NOW)
    verify_job_credential(KEY, node_pb2.JobCredential.FromString(signed.SerializeToString()), NOW)


def _job_changed(field: str, value: object) -> node_pb2.JobCredential:
    signed = sign_job_credential(KEY, _job())
    setattr(signed, field, value)
    return signed


@pytest.mark.parametrize(
    ("cred", "key", "now", "message"),
    [
        (_job_changed("nodes", "gpu[1-8]"), KEY, NOW, "Invalid job credential"),
        (_job_changed("uid", 0), KEY, NOW, "Invalid job credential"),
        (_job(), KEY, NOW, "Invalid job credential"),
        (sign_job_credential(b"x" * 32, _job()), KEY, NOW, "Invalid job credential"),
        (sign_job_credential(KEY, _job()), KEY, NOW + 61, "Job credential expired"),
    ],
    ids=["other-nodes", "other-uid", "unsigned", "wrong-key", "expired"],
)
def test_job_credential_refused(cred: node_pb2.JobCredential, key: bytes, now: float, message: str) -> None:
    with pytest.raises(AuthError) as info:
        verify_job_credential(key, cred, now)
    assert str(info.value) == message
