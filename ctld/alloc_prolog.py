"""A started job's way to its batch launch, and PrologFlags=Alloc: the Prolog on every allocated node
when the job starts, as Slurm 22.05 runs it.

Without Alloc a batch job is launched at once (after PrologSlurmctld, if any) and each node runs its
Prolog at the job's first step there. With Alloc (and Contain, NoHold, which imply it) ctld asks every
node of the job to run its Prolog (RunProlog) as soon as the job starts: the job shows RUNNING with
Reason=Prolog, salloc waits (unless NoHold) and the batch script is launched only when every node's
Prolog has succeeded (DeferBatch's behaviour, shoal's one way). A node whose Prolog fails is drained
(Reason "Prolog error"); the batch job goes back to the queue held, as when the Prolog fails at the
launch (ctld.job_hooks), and an interactive allocation ends FAILED. Contain adds the job's `.extern`
step to accounting (ctld.accounting) and noded makes its extern cgroup.
"""

from __future__ import annotations

import logging
from functools import partial

from ctld import job_hooks, record
from ctld.job_lifecycle import launch_failed
from ctld.launch import batch_request, sign_credential
from ctld.record import JobRecord
from ctld.sched import reasons
from ctld.state import ClusterState, Transaction
from ctld.transitions import end_by_node_failure, finish, requeue
from shoal import hostlist
from shoal.conf import SlurmConfig
from shoal.v1 import jobs_pb2, node_pb2

log = logging.getLogger("shoal.ctld")

PROLOG = "Prolog"  # the Reason of a running job whose Prolog runs (22.05: JobState=RUNNING Reason=Prolog)


def at_allocation(cfg: SlurmConfig) -> bool:
    return "ALLOC" in cfg.prolog_flags


def start(state: ClusterState, tx: Transaction, job: JobRecord) -> None:
    """A job the scheduler just started: its Prologs go out (Alloc), or its batch script does."""
    cfg = state.cfg
    if not at_allocation(cfg):
        if job.spec.batch:
            launch_batch(state, tx, job)
        return
    nodes = hostlist.expand(job.nodes)
    job.prolog_pending = list(nodes)
    job.prolog_nohold = "NOHOLD" in cfg.prolog_flags
    job.extern_step = "CONTAIN" in cfg.prolog_flags
    job.state_reason = PROLOG
    send_prologs(state, tx, job, nodes)


def send_prologs(state: ClusterState, tx: Transaction, job: JobRecord, nodes: list[str]) -> None:
    """RunProlog on `nodes`, after the change commits (also what a restarted ctld sends again: a node
    that ran it answers at once)."""
    cfg = state.cfg
    request = node_pb2.RunPrologRequest(
        job=record.wire(job),
        credential=sign_credential(state, job),
        cluster_name=cfg.cluster_name,
        slurm_conf=str(cfg.path),
        contain=job.extern_step,
    )
    for name in nodes:
        node = state.nodes.get(name)
        if node is None:
            continue
        one = node_pb2.RunPrologRequest()
        one.CopyFrom(request)
        one.node = name
        on_done = partial(prolog_done, state, job.job_id, job.restarts, name)
        tx.after(partial(state.actions.run_prolog, node.info, one, on_done))


def resume(state: ClusterState) -> None:
    """A restarted ctld asks again for the Prologs it had not heard the end of (a node that finished
    one answers at once; one still running it answers when it ends)."""
    with state.transaction() as tx:
        for job in state.jobs.values():
            if job.state == jobs_pb2.RUNNING and job.prolog_pending:
                send_prologs(state, tx, job, list(job.prolog_pending))


def prolog_done(
    state: ClusterState, job_id: int, run: int, node_name: str, error: str, unreachable: bool
) -> None:
    """A node answered RunProlog ("" = the Prolog succeeded)."""
    with state.transaction() as tx:
        job = state.jobs.get(job_id)
        if (
            job is None
            or job.state != jobs_pb2.RUNNING
            or job.restarts != run
            or node_name not in job.prolog_pending
        ):
            return  # cancelled meanwhile, or an answer for an earlier run
        now = state.now()
        if error:
            _failed(state, tx, job, node_name, error, unreachable, now)
        else:
            job.prolog_pending = [n for n in job.prolog_pending if n != node_name]
            if not job.prolog_pending:
                if job.state_reason == PROLOG:
                    job.state_reason = reasons.NONE
                if job.spec.batch:
                    launch_batch(state, tx, job)
        tx.save(job)
    state.wake.set()


def _failed(
    state: ClusterState,
    tx: Transaction,
    job: JobRecord,
    node_name: str,
    error: str,
    unreachable: bool,
    now: int,
) -> None:
    """The node is drained (or was lost); the job goes back to the queue (batch) or ends; whatever
    started of it on its nodes is ended there."""
    node = state.nodes.get(node_name)
    nodes = [state.nodes[a.node] for a in job.allocation if a.node in state.nodes]
    if unreachable:
        log.warning("job %d: node %s unreachable for its Prolog: %s", job.job_id, node_name, error)
        end_by_node_failure(state, tx, job, now)
    else:
        log.error("job %d: %s: %s", job.job_id, node_name, error)
        if node is not None:
            job_hooks.drain(node.info, job_hooks.PROLOG_ERROR, now, error)
            tx.save_node(node)
        if job.spec.batch:
            requeue(state, tx, job, now, ended_as=jobs_pb2.REQUEUED, ended_at=now)
            if "nohold_on_prolog_fail" not in state.cfg.scheduler_parameters:
                job_hooks.hold_requeued(job)
        else:
            finish(state, job, jobs_pb2.FAILED, 1, 0, now)
    for other in nodes:
        if other.registered and not other.info.not_responding:
            state.terminate(tx, other, job.job_id, state.cfg.kill_wait, "ended")


def launch_batch(state: ClusterState, tx: Transaction, job: JobRecord) -> None:
    """Launch the batch script on its host after the change commits, once PrologSlurmctld (if any) has
    succeeded (ctld.job_hooks); its failure requeues the job."""
    node = state.nodes[job.batch_host]
    launch = partial(
        state.actions.launch, node.info, batch_request(state, job), partial(launch_failed, state)
    )
    tx.after(
        partial(
            job_hooks.launch_after_prolog_slurmctld,
            state.cfg,
            job,
            launch,
            partial(_prolog_slurmctld_failed, state, job.job_id),
        )
    )


def _prolog_slurmctld_failed(state: ClusterState, job_id: int, message: str) -> None:
    launch_failed(state, job_id, message, node_down=False, requeue_job=True)
