"""scontrol reboot and cancel_reboot in the controller, stepped by hand, with Slurm 22.05's states and words
(measured on the real 22.05: its sinfo/scontrol output is in tests/unit/cli/test_sinfo_reboot_states.py).

RebootProgram is set and ResumeTimeout=60 here. A node registers with boot time 1 at the start; a
registration with a boot time of "now" is a node that has rebooted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctld.controller import Caller
from ctld.errors import SlurmError
from shoal.v1 import common_pb2, controller_pb2
from tests.unit.ctld.harness import ROOT, Harness, Launch, Reboot, cluster, job

USER = Caller(uid=4242, gid=4242)


def _h(tmp_path: Path, **keys: str | int) -> Harness:
    settings: dict[str, str | int] = {
        "RebootProgram": "/usr/sbin/reboot",
        "ResumeTimeout": 60,
        "DefMemPerCPU": 1000,
    }
    settings.update(keys)
    return Harness.of(cluster().nodes(2).set(**settings), tmp_path)


def _reboot(
    h: Harness, nodes: str, caller: Caller = ROOT, asap: bool = False, next_state: str = "", reason: str = ""
) -> None:
    """scontrol reboot [ASAP] [nextstate=...] [reason=...] NODES, as the command sends it."""
    request = controller_pb2.RebootNodesRequest(nodes=nodes, asap=asap, next_state=next_state, reason=reason)
    h.ctl.reboot_nodes(request, caller)


def _update(h: Harness, nodes: str, state: str, caller: Caller = ROOT) -> None:
    h.ctl.update_node(
        controller_pb2.UpdateNodeRequest(nodes=nodes, fields=[common_pb2.KeyValue(key="State", value=state)]),
        caller,
    )


def _drain(h: Harness, name: str) -> None:
    fields = [common_pb2.KeyValue(key="State", value="DRAIN"), common_pb2.KeyValue(key="Reason", value="x")]
    h.ctl.update_node(controller_pb2.UpdateNodeRequest(nodes=name, fields=fields), ROOT)


def _show(h: Harness, name: str) -> tuple[str, str, str]:
    """(State=, NextState=, Reason=) as scontrol show node has them."""
    node = h.ctl.get_nodes(controller_pb2.GetNodesRequest(names=[name])).nodes[0]
    return node.state, node.next_state, node.reason


def _back(h: Harness, name: str) -> None:
    """The node's noded starts again after its reboot and registers with the new boot time."""
    h.register(name, boot_time=int(h.clock()))


def _reboots(h: Harness) -> list[Reboot]:
    """The reboots ctld issued since the last look (its other calls to nodes left aside)."""
    return [e for e in h.effects() if isinstance(e, Reboot)]


def _running_on_n1(h: Harness) -> int:
    job_id = h.submit(job().cpus(1))
    h.schedule()
    assert h.effects() == [Launch("n1", job_id)]
    return job_id


def test_an_idle_node_reboots_at_once_and_comes_back_to_service(tmp_path: Path) -> None:
    h = _h(tmp_path)
    _reboot(h, "n1")
    assert h.effects() == [Reboot("n1")]
    assert _show(h, "n1") == ("DOWN+REBOOT_ISSUED", "RESUME", "reboot requested : reboot issued")
    assert h.ctl.nodes["n1"].info.reason_user == h.ctl.cfg.slurm_user  # [slurm@...], as 22.05
    job_id = h.submit(job().cpus(1))
    h.schedule()
    assert h.ctl.jobs[job_id].batch_host == "n2"  # a rebooting node takes no work
    _back(h, "n1")
    assert _show(h, "n1") == ("IDLE", "", "")


def test_asap_drains_a_busy_node_and_reboots_it_when_its_job_ends(tmp_path: Path) -> None:
    h = _h(tmp_path)
    running = _running_on_n1(h)
    _reboot(h, "n1", asap=True)
    assert _show(h, "n1") == ("MIXED+DRAIN+REBOOT_REQUESTED", "RESUME", "Reboot ASAP")
    waiting = h.submit(job().cpus(1))
    _drain(h, "n2")
    h.schedule()
    assert (h.state(waiting), h.effects()) == ("PENDING", [])  # the draining node takes no new job
    h.tick()
    assert h.effects() == []  # not while its job runs
    h.finish(running)
    h.tick()
    assert _reboots(h) == [Reboot("n1")]
    assert _show(h, "n1") == ("DOWN+DRAIN+REBOOT_ISSUED", "RESUME", "Reboot ASAP : reboot issued")
    _back(h, "n1")
    assert _show(h, "n1") == ("IDLE", "", "")
    h.schedule()
    assert (h.state(waiting), h.ctl.jobs[waiting].batch_host) == ("RUNNING", "n1")


def test_without_asap_a_busy_node_takes_new_jobs_and_loses_the_reason_as_in_2205(tmp_path: Path) -> None:
    h = _h(tmp_path)
    _running_on_n1(h)
    _drain(h, "n2")
    _reboot(h, "n1")
    assert _show(h, "n1") == ("MIXED+REBOOT_REQUESTED", "RESUME", "reboot requested")
    another = h.submit(job().cpus(1))
    h.schedule()
    assert h.effects() == [Launch("n1", another)]
    assert _show(h, "n1") == ("MIXED+REBOOT_REQUESTED", "RESUME", "")


