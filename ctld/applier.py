"""The applier of the core's decisions: one scheduling cycle over the cluster state.

It builds the snapshot, runs `ctld.sched.cycle.run_cycle`, and applies what comes back — pending
reasons and priorities, backfill's planned starts, preemptions and resumes, the starts themselves
(ctld/decisions.py: the same code `shoal sim` runs) — in one transaction; the launches (and suspends,
resumes) go to the nodes after it commits.
"""

from __future__ import annotations

import logging

from ctld import alloc_prolog, array_window, decisions, job_suspend, node_reboot, preempt, snapshot
from ctld import jobs as jobrec
from ctld.errors import SlurmError
from ctld.record import JobRecord
from ctld.sched import cycle as sched_cycle
from ctld.sched import model as m
from ctld.sched import priority as sched_priority
from ctld.sched import reasons
from ctld.sched.priority import CALCULATE_RUNNING, MULTIFACTOR
from ctld.state import ClusterState, Transaction
from shoal.outpath import resolve_streams
from shoal.v1 import jobs_pb2

log = logging.getLogger("shoal.ctld")


def backfill_due(state: ClusterState) -> bool:
    """SchedulerParameters bf_interval: the backfill pass runs in a cycle only once that many seconds
    have passed since the last one (the main pass runs in every cycle), as Slurm's backfill loop; or
    longer after a costly pass (ClusterState.backfill_gap_s)."""
    gap = state.backfill_gap_s()
    return gap is not None and state.clock() - state.last_backfill >= gap


def backfill_wait_s(state: ClusterState) -> float | None:
    """Seconds until the backfill pass the last cycle's pending jobs wait for is due (the scheduler
    loop wakes for it); None when none waits."""
    gap = state.backfill_gap_s()
    if not state.backfill_owed or gap is None:
        return None
    return max(0.0, state.last_backfill + gap - state.clock())


def schedule(state: ClusterState) -> int:
    """Run one cycle of the core and apply its decisions; returns how many batch jobs it launched."""
    now = state.now()
    launched = 0
    with state.transaction() as tx:
        waiting: list[tuple[JobRecord, m.JobRequest]] = []
        resumable = False  # a job suspended by preemption may resume though nothing is pending
        for job in state.jobs.values():
            resumable = resumable or (job.gang_suspended and job.state == jobs_pb2.SUSPENDED)
            if job.state != jobs_pb2.PENDING or job.held:
                continue  # a held job keeps its JobHeld* reason and never starts
            req = state.request(job)
            if req is None:
                job.state_reason = reasons.BAD_CONSTRAINTS
                continue
            waiting.append((job, req))
        if not waiting and not resumable:
            state.backfill_owed = False
            _recalculate_running(state, None, now)
            return 0
        state.accrue_usage()
        node_usage = snapshot.usage(state)
        cpus = {name: rt.conf.cpus for name, rt in state.nodes.items()}
        seen = array_window.room(cpus, node_usage, state.sched_config, state.accounting.limits())
        waiting, followers = array_window.split(waiting, seen)
        by_id = {job.job_id: job for job, _ in waiting}
        snap = snapshot.build(state, [req for _, req in waiting], node_usage=node_usage)
        _recalculate_running(state, snap, now)
        with_backfill = state.sched_config.scheduler != "sched/backfill" or backfill_due(state)
        result = sched_cycle.run_cycle(snap, now, with_backfill)
        if result.plans_kept:
            state.backfill_owed = state.bf_interval is not None
        elif state.sched_config.scheduler == "sched/backfill":
            state.last_backfill = state.clock()
            state.backfill_passes += 1
            state.backfill_owed = False
        decisions.apply_verdicts(by_id, result, now)  # reasons, priorities, backfill's plan
        multifactor = state.sched_config.priority.type == MULTIFACTOR
        array_window.answer(followers, multifactor, result.plans_kept, now)  # the tasks left out
        # Victims first: a suspended one is stopped before its preemptor's launch reaches the node.
        tx.save(*preempt.apply_preemptions(state, tx, result.preemptions, now))
        tx.save(*_resume(state, tx, result.resumes, now))
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
            node_reboot.job_started(state, tx, job)
            # its Prologs first (PrologFlags=Alloc), else the batch script at once (ctld.alloc_prolog)
            alloc_prolog.start(state, tx, job)
            if job.spec.batch:
                launched += 1
    return launched


def _resume(state: ClusterState, tx: Transaction, job_ids: tuple[int, ...], now: int) -> list[JobRecord]:
    """Resume the jobs suspended by preemption whose CPUs/GPUs are free again (22.05's gang scheduler)."""
    resumed = []
    for job_id in job_ids:
        job = state.jobs.get(job_id)
        if job is not None and job.state == jobs_pb2.SUSPENDED and job.gang_suspended:
            log.info("job %d resumed: its preemptor has ended", job_id)
            job_suspend.resume(state, tx, job, now)
            resumed.append(job)
    return resumed


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
