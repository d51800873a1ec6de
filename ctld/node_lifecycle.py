"""A node's life in the controller: registration, ping answers, not responding, admin updates, failure.

Each entry point is one transaction of the cluster state: what it changes is saved in one commit, and
the node calls it decides (terminate what a node should not run) go out after the lock is released.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ctld import node_reboot
from ctld import nodes as noderec
from ctld.errors import INVALID_NODE_STATE, INVALID_USER, PERMISSION_DENIED, SlurmError
from ctld.nodes import registration_problems
from ctld.state import Caller, ClusterState, Transaction, user_name
from ctld.transitions import end_by_node_failure, finish, requeue
from shoal.states import ACTIVE_STATES
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2

log = logging.getLogger("shoal.ctld")

NOT_RESPONDING = "Not responding"


def update_node(state: ClusterState, req: controller_pb2.UpdateNodeRequest, caller: Caller) -> None:
    """scontrol update NodeName=... State=DRAIN|DOWN|FAIL|RESUME|IDLE|UNDRAIN|CANCEL_REBOOT Reason=...
    (also scontrol cancel_reboot); NodeName=ALL names every node."""
    if not state.is_admin(caller):  # an Operator too (22.05: AdminLevel=Administrator or the super user)
        raise SlurmError(INVALID_USER, PERMISSION_DENIED)  # 22.05's words for a user's update
    fields = {kv.key.lower(): kv.value for kv in req.fields}
    now = state.now()
    with state.transaction() as tx:
        names = noderec.named(state.nodes, req.nodes)
        wanted = fields.get("state", "").upper()
        reason = fields.get("reason", "")
        if wanted in ("DRAIN", "DOWN", "FAIL") and not reason:
            raise SlurmError("You must specify a reason when DOWNING or DRAINING a node. Request denied")
        if wanted and wanted not in ("DRAIN", "DOWN", "FAIL", "RESUME", "IDLE", "UNDRAIN", "CANCEL_REBOOT"):
            raise SlurmError(INVALID_NODE_STATE)
        if wanted == "CANCEL_REBOOT" and any(not state.nodes[n].info.reboot_requested for n in names):
            raise SlurmError(INVALID_NODE_STATE)  # no reboot pending, or one already issued
        for name in names:
            node = state.nodes[name]
            info = node.info
            if wanted in ("DRAIN", "FAIL"):
                info.drain = True
            elif wanted == "DOWN":
                info.base_state = "DOWN"
                fail_jobs_on(state, tx, name, now)
            elif wanted == "CANCEL_REBOOT":
                node_reboot.cancel(info)
            elif wanted in ("RESUME", "IDLE", "UNDRAIN"):
                info.drain = False
                if wanted == "UNDRAIN":
                    node_reboot.undrained(info)
                else:  # a pending or issued reboot goes too, as 22.05's resume does
                    node_reboot.forget(info)
                if wanted != "UNDRAIN" and info.base_state == "DOWN":
                    info.base_state = "IDLE" if node.registered else "UNKNOWN"
                info.reason = ""
                info.reason_uid = 0
                info.reason_time = 0
            if reason:
                info.reason = reason
                info.reason_uid = caller.uid
                info.reason_user = user_name(caller.uid)
                info.reason_time = now
            tx.save_node(node)
    state.wake.set()


def fail_jobs_on(state: ClusterState, tx: Transaction, name: str, now: int) -> None:
    """A node went DOWN: its running jobs end as NODE_FAIL (or are requeued); other nodes of those
    jobs clean up."""
    for job in state.jobs.values():
        if job.state not in ACTIVE_STATES or name not in (a.node for a in job.allocation):
            continue
        others = [state.nodes[a.node] for a in job.allocation if a.node != name]
        end_by_node_failure(state, tx, job, now)
        tx.save(job)
        for other in others:
            if other.available:
                state.terminate(tx, other, job.job_id, 0, "node_fail")


def register_node(
    state: ClusterState, req: controller_pb2.RegisterNodeRequest
) -> controller_pb2.RegisterNodeResponse:
    now = state.now()
    with state.transaction() as tx:
        node = state.nodes.get(req.name)
        if node is None:
            return controller_pb2.RegisterNodeResponse(
                accepted=False, message=f"Unknown node name {req.name}"
            )
        info = node.info
        info.hardware.CopyFrom(req.hardware)
        info.version = req.version
        info.noded_start_time = req.start_time
        noderec.note_registered(info)  # LastBusyTime
        previous_boot = info.boot_time
        info.boot_time = req.hardware.boot_time
        node.registered = True
        node.last_contact = state.clock()
        info.not_responding = False
        if req.hardware.gpus:
            node.gpu_types.update({g.index: g.type for g in req.hardware.gpus})
        # a node whose reboot was issued is back (to its NextState) or still on its way: either way
        # ReturnToService has no say
        reboot_issued = info.reboot_issued
        if reboot_issued:
            node_reboot.registered(node, previous_boot, req.hardware.boot_time)
        problems = registration_problems(node.conf, req.hardware)
        if problems:
            info.drain = True
            info.reason = ", ".join(problems)
            info.reason_time = now
            info.reason_uid = 0
            info.reason_user = "slurm"
            log.warning("node %s drained: %s", req.name, info.reason)
        rts = state.cfg.return_to_service
        if info.base_state == "DOWN" and not reboot_issued:
            if rts == 2 or (rts == 1 and info.reason == NOT_RESPONDING):
                info.base_state = "IDLE"
                info.reason = "" if not problems else info.reason
        elif info.base_state in ("UNKNOWN", ""):
            info.base_state = "IDLE"
        _reconcile_after_register(state, tx, req, previous_boot, now)
        tx.save_node(node)
    state.wake.set()
    return controller_pb2.RegisterNodeResponse(accepted=True, ctld_start_time=state.incarnation)


def _reconcile_after_register(
    state: ClusterState,
    tx: Transaction,
    req: controller_pb2.RegisterNodeRequest,
    previous_boot: int,
    now: int,
) -> None:
    """Square what a (re-)registering node runs with what the controller believes.

    A node that rebooted lost its jobs (NODE_FAIL or requeued, as Slurm's "node unexpectedly
    rebooted"); a job the node still runs that the controller does not have running there (ended,
    requeued or moved while the node was unreachable) is terminated there. Jobs that merely
    finished while nobody listened are left alone: their supervisors' reports are still on the way.
    A batch job a previous controller started on this node that the node neither runs nor has
    finished never got there (that controller stopped between the start and the launch): it is
    requeued, or ends NODE_FAIL with --no-requeue, as Slurm's "batch job missing from batch node".
    """
    rebooted = previous_boot and req.hardware.boot_time and abs(req.hardware.boot_time - previous_boot) > 60
    for job in state.jobs.values():
        on_node = any(a.node == req.name for a in job.allocation)
        if rebooted and on_node and job.state in ACTIVE_STATES:
            log.warning("node %s rebooted: job %d lost (NODE_FAIL)", req.name, job.job_id)
            end_by_node_failure(state, tx, job, now)
            tx.save(job)
    _terminate_orphans(state, tx, req.name, req.running_jobs)
    if req.reports_finished:
        _requeue_missing(state, tx, req, now)


def _requeue_missing(
    state: ClusterState, tx: Transaction, req: controller_pb2.RegisterNodeRequest, now: int
) -> None:
    """Recovered batch jobs of this node that it never got (see _reconcile_after_register)."""
    known = set(req.running_jobs) | set(req.finished_jobs)
    for job_id in sorted(state.unconfirmed):
        job = state.jobs.get(job_id)
        if job is None or job.state != jobs_pb2.RUNNING:
            state.unconfirmed.discard(job_id)
            continue
        if job.batch_host != req.name:
            continue
        state.unconfirmed.discard(job_id)
        if job_id in known:
            continue
        log.warning(
            "batch job %d missing from its node %s: %s",
            job_id,
            req.name,
            "requeued" if job.requeue else "NODE_FAIL",
        )
        for a in job.allocation:
            other = state.nodes.get(a.node)
            if a.node != req.name and other is not None and other.available:
                state.terminate(tx, other, job_id, 0, "missing")
        if job.requeue:
            requeue(state, tx, job, now, jobs_pb2.NODE_FAIL, now, ran=False)
        else:
            finish(state, job, jobs_pb2.NODE_FAIL, 0, 0, now)
        tx.save(job)


def _terminate_orphans(state: ClusterState, tx: Transaction, name: str, running: Iterable[int]) -> int:
    """TerminateJob for what node `name` says it runs of jobs the controller does not have running
    there (ended, requeued, or running elsewhere now: while the node was unreachable); how many."""
    node = state.nodes[name]
    count = 0
    for job_id in running:
        known = state.jobs.get(job_id)
        if (
            known is not None
            and known.state in ACTIVE_STATES
            and any(a.node == name for a in known.allocation)
        ):
            continue
        log.info("node %s still runs job %d, which has ended there: terminating it", name, job_id)
        state.terminate(tx, node, job_id, state.cfg.kill_wait, "orphan")
        count += 1
    return count


def node_contact(state: ClusterState, name: str, ok: bool, running: Iterable[int] | None = None) -> None:
    """Result of a ping: refresh contact time, or notice the node stopped answering.

    What a node says it runs of jobs the controller has ended there is terminated. A DOWN node
    that answers again returns to service as ReturnToService says (1: DOWN for not responding,
    2: DOWN for any reason, once it had stopped responding), as a registration would, once it
    runs nothing of ended jobs (their CPUs are not free before)."""
    with state.transaction() as tx:
        node = state.nodes.get(name)
        if node is None:
            return
        if not ok:
            if node.registered and not node.info.reboot_issued:  # a rebooting node is away: no news
                node.info.not_responding = True
            return
        node.last_contact = state.clock()
        info = node.info
        orphans = (
            _terminate_orphans(state, tx, name, running) if running is not None and node.registered else 0
        )
        rts = state.cfg.return_to_service
        returns = not info.reboot_issued and (
            (rts == 2 and info.not_responding) or (rts == 1 and info.reason == NOT_RESPONDING)
        )
        if info.base_state == "DOWN" and node.registered and running is not None and not orphans and returns:
            log.info("node %s responds again: returned to service", name)
            info.base_state = "IDLE"
            info.reason = ""
            info.reason_uid = 0
            info.reason_time = 0
            info.not_responding = False
            tx.save_node(node)
            state.wake.set()
        if info.not_responding and node.registered and not (info.base_state == "DOWN" and orphans):
            info.not_responding = False
            state.wake.set()


def down_unresponsive(state: ClusterState, tx: Transaction, now: int) -> None:
    """Housekeeping: a registered node silent for SlurmdTimeout goes DOWN ("Not responding") and its
    jobs end NODE_FAIL or are requeued."""
    timeout = state.cfg.slurmd_timeout
    if timeout <= 0:
        return
    wall = state.clock()
    for node in state.nodes.values():
        info = node.info
        if not node.registered or info.base_state == "DOWN":
            continue
        if wall - node.last_contact > timeout:
            log.warning("node %s not responding for %ds: DOWN", info.name, timeout)
            info.base_state = "DOWN"
            info.not_responding = True
            info.reason = NOT_RESPONDING
            info.reason_time = now
            info.reason_uid = 0
            info.reason_user = "slurm"
            tx.save_node(node)
            fail_jobs_on(state, tx, info.name, now)


def nodes_to_ping(state: ClusterState) -> list[cluster_pb2.NodeInfo]:
    with state.reading():
        return [n.info for n in state.nodes.values() if n.info.base_state != "FUTURE"]