@pytest.mark.parametrize(
    ("fields", "state", "reason"),
    [
        ({}, "IDLE", ""),
        ({"next_state": "resume", "reason": "kernel"}, "IDLE", ""),
        ({"next_state": "DOWN", "reason": "retire"}, "DOWN", "retire : reboot issued"),
        ({"next_state": "DOWN", "asap": True}, "DOWN", "Reboot ASAP : reboot issued"),
    ],
    ids=["default", "nextstate=resume", "nextstate=down", "asap nextstate=down"],
)
def test_a_rebooted_node_goes_to_its_next_state(
    tmp_path: Path, fields: dict[str, Any], state: str, reason: str
) -> None:
    h = _h(tmp_path, ReturnToService=2)  # which would return a DOWN node to service: not this one
    _reboot(h, "n1", **fields)
    _back(h, "n1")
    h.advance(10)
    h.tick()
    assert _show(h, "n1") == (state, "", reason)


def test_a_node_not_back_after_resume_timeout_goes_down(tmp_path: Path) -> None:
    h = _h(tmp_path, ReturnToService=2)
    _reboot(h, "n1", reason="bios")
    h.silence("n1")
    h.advance(30)
    h.tick()
    assert _show(h, "n1")[0] == "DOWN+REBOOT_ISSUED"  # away while rebooting: not NOT_RESPONDING
    h.answer("n1")
    h.register("n1")  # its noded came back, but the node did not reboot (the same boot time)
    h.advance(20)
    h.tick()
    assert _show(h, "n1") == ("DOWN+REBOOT_ISSUED", "RESUME", "bios : reboot issued")
    h.advance(10)
    h.tick()
    assert _show(h, "n1") == ("DOWN", "", "bios : reboot issued : reboot timed out")
    assert h.ctl.nodes["n1"].info.reason_user == h.ctl.cfg.slurm_user


def test_cancel_reboot_undoes_a_pending_reboot_and_nothing_else(tmp_path: Path) -> None:
    h = _h(tmp_path)
    _running_on_n1(h)
    _reboot(h, "n1", asap=True)
    _update(h, "n1", "CANCEL_REBOOT")
    assert _show(h, "n1") == ("MIXED", "", "")  # the drain and the reason of the request go with it
    with pytest.raises(SlurmError, match="^Invalid node state specified$"):
        _update(h, "n1", "CANCEL_REBOOT")  # none pending
    _reboot(h, "n2")  # idle: issued at once
    with pytest.raises(SlurmError, match="^Invalid node state specified$"):
        _update(h, "n2", "CANCEL_REBOOT")  # too late


def test_resume_drops_a_reboot_undrain_keeps_it(tmp_path: Path) -> None:
    h = _h(tmp_path)
    _running_on_n1(h)
    _reboot(h, "n1", asap=True)
    _update(h, "n1", "UNDRAIN")
    assert _show(h, "n1") == ("MIXED+REBOOT_REQUESTED", "RESUME", "")
    _update(h, "n1", "RESUME")
    assert _show(h, "n1") == ("MIXED", "", "")
    _reboot(h, "n2")
    _update(h, "n2", "RESUME")  # an issued one too: back in service at once
    assert _show(h, "n2") == ("IDLE", "", "")


def test_asking_again_changes_nothing(tmp_path: Path) -> None:
    h = _h(tmp_path)
    _running_on_n1(h)
    _reboot(h, "n1", asap=True)
    _reboot(h, "n1", reason="other", next_state="DOWN")
    assert _show(h, "n1") == ("MIXED+DRAIN+REBOOT_REQUESTED", "RESUME", "Reboot ASAP")


def test_all_reboots_every_node(tmp_path: Path) -> None:
    h = _h(tmp_path)
    _reboot(h, "ALL")
    assert sorted(e.node for e in h.effects() if isinstance(e, Reboot)) == ["n1", "n2"]


@pytest.mark.parametrize(
    ("settings", "nodes", "caller", "message"),
    [
        ({"RebootProgram": ""}, "n1", ROOT, "RebootProgram isn't defined"),
        ({"RebootProgram": ""}, "n9", USER, "RebootProgram isn't defined"),  # 22.05 checks it first
        ({}, "n1", USER, "Permission denied"),
        ({}, "n9", ROOT, "Invalid node name specified"),
        ({}, "n1,n9", ROOT, "Invalid node name specified"),
    ],
    ids=["no RebootProgram", "no RebootProgram first", "a user", "unknown node", "one unknown node"],
)
def test_refusals(tmp_path: Path, settings: dict[str, str], nodes: str, caller: Caller, message: str) -> None:
    h = _h(tmp_path, **settings)
    with pytest.raises(SlurmError, match=f"^{message}$"):
        _reboot(h, nodes, caller)
    assert _show(h, "n1")[0] == "IDLE" and h.effects() == []


def test_a_user_may_not_cancel_a_reboot(tmp_path: Path) -> None:
    h = _h(tmp_path)
    _running_on_n1(h)
    _reboot(h, "n1")
    with pytest.raises(SlurmError, match="^Invalid user id$"):
        _update(h, "n1", "CANCEL_REBOOT", USER)
    assert _show(h, "n1")[0] == "MIXED+REBOOT_REQUESTED"


def test_a_restart_keeps_a_pending_reboot_and_the_timeout_of_an_issued_one(tmp_path: Path) -> None:
    h = _h(tmp_path)
    running = _running_on_n1(h)
    _reboot(h, "n1", asap=True, next_state="DOWN")
    _reboot(h, "n2", reason="fw")
    h.effects()
    h = h.restart()
    h.register("n1", running=(running,))
    h.register("n2")
    assert _show(h, "n1") == ("MIXED+DRAIN+REBOOT_REQUESTED", "DOWN", "Reboot ASAP")
    assert _show(h, "n2") == ("DOWN+REBOOT_ISSUED", "RESUME", "fw : reboot issued")
    h.finish(running)
    h.advance(61)
    h.tick()
    assert _reboots(h) == [Reboot("n1")]
    assert _show(h, "n2") == ("DOWN", "", "fw : reboot issued : reboot timed out")
