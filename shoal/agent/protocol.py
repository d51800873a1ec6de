"""Framing on the agent's unix socket: a 4-byte big-endian length, then that many bytes.

Stdlib only: the short commands import this, and they must start in tens of milliseconds.
"""

from __future__ import annotations

import os
import socket
import struct

MAX_FRAME = 64 * 1024 * 1024
# The agent's command runner (cli/runner.py) listens on the agent's socket path plus this suffix
# (cli/native/command.c derives it the same way), and exits with RUNNER_CANNOT_LISTEN when it cannot
# bind there: the agent then stops starting it again.
RUNNER_SUFFIX = ".run"
RUNNER_CANNOT_LISTEN = 3
_HEADER = struct.Struct(">I")


def remove_socket_if_ours(path: str, inode: int | None) -> None:
    """Unlink a unix socket we bound at `path` (inode None: we did not), unless another process
    has bound there since."""
    if inode is None:
        return
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass


class FrameError(ConnectionError):
    """The peer sent something that is not a frame (too large); the connection is unusable."""


def send_frame(sock: socket.socket, data: bytes) -> None:
    """Send one frame; ValueError if `data` is over MAX_FRAME."""
    if len(data) > MAX_FRAME:
        raise ValueError(f"message of {len(data)} bytes exceeds the {MAX_FRAME}-byte limit")
    sock.sendall(_HEADER.pack(len(data)) + data)


def recv_frame(sock: socket.socket) -> bytes:
    """Receive one frame; ConnectionError on EOF, truncation or an oversized length."""
    (length,) = _HEADER.unpack(_recv_exactly(sock, _HEADER.size))
    if length > MAX_FRAME:
        raise FrameError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    return _recv_exactly(sock, length)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(min(size - len(buf), 1 << 20))
        if not chunk:
            if buf:
                raise ConnectionError(f"connection closed after {len(buf)} of {size} bytes")
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)
