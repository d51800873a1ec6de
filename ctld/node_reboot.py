"""`scontrol reboot` and `cancel_reboot`: a node's reboot as Slurm 22.05 runs it (measured on it).

A request marks the node REBOOT_REQUESTED (sinfo "@"). With ASAP it is drained first, so no new job
lands there; without, it keeps taking jobs, as 22.05 does (and a job that starts there clears the
request's reason, as 22.05's does). Once the node runs nothing, ctld issues the reboot: the node is
DOWN+REBOOT_ISSUED (sinfo "boot^"), " : reboot issued" is added to its reason and its noded runs
RebootProgram. The node is back when it registers with a newer boot time: NextState=RESUME returns it
to service, NextState=DOWN leaves it DOWN with its reason. One that is not back after ResumeTimeout
seconds goes DOWN, "... : reboot timed out". The flags live in the node's record (the state store), so
a ctld restart keeps a pending reboot and the ResumeTimeout of an issued one.
"""

from __future__ import annotations

import logging
from functools import partial

from ctld import nodes as noderec
from ctld.errors import FAILED_PRECONDITION, INVALID_NODE_STATE, PERMISSION_DENIED, SlurmError
from ctld.nodes import NodeRuntime
from ctld.record import JobRecord
from ctld.state import Caller, ClusterState, Transaction, user_name
from shoal.states import ACTIVE_STATES
from shoal.v1 import cluster_pb2, controller_pb2

log = logging.getLogger("shoal.ctld")

NO_REBOOT_PROGRAM = "RebootProgram isn't defined"
REQUESTED_REASON = "reboot requested"  # 22.05's reason of a request without reason=
ASAP_REASON = "Reboot ASAP"
NEXT_STATES = ("RESUME", "DOWN")
# a registration whose boot time is this much newer than the one before is a reboot (psutil's boot
# time of one boot moves by a second or so between readings)
BOOT_SLACK_S = 5


def request(state: ClusterState, req: controller_pb2.RebootNodesRequest, caller: Caller) -> None:
    """scontrol reboot [ASAP] [nextstate=resume|down] [reason=...] NODELIST|ALL (operators)."""
    if not state.cfg.reboot_program:
        raise SlurmError(NO_REBOOT_PROGRAM, FAILED_PRECONDITION)
    if not state.is_admin(caller):  # administrators: an Operator may not reboot nodes
        raise SlurmError("Permission denied", PERMISSION_DENIED)
    names = noderec.named(state.nodes, req.nodes)
    next_state = (req.next_state or "RESUME").upper()
    if next_state not in NEXT_STATES:
        raise SlurmError(INVALID_NODE_STATE)
    now = state.now()
    with state.transaction() as tx:
        for name in names:
            node = state.nodes[name]
            info = node.info
            if info.reboot_requested or info.reboot_issued:
                continue  # as 22.05: asking again changes nothing (nor ASAP, nor the reason)
            info.reboot_requested = True
            info.next_state = next_state
            if req.asap and not info.drain:
                info.drain = info.reboot_drained = True
            # 22.05 keeps a reason the node already has (a DOWN node's) unless reason= is given
            reason = req.reason or ("" if info.reason else ASAP_REASON if req.asap else REQUESTED_REASON)
            if reason:
                _set_reason(info, reason, caller.uid, user_name(caller.uid), now)
                info.reboot_reason = True
            tx.save_node(node)
        log.info("reboot request queued for nodes %s", ",".join(names))
        issue_due(state, tx, now)
    state.wake.set()


def cancel(info: cluster_pb2.NodeInfo) -> None:
    """scontrol cancel_reboot (UpdateNode State=CANCEL_REBOOT) of a node whose reboot is not issued yet:
    the drain and the reason the request set go with it."""
    if info.reboot_drained:
        info.drain = False
    if info.reboot_reason:
        _set_reason(info, "", 0, "", 0)
    forget(info)


def forget(info: cluster_pb2.NodeInfo) -> None:
    """No reboot pending any more (cancelled, done, or the admin resumed the node)."""
    info.reboot_requested = info.reboot_issued = info.reboot_drained = info.reboot_reason = False
    info.next_state = ""
    info.reboot_issued_time = 0


