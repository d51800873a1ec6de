"""systemd's readiness datagrams (shoal.daemon.Notifier), to a path and to an abstract address."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from shoal.daemon import Notifier


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_ready_and_stopping_reach_the_socket_and_children_do_not_inherit_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, abstract: bool
) -> None:
    name = f"shoal-test-notify-{os.getpid()}" if abstract else str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name if abstract else name)
        sock.settimeout(10)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name if abstract else name)
        notifier = Notifier()
        assert "NOTIFY_SOCKET" not in os.environ
        assert notifier.status("standing by") and notifier.ready() and notifier.stopping()
        assert sock.recv(100).decode() == "STATUS=standing by"
        assert sock.recv(100).decode() == f"READY=1\nMAINPID={os.getpid()}"
        assert sock.recv(100).decode() == "STOPPING=1"


def test_without_systemd_nothing_is_sent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert Notifier().ready() is False
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "absent"))
    assert Notifier().ready() is False  # a socket that is gone is a logged warning, not a crash
