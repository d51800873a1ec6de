"""The commands' thin client: where the socket is, and that it never imports grpc."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shoal.agent.client import AgentError, call, socket_path
from shoal.v1 import controller_pb2


@pytest.mark.parametrize(
    ("env_socket", "conf_text", "expected"),
    [
        ("/tmp/env.sock", "AgentSocket=/tmp/conf.sock\n", "/tmp/env.sock"),
        (None, "ClusterName=c\nAgentSocket=/tmp/conf.sock\n", "/tmp/conf.sock"),
        (None, "  agentsocket = /tmp/lower.sock   # comment\n", "/tmp/lower.sock"),
        (None, "#AgentSocket=/tmp/commented.sock\n", "/run/shoal/agent.sock"),
        (None, "ClusterName=c\n", "/run/shoal/agent.sock"),
        (None, None, "/run/shoal/agent.sock"),
    ],
    ids=["env-wins", "conf", "case-and-comment", "commented-out", "not-set", "no-conf"],
)
def test_socket_path(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env_socket: str | None,
    conf_text: str | None,
    expected: str,
) -> None:
    conf = tmp_path / "slurm.conf"
    if conf_text is not None:
        conf.write_text(conf_text)
    monkeypatch.setenv("SLURM_CONF", str(conf))
    if env_socket is None:
        monkeypatch.delenv("SHOAL_AGENT_SOCKET", raising=False)
    else:
        monkeypatch.setenv("SHOAL_AGENT_SOCKET", env_socket)
    assert socket_path() == expected


def test_no_agent_is_a_controller_connect_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOAL_AGENT_SOCKET", str(tmp_path / "missing.sock"))
    with pytest.raises(AgentError) as info:
        call("/shoal.v1.Controller/Ping", controller_pb2.PingRequest(), controller_pb2.PingResponse)
    assert info.value.code == 14
    assert info.value.message == "Unable to contact slurm controller (connect failure)"


def test_client_imports_no_grpc() -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import shoal.agent.client"],
        capture_output=True,
        text=True,
        check=True,
    )
    modules = [line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line]
    assert "shoal.agent.client" in modules
    assert [m for m in modules if m.startswith("grpc")] == []
