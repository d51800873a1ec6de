"""The cluster key: 32 random bytes, stored hex in a 0600 file that only SlurmUser can read.

Every credential is an HMAC under this key, so it is created once (never overwritten: replacing
it would invalidate every running daemon's credentials) and read with a clear error.
"""

from __future__ import annotations

import os
import secrets

from shoal.auth.errors import AuthError

KEY_BYTES = 32
MIN_KEY_BYTES = 16


def generate_key(path: str, uid: int | None = None) -> bytes:
    """Create a new key at `path` (mode 0600, owned by `uid` if given) and return it.

    An existing key is never overwritten: it is loaded and returned instead, so that running
    `shoal up` twice keeps the cluster's credentials valid.
    """
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise AuthError(f"cannot create directory {parent}: {exc.strerror or exc}") from exc
    key = secrets.token_bytes(KEY_BYTES)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return load_key(path)
    except OSError as exc:
        raise AuthError(f"cannot write cluster key {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(key.hex() + "\n")
        os.chmod(path, 0o600)
        if uid is not None:
            os.chown(path, uid, -1)
    except OSError as exc:
        raise AuthError(f"cannot write cluster key {path}: {exc.strerror or exc}") from exc
    return key


def load_key(path: str) -> bytes:
    """Read the key written by `generate_key`; any problem is an AuthError naming the file."""
    if not path:
        raise AuthError("no cluster key configured (AuthKeyFile is not set in slurm.conf)")
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
    except OSError as exc:
        raise AuthError(f"cannot read cluster key {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise AuthError(f"cannot read cluster key {path}: not a hex key") from exc
    try:
        key = bytes.fromhex(text)
    except ValueError as exc:
        raise AuthError(f"cannot read cluster key {path}: not a hex key") from exc
    if len(key) < MIN_KEY_BYTES:
        raise AuthError(f"cannot read cluster key {path}: key too short ({len(key)} bytes)")
    return key
