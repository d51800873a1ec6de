"""Drain and reboot workflows on a real cluster: `scontrol reboot` with the shipped RebootProgram for
emulated nodes (etc/reboot/restart_noded.py restarts the node's noded, which comes back with a new
boot time), ResumeTimeout, cancel_reboot, and what a user may not do. One cluster for the module.

The states and words are those the real Slurm 22.05 showed for the same commands (see
tests/unit/cli/test_sinfo.py and tests/unit/ctld/test_node_reboot.py).
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

PROGRAM = Path(__file__).resolve().parents[2] / "etc" / "reboot" / "restart_noded.py"
RESUME_TIMEOUT = 20  # the noded restart of a good reboot fits in it on a loaded machine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    top = tmp_path_factory.mktemp("reboot")
    # the shipped program, except for a node whose reboot a test wants never to come back
    wrapper = top / "reboot.sh"
    wrapper.write_text(f'#!/bin/sh\n[ -e "{top}/never-back-$SLURMD_NODENAME" ] && exit 0\nexec {PROGRAM}\n')
    wrapper.chmod(0o755)
    c = start_cluster(top / "cluster", extra=(f"RebootProgram={wrapper}", f"ResumeTimeout={RESUME_TIMEOUT}"))
    yield c
    stop_cluster(c)


def _show(c: Cluster, node: str) -> dict[str, str]:
    """scontrol show node's KEY=VALUE words (Reason= whole, up to its [user@time])."""
    text = c.ok("scontrol", "show", "node", node)
    fields = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Reason="):
            fields["Reason"] = line[len("Reason=") :]
            continue
        for word in line.split():
            key, _, value = word.partition("=")
            fields[key] = value
    return fields


def _sinfo(c: Cluster, node: str) -> str:
    return c.ok("sinfo", "-h", "-N", "-p", "batch", "-n", node, "-o", "%t %T").strip()


def _holding(c: Cluster, node: str, flag: Path) -> int:
    """A one-CPU job on `node` that runs until `flag` exists."""
    job = c.submit(
        "-w", node, "-n1", "-o", "/dev/null", "--wrap", f"while [ ! -e {flag} ]; do sleep 0.2; done"
    )
    c.wait_state(job, {"RUNNING"})
    return job


def test_reboot_asap_drains_waits_for_the_job_and_returns_the_node(cluster: Cluster, tmp_path: Path) -> None:
    flag = tmp_path / "done"
    job = _holding(cluster, "node1", flag)
    booted = _show(cluster, "node1")["BootTime"]
    out = cluster.run("scontrol", "reboot", "ASAP", "reason=kernel update", "node1")
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    shown = _show(cluster, "node1")
    assert (shown["State"], shown["NextState"]) == ("MIXED+DRAIN+REBOOT_REQUESTED", "RESUME")
    assert shown["Reason"].startswith("kernel update [root@")
    assert _sinfo(cluster, "node1") == "drng@ draining@"
    reasons = cluster.ok("sinfo", "-R", "-h", "-o", "%E|%u|%N").split("\n")
    assert "kernel update|root|node1" in reasons
    waiting = cluster.submit("-w", "node1", "-o", "/dev/null", "--wrap", "true")
    assert cluster.state(waiting) == "PENDING"  # draining: no new job lands there
    flag.touch()
    assert cluster.wait_state(job, {"COMPLETED"}) == "COMPLETED"
    wait_until(
        "node1 back from its reboot",
        lambda: _show(cluster, "node1")["BootTime"] != booted,
        timeout=RESUME_TIMEOUT + 10,
    )
    assert cluster.wait_state(waiting, {"COMPLETED"}) == "COMPLETED"  # back in service
    shown = _show(cluster, "node1")
    assert shown["State"] in ("IDLE", "MIXED") and "NextState" not in shown and "Reason" not in shown
    assert "node1" not in cluster.ok("sinfo", "-R", "-h")
    assert "node1: booted" in cluster.log("noded")


