"""shoal-restd for the local cluster of `shoal up`: the jwt key and auth/jwt keys, start, URL.

The jwt key lives beside the cluster key (0600, the cluster owner's); ctld mints tokens with it
(`scontrol token`) and shoal-restd checks them. The URL restd serves is kept in run/restd.url, which
also tells `shoal status` and `shoal down` that this cluster runs a restd.
"""

from __future__ import annotations

import os
import pwd
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen

JWT_KEY = "jwt_hs256.key"
URL_FILE = "restd.url"
WEB_TOKEN_LIFESPAN = 86400  # the token in the web view's URL `shoal up` prints: a day


def write_conf(directory: Path) -> list[tuple[str, str]]:
    """Create the jwt key (kept if it exists: tokens already handed out stay valid); slurm.conf keys."""
    from shoal.auth.token import generate_jwt_key

    key = directory / JWT_KEY
    generate_jwt_key(str(key))
    # MetricsType: restd serves Slurm 25.11's OpenMetrics at /metrics/* (open to all: no PrivateData here)
    return [
        ("AuthAltTypes", "auth/jwt"),
        ("AuthAltParameters", f"jwt_key={key}"),
        ("MetricsType", "metrics/openmetrics"),
    ]


def url_file(directory: Path) -> Path:
    return directory / "run" / URL_FILE


def url(directory: Path) -> str | None:
    try:
        return url_file(directory).read_text().strip() or None
    except OSError:
        return None


def start(
    directory: Path,
    conf: Path,
    env: dict[str, str],
    port: int,
    spawn: Callable[[list[str], Path, dict[str, str]], Popen[bytes]],
) -> Popen[bytes]:
    run = directory / "run"
    argv = [
        sys.executable,
        "-P",
        "-m",
        "restd.main",
        "-f",
        str(conf),
        "--pidfile",
        str(run / "restd.pid"),
        "-L",
        str(directory / "log" / "restd.log"),
        f"127.0.0.1:{port}",
    ]
    proc = spawn(argv, directory / "log" / "restd.out", env)
    url_file(directory).write_text(f"http://127.0.0.1:{port}\n")
    return proc


def wait_ready(proc: Popen[bytes], port: int, timeout: float) -> str | None:
    """Until restd accepts connections; an error saying why not, or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"shoal-restd exited with status {proc.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return None
        except OSError:
            time.sleep(0.1)
    return f"shoal-restd did not listen on 127.0.0.1:{port} within {timeout:.0f}s"


def web_url(directory: Path, base: str, now: float | None = None) -> str:
    """The web view's URL that logs the caller in, as a notebook server's does (`?token=`, a JWT
    of the cluster's jwt key for the user running `shoal up`); the plain URL when no token can be made."""
    from shoal.auth.errors import AuthError
    from shoal.auth.token import load_jwt_key, mint_token

    plain = f"{base}/web/"
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
        key = load_jwt_key(str(directory / JWT_KEY))
        token = mint_token(key, user, WEB_TOKEN_LIFESPAN, time.time() if now is None else now)
    except (AuthError, KeyError):
        return plain
    return f"{plain}?token={token}"
