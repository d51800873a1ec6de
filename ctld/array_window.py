"""An array's alike pending tasks past what one cycle could start or reserve for: kept out of it.

22.05 keeps an array's pending tasks as one record until a task starts, so its cycle costs the same
for 10 pending tasks as for 10,000. shoal keeps a record per task (squeue, scontrol, accounting and
requeue read them), and a cycle over all of them costs O(pending): the snapshot, the queue order,
the priorities and the verdicts walk every task, so a 10,000-task array's stream of ends made
O(N^2) work. So the cycle sees, of each run of an array's pending tasks that ask alike
(ctld.sched.siblings: all but their ids), only the first `room` in job-id order:

- as many as could start now: each start takes at least one CPU, so the CPUs free now, or every
  CPU when preemption (PreemptType=preempt/qos, partition_prio) could free what running jobs hold;
- the backfill reservations its tasks may get (bf_max_job_array_resv; bf_max_job_test while
  starving jobs, SchedulerParameters shoal_starve_*, reserve regardless of it);
- one more, the *lead*: a task the cycle finds no room (or no reservation) for.

The core gives each later alike task the answer the one before it got while nothing moved
(siblings.py), so leaving them out changes no start, reservation or other job's answer; they take
the lead's reason, priority and planned start (`answer`). Guaranteed quota (borrowing.py) counts
every waiting task, so with cohorts configured, and with the scheduler's shortcuts off (the tests'
plain way), every task is seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ctld.record import JobRecord
from ctld.sched import memo, placement, preemption, starve
from ctld.sched import model as m
from ctld.sched.borrowing import Cohorts
from ctld.sched.priority import fifo_priority
from ctld.sched.siblings import ask_number


@dataclass(frozen=True, slots=True)
class Followers:
    """An array's alike pending tasks the cycle did not see, and the seen task they follow."""

    lead: JobRecord
    tasks: tuple[tuple[JobRecord, m.JobRequest], ...]


def room(
    cpus: Mapping[str, int],
    usage: Mapping[str, m.NodeUsage],
    config: m.Config,
    limits: m.AccountingLimits | None,
) -> int | None:
    """How many alike tasks of one array a cycle sees (`cpus`: each node's CPUs; `usage`: what active
    jobs hold on it); None: all of them."""
    if not placement.SHORTCUTS or (limits is not None and _cohorts(limits.assocs)):
        return None
    if preemption.enabled_by(config):
        free = sum(cpus.values())
    else:
        free = sum(max(0, total - len(usage[name].cpu_ids)) for name, total in cpus.items())
    reservations = config.bf_max_job_test if starve.enabled(config) else max(0, config.bf_max_job_array_resv)
    return free + reservations + 1


@memo.by_identity
def _cohorts(assocs: tuple[m.AssocLimits, ...]) -> bool:
    """Whether any association lends or borrows guaranteed quota (the limits as dbd last pushed them)."""
    return Cohorts(assocs).enabled


def split(
    pending: Iterable[tuple[JobRecord, m.JobRequest]], seen: int | None
) -> tuple[list[tuple[JobRecord, m.JobRequest]], list[Followers]]:
    """The tasks the cycle sees (every job that is not an array task, the first `seen` of each run of
    an array's alike tasks) in their order, and the rest behind their leads."""
    pending = list(pending)
    if seen is None:
        return pending, []
    runs: dict[tuple[int, int, int | None], list[tuple[JobRecord, m.JobRequest]]] = {}
    for job, req in pending:
        if req.array_job_id:
            runs.setdefault((req.array_job_id, ask_number(req), req.admin_priority), []).append((job, req))
    left_out: set[int] = set()
    followers = []
    for run in runs.values():
        if len(run) <= seen:
            continue
        run.sort(key=lambda pair: pair[0].job_id)
        followers.append(Followers(lead=run[seen - 1][0], tasks=tuple(run[seen:])))
        left_out.update(job.job_id for job, _ in run[seen:])
    if not left_out:
        return pending, []
    return [pair for pair in pending if pair[0].job_id not in left_out], followers


def answer(followers: Iterable[Followers], multifactor: bool, plans_kept: bool, now: int) -> None:
    """The left-out tasks take their lead's answer (reason, priority, backfill's plan); under
    priority/basic each its own priority (older first, as the seen ones)."""
    for group in followers:
        lead = group.lead
        evaluated = lead.last_sched_eval == now
        for job, req in group.tasks:
            # (a record's assignment is bookkept: read first, thousands of tasks a cycle)
            if job.state_reason != lead.state_reason:
                job.state_reason = lead.state_reason
            if evaluated and job.last_sched_eval != now:
                job.last_sched_eval = now
            prio = lead.priority if multifactor or req.admin_priority is not None else fifo_priority(req)
            if job.priority != prio:
                job.priority = prio
            if not plans_kept:
                if job.start_time != lead.start_time:
                    job.start_time = lead.start_time
                if job.sched_nodes:
                    job.sched_nodes = ""
