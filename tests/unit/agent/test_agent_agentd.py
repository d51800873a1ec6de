"""shoal-agentd as an admin runs it: from slurm.conf to a serving socket, and a clean stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal.agent.client import call
from shoal.v1 import controller_pb2

KEY = b"a" * 32  # the key of the conftest `ctld` fixture


def write_conf(directory: Path, ctld: str, *, key_file: str | None = None) -> Path:
    host, port = ctld.rsplit(":", 1)
    if key_file is None:
        key_file = str(directory / "cluster.key")
        Path(key_file).write_text(KEY.hex() + "\n")
    conf = directory / "slurm.conf"
    conf.write_text(
        f"ClusterName=test\nSlurmctldHost=ctl({host})\nSlurmctldPort={port}\n"
        f"AuthKeyFile={key_file}\nAgentSocket={directory / 'agent.sock'}\n"
    )
    return conf


def agentd(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "shoal.agent.agentd", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 20
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"agentd did not start: {proc.communicate()[1]}")
        time.sleep(0.05)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_serves_from_slurm_conf_and_stops_cleanly(
    tmp_path: Path, ctld: str, monkeypatch: pytest.MonkeyPatch, stop_signal: signal.Signals
) -> None:
    conf = write_conf(tmp_path, ctld)
    pidfile = tmp_path / "agentd.pid"
    proc = agentd("-f", str(conf), "-D", "--pidfile", str(pidfile))
    try:
        sock = tmp_path / "agent.sock"
        wait_for(sock, proc)
        # the socket appears ready: the first call right after it is answered
        monkeypatch.setenv("SHOAL_AGENT_SOCKET", str(sock))
        reply = call(
            "/shoal.v1.Controller/Ping", controller_pb2.PingRequest(), controller_pb2.PingResponse, timeout=5
        )
        assert reply.role == f"{os.getuid()}:{os.getgid()}"
        assert pidfile.read_text().strip() == str(proc.pid)
        proc.send_signal(stop_signal)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not sock.exists()
    assert not pidfile.exists()


def test_socket_option_overrides_the_config(tmp_path: Path, ctld: str) -> None:
    conf = write_conf(tmp_path, ctld)
    sock = tmp_path / "other.sock"
    proc = agentd("--conf", str(conf), "--socket", str(sock))
    wait_for(sock, proc)
    proc.terminate()
    assert proc.wait(timeout=20) == 0


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing-conf", "shoal-agentd: error: "),
        ("missing-key", "shoal-agentd: error: cannot read cluster key "),
        ("live-agent", "shoal-agentd: error: another agent is already listening on "),
    ],
    ids=["missing-conf", "missing-key", "live-agent"],
)
def test_startup_errors_are_one_line_and_exit_1(tmp_path: Path, ctld: str, case: str, expected: str) -> None:
    conf = write_conf(tmp_path, ctld, key_file=str(tmp_path / "nokey") if case == "missing-key" else None)
    first = None
    if case == "live-agent":
        first = agentd("-f", str(conf))
        wait_for(tmp_path / "agent.sock", first)
    try:
        path = str(tmp_path / "absent.conf") if case == "missing-conf" else str(conf)
        result = subprocess.run(
            [sys.executable, "-m", "shoal.agent.agentd", "-f", path],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        if first is not None:
            first.terminate()
            first.wait(timeout=20)
    assert result.returncode == 1
    assert result.stderr.startswith(expected), result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
