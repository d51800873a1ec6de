"""RebootNode over real gRPC: noded runs RebootProgram (SLURMD_NODENAME set) and an emulated node's
next noded start is its boot."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from noded import reboot
from noded.hooks import HookConfig
from noded.main import select_nodes, start_servers
from noded.node import HostedNode
from noded.service import NodeAgentService
from shoal.conf import load_slurm_conf
from shoal.rpc.client import Stub
from shoal.v1 import node_pb2
from tests.unit.noded.test_noded_service import NODE_SVC, free_port, write_conf


@pytest.fixture
def node_with(open_dirs: tuple[Path, Path]) -> Iterator[tuple[Stub, HostedNode, Path]]:
    """Emulated node n1 served with RebootProgram = a script that records its environment."""
    spool_root, work = open_dirs
    seen = work / "seen"
    program = work / "reboot.sh"
    program.write_text(f"#!/bin/sh\nenv > {seen}\n")
    program.chmod(0o755)
    port = free_port()
    cfg = load_slurm_conf(write_conf(spool_root.parent, port, free_port()))
    node = select_nodes(cfg, ["n1"], report_config=False)[0]
    node = HostedNode(
        node.conf, spool_root, node.port, node.emulated, hooks=HookConfig(reboot_program=str(program))
    )
    key = bytes.fromhex((spool_root.parent / "shoal.key").read_text().strip())
    servers = start_servers([node], NodeAgentService({"n1": node}, key, frozenset({0}), 2.0, 1), key)
    stub = Stub(f"127.0.0.1:{port}", key)
    try:
        yield stub, node, seen
    finally:
        stub.close()
        for server in servers:
            server.stop(None)


def _wait(what: str, check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _reboot(stub: Stub) -> None:
    stub.call(NODE_SVC + "RebootNode", node_pb2.NodeRebootRequest(node="n1"), node_pb2.NodeRebootResponse)


def test_reboot_runs_the_program_and_the_next_start_is_the_boot(
    node_with: tuple[Stub, HostedNode, Path],
) -> None:
    stub, node, seen = node_with
    assert reboot.boot_time(node, 1000) == 1000  # the host's, until it reboots
    _reboot(stub)
    _wait("RebootProgram's environment", lambda: seen.exists() and "SLURMD_NODENAME=n1\n" in seen.read_text())
    reboot.boot_at_start(node, 5000)  # the noded that starts next
    assert reboot.boot_time(node, 1000) == 5000
    reboot.boot_at_start(node, 6000)  # a later start without a reboot issued keeps it
    assert reboot.boot_time(node, 1000) == 5000
    real = dataclasses.replace(node, emulated=False)
    assert reboot.boot_time(real, 1000) == 1000  # a real node reports the kernel's


def test_no_reboot_program_or_an_unknown_node_is_refused(node_with: tuple[Stub, HostedNode, Path]) -> None:
    stub, node, _ = node_with
    service_node = dataclasses.replace(node, hooks=HookConfig())
    assert reboot.start(service_node) == "RebootProgram isn't defined"
    with pytest.raises(grpc.RpcError) as refused:
        stub.call(NODE_SVC + "RebootNode", node_pb2.NodeRebootRequest(node="n9"), node_pb2.NodeRebootResponse)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
