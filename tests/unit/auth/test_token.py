"""Tokens as Slurm's auth/jwt: HS256 under the jwt key with iat/exp/sun, refused when forged or late."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from shoal.auth.errors import AuthError
from shoal.auth.token import generate_jwt_key, jwt_settings, load_jwt_key, mint_token, verify_token

KEY = b"k" * 32
NOW = 1_700_000_000


def _claims(token: str) -> dict[str, object]:
    body = token.split(".")[1]
    claims: dict[str, object] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return claims


def test_a_token_carries_slurms_claims_and_verifies() -> None:
    token = mint_token(KEY, "alice", 1800, NOW)
    assert token.startswith("eyJ")
    assert _claims(token) == {"iat": NOW, "exp": NOW + 1800, "sun": "alice"}
    assert verify_token(KEY, token, NOW + 10) == "alice"


@pytest.mark.parametrize(
    ("token", "key", "now", "why"),
    [
        (mint_token(KEY, "alice", 60, NOW), KEY, NOW + 61, "Token expired"),
        (mint_token(b"x" * 32, "alice", 60, NOW), KEY, NOW, "Invalid token"),
        ("eyJnot.a.token", KEY, NOW, "Invalid token"),
        ("", KEY, NOW, "Invalid token"),
    ],
    ids=["expired", "another-key", "garbage", "empty"],
)
def test_a_bad_token_is_refused(token: str, key: bytes, now: int, why: str) -> None:
    with pytest.raises(AuthError, match=why):
        verify_token(key, token, now)


def test_settings_read_slurms_keys() -> None:
    s = jwt_settings(("auth/jwt",), ("jwt_key=/etc/slurm/jwt.key", "disable_token_creation"))
    assert (s.enabled, s.key_file, s.creation_disabled) == (True, "/etc/slurm/jwt.key", True)
    assert not jwt_settings((), ()).enabled


def test_the_key_is_created_private_and_refused_when_others_can_read_it(tmp_path: Path) -> None:
    path = tmp_path / "jwt.key"
    key = generate_jwt_key(str(path))
    assert len(key) == 32 and (path.stat().st_mode & 0o777) == 0o600
    assert generate_jwt_key(str(path)) == key  # never replaced: issued tokens stay valid
    os.chmod(path, 0o644)
    with pytest.raises(AuthError, match="must not be accessible by others"):
        load_jwt_key(str(path))
