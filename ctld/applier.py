"""The applier of the core's decisions: one scheduling cycle over the cluster state.

It builds the snapshot, runs `ctld.sched.cycle.run_cycle`, and applies what comes back — pending
reasons and priorities, backfill's planned starts, the starts themselves (ctld/decisions.py: the
same code `shoal sim` runs), preemptions — in one transaction; the launches go to the nodes after it
commits.
"""

from __future__ import annotations

from functools import partial

from ctld import decisions, job_hooks, preempt, snapshot
from ctld import jobs as jobrec
from ctld.errors import SlurmError
from ctld.job_lifecycle import launch_failed
from ctld.launch import batch_request
from ctld.record import JobRecord
from ctld.sched import cycle as sched_cycle
from ctld.sched import model as m
from ctld.sched import priority as sched_priority
from ctld.sched import reasons
from ctld.sched.priority import CALCULATE_RUNNING, MULTIFACTOR
from ctld.state import ClusterState
from shoal.outpath import resolve_streams
from shoal.v1 import jobs_pb2


def schedule(state: ClusterState) -> int:
    """Run one cycle of the core and apply its decisions; returns how many batch jobs it launched."""
    now = state.now()
    launched = 0
    with state.transaction() as tx:
        pending: list[m.JobRequest] = []
        by_id: dict[int, JobRecord] = {}
        for job in state.jobs.values():
            if job.state != jobs_pb2.PENDING or job.held:
                continue  # a held job keeps its JobHeld* reason and never starts
            req = state.request(job)
            if req is None:
                job.state_reason = reasons.BAD_CONSTRAINTS
                continue
            pending.append(req)
            by_id[job.job_id] = job
        if not pending:
            _recalculate_running(state, None, now)
            return 0
        state.accrue_usage()
        snap = snapshot.build(state, pending)
        _recalculate_running(state, snap, now)
        result = sched_cycle.run_cycle(snap, now)
        decisions.apply_verdicts(by_id, result, now)  # reasons, priorities, backfill's plan
        preempt_config = state.sched_config.preempt
        node_types = {n: rt.gpu_types.get(0, "") for n, rt in state.nodes.items()}
        for start in result.starts:
            job = by_id[start.job_id]
            decisions.apply_start(job, start, now, node_types)
            if preempt_config.type != "preempt/none":
                job.preempt_eligible_time = now + preempt_config.exempt_time_s
            job.std_out, job.std_err, job.std_in = resolve_streams(job, job.batch_host)
            job.last_sched_eval = now
            tx.save(job)
            if not job.spec.batch:
                continue  # an salloc/srun allocation: its own command runs steps in it
            node = state.nodes[job.batch_host]
            launch = partial(
                state.actions.launch, node.info, batch_request(state, job), partial(launch_failed, state)
            )
            # once PrologSlurmctld, if any, has succeeded (ctld.job_hooks); its failure requeues the job
            tx.after(
                partial(
                    job_hooks.launch_after_prolog_slurmctld,
                    state.cfg,
                    job,
                    launch,
                    partial(_prolog_slurmctld_failed, state, job.job_id),
                )
            )
            launched += 1
        tx.save(*preempt.apply_preemptions(state, tx, result.preemptions, now))
    return launched


def _prolog_slurmctld_failed(state: ClusterState, job_id: int, message: str) -> None:
    launch_failed(state, job_id, message, node_down=False, requeue_job=True)


def _recalculate_running(state: ClusterState, snap: m.Snapshot | None, now: int) -> None:
    """PriorityFlags=CALCULATE_RUNNING: running jobs' priorities follow age and fair-share (see
    priority.running_priorities); an admin's Priority= stays. Called inside the cycle's transaction."""
    conf = state.sched_config.priority
    if conf.type != MULTIFACTOR or CALCULATE_RUNNING not in conf.flags:
        return
    running = {j.job_id: j for j in state.jobs.values() if j.state == jobs_pb2.RUNNING and not j.priority_set}
    reqs: list[m.JobRequest] = []
    for job in running.values():
        try:
            reqs.append(jobrec.job_request(job, state.nodes, state.cfg))
        except (SlurmError, ValueError):
            continue
    if not reqs:
        return
    if snap is None:
        state.accrue_usage()
        snap = snapshot.build(state, [])
    for job_id, prio in sched_priority.running_priorities(snap, reqs, now).items():
        running[job_id].priority = prio
