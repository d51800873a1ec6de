"""Length-prefixed frames on the agent socket; broken frames are connection errors."""

from __future__ import annotations

import socket
import struct

import pytest

from shoal.agent.protocol import MAX_FRAME, recv_frame, send_frame


@pytest.mark.parametrize("payload", [b"", b"x", b"\x00" * 100_000], ids=["empty", "one-byte", "large"])
def test_frames_round_trip(payload: bytes) -> None:
    a, b = socket.socketpair()
    with a, b:
        send_frame(a, payload)
        send_frame(a, b"next")
        assert recv_frame(b) == payload
        assert recv_frame(b) == b"next"


@pytest.mark.parametrize(
    "sent",
    [b"", b"\x00\x00", struct.pack(">I", 10) + b"short", struct.pack(">I", MAX_FRAME + 1)],
    ids=["eof", "truncated-header", "truncated-body", "oversized"],
)
def test_broken_frames_are_connection_errors(sent: bytes) -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(sent)
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ConnectionError):
            recv_frame(b)


def test_oversized_send_is_refused_before_sending() -> None:
    a, b = socket.socketpair()
    with a, b, pytest.raises(ValueError):
        send_frame(a, b"\x00" * (MAX_FRAME + 1))
