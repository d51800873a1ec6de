"""Daemons refuse bad configuration and busy ports with one clear line and exit 1."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def _run(module: str, conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, "-f", str(conf)], capture_output=True, text=True, timeout=30
    )


def _conf(tmp_path: Path, port: int, extra: str = "") -> Path:
    from shoal.auth.key import generate_key

    generate_key(str(tmp_path / "shoal.key"))
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        f"ClusterName=t\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={port}\n"
        f"AuthKeyFile={tmp_path}/shoal.key\nStateSaveLocation={tmp_path}/state\n{extra}"
        "NodeName=n1 NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000\nPartitionName=p Nodes=n1 Default=YES\n"
    )
    return conf


def test_ctld_with_busy_port_says_so(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = _run("ctld.main", _conf(tmp_path, port))
    assert out.returncode == 1
    assert out.stderr.strip() == f"shoal-ctld: error: cannot bind 127.0.0.1:{port}: address in use"


@pytest.mark.parametrize("module", ["ctld.main", "noded.main", "shoal.agent.agentd"])
def test_malformed_config_names_file_and_line(tmp_path: Path, module: str) -> None:
    conf = _conf(tmp_path, 6999, extra="KillWait=soon\n")
    out = _run(module, conf)
    assert out.returncode == 1
    assert "slurm.conf:6:" in out.stderr and "KillWait" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("SelectType=select/nonexistent", "Can't find plugin for select/nonexistent"),  # 22.05: fatal, exit 1
        ("KillWait=", "invalid value for KillWait: ''"),  # 22.05: Parse error ... "KillWait=", fatal
        (
            "MaxJobCount=99999999999999999999999",
            "MaxJobCount value (99999999999999999999999) is out of range",
        ),
    ],
    ids=["select-type", "empty-integer", "out-of-range"],
)
def test_ctld_refuses_to_start_on_lines_slurm_finds_fatal(tmp_path: Path, line: str, words: str) -> None:
    out = _run("ctld.main", _conf(tmp_path, 6999, extra=f"{line}\n"))
    assert out.returncode == 1
    assert out.stderr.strip() == f"shoal-ctld: error: {tmp_path}/slurm.conf:6: {words}" + (
        "" if "KillWait" not in line else " (expected an integer)"
    )


def test_a_gpu_count_no_node_has_is_a_config_error(tmp_path: Path) -> None:
    """gres.conf `Count=99999999999999` made noded build a list that size (MemoryError); now file:line."""
    conf = _conf(tmp_path, 6999)
    (tmp_path / "gres.conf").write_text("Name=gpu Count=99999999999999\n")
    out = subprocess.run(
        [sys.executable, "-m", "noded.main", "-f", str(conf), "-N", "n1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 1
    assert out.stderr.strip() == (
        f"shoal-noded: error: {tmp_path}/gres.conf:1: invalid value for Count: "
        "'99999999999999' (expected a count of at most 1024)"
    )
