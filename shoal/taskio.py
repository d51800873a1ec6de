"""The framing between srun and a node's step supervisor over TCP (standard library only).

A frame is a 9-byte header (kind, task id, payload length) and the payload. Nodes send HELLO
(JSON: node, token, tasks) once, then OUT/ERR data, EXIT (JSON: code, signal) per task and DONE;
srun sends IN (stdin data; empty = end of input) and SIGNAL (the payload is the signal number,
0 = terminate the step). TCP's flow control is the backpressure: a node that cannot send stops
reading its tasks' pipes, and the tasks block, so no side buffers more than a frame.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Mapping

HELLO, OUT, ERR, EXIT, DONE, IN, SIGNAL = 1, 2, 3, 4, 5, 10, 11
HEADER = struct.Struct("!BIi")
MAX_PAYLOAD = 1 << 20
CHUNK = 64 * 1024


def frame(kind: int, task: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, task, len(payload)) + payload


def json_frame(kind: int, task: int, data: Mapping[str, object]) -> bytes:
    return frame(kind, task, json.dumps(data).encode())


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> tuple[int, int, bytes] | None:
    """The next frame, or None when the peer closed the connection."""
    head = _recv_exact(sock, HEADER.size)
    if head is None:
        return None
    kind, task, size = HEADER.unpack(head)
    if size < 0 or size > MAX_PAYLOAD:
        raise ValueError(f"bad frame length {size}")
    payload = _recv_exact(sock, size) if size else b""
    if payload is None:
        return None
    return kind, task, payload
