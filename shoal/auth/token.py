"""JSON Web Tokens as Slurm's auth/jwt makes them: HS256 under the jwt key, claims iat, exp and sun.

ctld mints them (`scontrol token`), shoal-restd verifies them; both read the same key file, named by
`AuthAltParameters=jwt_key=PATH` (raw bytes, as Slurm's docs make it with `dd ... bs=32 count=1`).
A token only says who the bearer is: the daemons still check every request with a shoal credential.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from types import ModuleType

from shoal.auth.errors import AuthError

ALGORITHM = "HS256"
DEFAULT_LIFESPAN = 1800  # seconds, Slurm's default for `scontrol token`
JWT_TYPE = "auth/jwt"
MIN_KEY_BYTES = 16

NOT_CONFIGURED = "JWT authentication is not configured (AuthAltTypes=auth/jwt)"
INVALID_TOKEN = "Invalid token"
EXPIRED_TOKEN = "Token expired"


@dataclass(frozen=True)
class JwtSettings:
    """What slurm.conf says about tokens: AuthAltTypes and AuthAltParameters, parsed."""

    enabled: bool
    key_file: str
    creation_disabled: bool


def jwt_settings(alt_types: tuple[str, ...], alt_parameters: tuple[str, ...]) -> JwtSettings:
    key_file = ""
    disabled = False
    for item in alt_parameters:
        name, _, value = item.partition("=")
        if name.strip().lower() == "jwt_key":
            key_file = value.strip()
        elif name.strip().lower() == "disable_token_creation":
            disabled = True
    return JwtSettings(
        enabled=JWT_TYPE in (t.lower() for t in alt_types), key_file=key_file, creation_disabled=disabled
    )


def generate_jwt_key(path: str, uid: int | None = None) -> bytes:
    """Create a 32-byte key at `path` (0600); an existing key is kept and returned (tokens stay valid)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return load_jwt_key(path)
    except OSError as exc:
        raise AuthError(f"cannot write jwt key {path}: {exc.strerror or exc}") from exc
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
    if uid is not None:
        os.chown(path, uid, -1)
    return key


def load_jwt_key(path: str) -> bytes:
    """The key's bytes; refused when missing, too short, or readable by others (as Slurm refuses it)."""
    if not path:
        raise AuthError(f"{NOT_CONFIGURED}: AuthAltParameters has no jwt_key=")
    try:
        with open(path, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            key = fh.read()
    except OSError as exc:
        raise AuthError(f"cannot read jwt key {path}: {exc.strerror or exc}") from exc
    if mode & (stat.S_IROTH | stat.S_IWOTH):
        raise AuthError(f"jwt key {path} must not be accessible by others (chmod 0600)")
    if len(key) < MIN_KEY_BYTES:
        raise AuthError(f"jwt key {path} is too short ({len(key)} bytes)")
    return key


def _jwt() -> ModuleType:
    """PyJWT, imported when a token is made or read: a daemon without it still starts (no tokens)."""
    try:
        import jwt
    except ImportError as exc:
        raise AuthError(f"{NOT_CONFIGURED}: PyJWT is not installed") from exc
    return jwt


def mint_token(key: bytes, username: str, lifespan: int, now: float) -> str:
    jwt = _jwt()
    issued = int(now)
    claims = {"iat": issued, "exp": issued + lifespan, "sun": username}
    token: str = jwt.encode(claims, key, algorithm=ALGORITHM)
    return token


def verify_token(key: bytes, token: str, now: float) -> str:
    """The user name (`sun`) of a valid token; AuthError saying why one is refused."""
    jwt = _jwt()
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            options={"verify_exp": False, "verify_iat": False, "require": ["exp", "iat", "sun"]},
        )
    except jwt.PyJWTError as exc:
        raise AuthError(INVALID_TOKEN) from exc
    user, exp = claims.get("sun"), claims.get("exp")
    if not isinstance(user, str) or not user or not isinstance(exp, int):
        raise AuthError(INVALID_TOKEN)
    if exp < now:
        raise AuthError(EXPIRED_TOKEN)
    return user