def undrained(info: cluster_pb2.NodeInfo) -> None:
    """State=UNDRAIN of an ASAP request: the reboot stays requested, the node takes jobs again."""
    info.reboot_drained = info.reboot_reason = False


def job_started(state: ClusterState, tx: Transaction, job: JobRecord) -> None:
    """A job starting on a node whose reboot waits (without ASAP) clears the request's reason, as 22.05."""
    for alloc in job.allocation:
        node = state.nodes.get(alloc.node)
        if node is None:
            continue
        info = node.info
        if info.reboot_requested and info.reboot_reason and not info.drain:
            _set_reason(info, "", 0, "", 0)
            info.reboot_reason = False
            tx.save_node(node)


def issue_due(state: ClusterState, tx: Transaction, now: int) -> None:
    """Issue the requested reboots of nodes that run nothing (and answer): DOWN+REBOOT_ISSUED, and
    RebootNode to their noded once the change is committed."""
    waiting = [n for n in state.nodes.values() if n.info.reboot_requested]
    if not waiting:
        return
    busy = {a.node for j in state.jobs.values() if j.state in ACTIVE_STATES for a in j.allocation}
    for node in waiting:
        info = node.info
        if info.name in busy or not node.registered or info.not_responding:
            continue
        info.reboot_requested = False
        info.reboot_issued = True
        info.reboot_issued_time = now
        info.base_state = "DOWN"
        reason = f"{info.reason} : reboot issued" if info.reboot_reason and info.reason else "reboot issued"
        _set_reason(info, reason, state.slurm_uid, state.cfg.slurm_user, now)
        log.info("node %s: reboot issued (RebootProgram=%s)", info.name, state.cfg.reboot_program)
        tx.save_node(node)
        tx.after(partial(state.actions.reboot, info))


def time_out(state: ClusterState, tx: Transaction, now: int) -> None:
    """Issued reboots of nodes not back after ResumeTimeout (0: no limit): DOWN, "... : reboot timed out"."""
    limit = state.cfg.resume_timeout
    if limit <= 0:
        return
    for node in state.nodes.values():
        info = node.info
        if not info.reboot_issued or now - info.reboot_issued_time < limit:
            continue
        log.warning(
            "node %s: not back %ds after its reboot was issued (ResumeTimeout): DOWN", info.name, limit
        )
        reason = f"{info.reason} : reboot timed out" if info.reason else "reboot timed out"
        info.drain = False
        forget(info)
        info.base_state = "DOWN"
        _set_reason(info, reason, state.slurm_uid, state.cfg.slurm_user, now)
        tx.save_node(node)


def registered(node: NodeRuntime, previous_boot: int, boot_time: int) -> bool:
    """A node whose reboot was issued registered: back (True) if it booted since, to its NextState;
    else it is still on its way (False), DOWN+REBOOT_ISSUED until it is or ResumeTimeout passes."""
    info = node.info
    if not booted_since(previous_boot, boot_time, info.reboot_issued_time):
        log.info("node %s registered without a new boot: its reboot is still awaited", info.name)
        return False
    resume = info.next_state != "DOWN"
    info.drain = False
    forget(info)
    if resume:
        info.base_state = "IDLE"
        _set_reason(info, "", 0, "", 0)
    else:
        info.base_state = "DOWN"
    log.info("node %s rebooted: %s", info.name, "back in service" if resume else "DOWN (NextState=DOWN)")
    return True


def booted_since(previous_boot: int, boot_time: int, issued_at: int) -> bool:
    """Whether a registration's boot time says the node rebooted: newer than the boot it had (when
    known), else not before the reboot was issued."""
    if boot_time <= 0:
        return False
    if previous_boot > 0:
        return boot_time > previous_boot + BOOT_SLACK_S
    return boot_time >= issued_at - BOOT_SLACK_S


def _set_reason(info: cluster_pb2.NodeInfo, reason: str, uid: int, user: str, now: int) -> None:
    info.reason = reason
    info.reason_uid = uid
    info.reason_user = user
    info.reason_time = now