def test_nextstate_down_leaves_the_rebooted_node_down_with_its_reason(cluster: Cluster) -> None:
    booted = _show(cluster, "node2")["BootTime"]
    cluster.ok("scontrol", "reboot", "nextstate=down", "reason=retire", "node2")
    wait_until(
        "node2 back from its reboot",
        lambda: _show(cluster, "node2")["BootTime"] != booted,
        timeout=RESUME_TIMEOUT + 10,
    )
    shown = _show(cluster, "node2")
    assert shown["State"] == "DOWN" and "NextState" not in shown
    assert shown["Reason"].startswith("retire : reboot issued [")
    assert _sinfo(cluster, "node2") == "down down"
    cluster.ok("scontrol", "update", "nodename=node2", "state=resume")
    assert _show(cluster, "node2")["State"] == "IDLE"


def test_cancel_reboot_before_it_is_issued(cluster: Cluster, tmp_path: Path) -> None:
    flag = tmp_path / "done"
    job = _holding(cluster, "node1", flag)
    cluster.ok("scontrol", "reboot", "ASAP", "node1")
    assert _show(cluster, "node1")["Reason"].startswith("Reboot ASAP [root@")
    cluster.ok("scontrol", "cancel_reboot", "node1")
    shown = _show(cluster, "node1")
    assert (shown["State"], "NextState" in shown, "Reason" in shown) == ("MIXED", False, False)
    again = cluster.run("scontrol", "cancel_reboot", "node1")
    assert (again.returncode, again.stderr) == (1, "slurm_update error: Invalid node state specified\n")
    flag.touch()
    cluster.wait_state(job, {"COMPLETED"})
    assert _show(cluster, "node1")["State"] == "IDLE"  # no reboot followed


def _resume_timeout(c: Cluster, seconds: int) -> None:
    """ResumeTimeout=seconds in slurm.conf, taken by `scontrol reconfigure`."""
    c.conf.write_text(re.sub(r"(?m)^ResumeTimeout=\d+$", f"ResumeTimeout={seconds}", c.conf.read_text()))
    c.ok("scontrol", "reconfigure")


def test_a_node_that_never_comes_back_goes_down_after_resume_timeout(cluster: Cluster) -> None:
    never = cluster.dir.parent / "never-back-node2"
    never.touch()
    _resume_timeout(cluster, 3)  # this test's wait, not the module's
    try:
        cluster.ok("scontrol", "reboot", "node2")
        assert _sinfo(cluster, "node2") == "boot^ reboot^"
        assert _show(cluster, "node2")["State"] == "DOWN+REBOOT_ISSUED"
        wait_until(
            "node2 DOWN after ResumeTimeout", lambda: _show(cluster, "node2")["State"] == "DOWN", timeout=30
        )
        assert _show(cluster, "node2")["Reason"].startswith(
            "reboot requested : reboot issued : reboot timed out ["
        )
        reasons = cluster.ok("sinfo", "-R", "-h", "-o", "%E|%u|%N").split("\n")
        slurm_user = pwd.getpwuid(os.getuid()).pw_name  # shoal up's SlurmUser: who started it
        assert f"reboot requested : reboot issued : reboot timed out|{slurm_user}|node2" in reasons
    finally:
        never.unlink()
        _resume_timeout(cluster, RESUME_TIMEOUT)
        cluster.ok("scontrol", "update", "nodename=node2", "state=resume")


def test_a_user_may_neither_reboot_nor_cancel_nor_drain(cluster: Cluster) -> None:
    for argv, stderr in (
        (("scontrol", "reboot", "node1"), "scontrol_reboot_nodes error: Permission denied\n"),
        (("scontrol", "reboot", "ASAP", "ALL"), "scontrol_reboot_nodes error: Permission denied\n"),
        (("scontrol", "cancel_reboot", "node1"), "slurm_update error: Invalid user id\n"),
        (
            ("scontrol", "update", "nodename=node1", "state=drain", "reason=mine"),
            "slurm_update error: Invalid user id\n",
        ),
    ):
        out = cluster.run(*argv, user=NOBODY)
        assert (out.returncode, out.stdout, out.stderr) == (1, "", stderr), argv
    assert _show(cluster, "node1")["State"] == "IDLE"
