"""Why (`shoal why JOBID`, restd's /shoal/v1/why/{id}): a job's wait in plain words.

A read: under the state's lock (nothing is saved; fair-share usage is accrued in memory, as sprio
does), the snapshot the cycle would use now goes to the core's explainer (ctld/sched/explain.py),
which runs the cycle itself; this module only finds the job, checks who asks, and words the answer.
A user may ask about their own jobs, an operator about any: another user's job is an unknown one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctld import snapshot
from ctld.errors import SlurmError
from ctld.job_select import select
from ctld.record import JobRecord
from ctld.sched import explain as sched_explain
from ctld.sched import reasons
from ctld.sched.explain import Explanation, Shortage
from ctld.state import Caller, ClusterState, user_name
from shoal import hostlist
from shoal.sizefmt import format_size_mb
from shoal.states import FINISHED_STATES, job_state_name
from shoal.timefmt import format_timestamp
from shoal.v1 import controller_pb2 as pb
from shoal.v1 import jobs_pb2

INVALID_JOB_ID = "Invalid job id specified"
_RESOURCE_WORDS = {"cpu": "CPUs", "mem": "memory", "gpu": "GPUs", "node": "whole idle nodes (--exclusive)"}


@dataclass(frozen=True, slots=True)
class _Asked:
    """What the words need of the job's record, taken under the lock (the explainer runs after it)."""

    job_id: int
    reason: str
    held: bool
    held_by_admin: bool
    begin_time: int
    name: str
    others: dict[int, str]  # the jobs its dependency names -> their state


def why(state: ClusterState, req: pb.WhyRequest, caller: Caller) -> pb.WhyResponse:
    """The snapshot is taken under the lock; the explainer (a cycle per suggestion tried) runs on
    it after the lock is released, so the scheduler and other RPCs do not wait for it."""
    with state.reading():
        found = select(state, [req.job_id])[0][1] if req.job_id.strip() else []
        if not found:
            raise SlurmError(INVALID_JOB_ID)
        # an array named by its id: its first pending task speaks for it (squeue shows them as one)
        job = next((j for j in found if j.state == jobs_pb2.PENDING), found[0])
        if not state.may_manage(caller, job):  # its owner, an operator, a coordinator of its account
            raise SlurmError(INVALID_JOB_ID)  # as slurmrestd and the commands do for a job not visible
        now = state.now()
        out = pb.WhyResponse(
            job_id=job.job_id, state=job_state_name(job.state), reason=job.state_reason, now=now
        )
        if job.state != jobs_pb2.PENDING:
            _not_pending(job, out)
            return out
        target = state.request(job)
        if target is None:
            out.reason = reasons.BAD_CONSTRAINTS
            out.text = (
                f"Job {job.job_id} is PENDING, Reason: {out.reason}: "
                "its request cannot be met by this configuration."
            )
            return out
        state.accrue_usage()
        pending = [target]
        for other in state.jobs.values():
            if other.state == jobs_pb2.PENDING and not other.held and other.job_id != job.job_id:
                req_other = state.request(other)
                if req_other is not None:
                    pending.append(req_other)
        snap = snapshot.build(state, pending)
        named = {i for term in target.dependency.terms for i in term.job_ids}
        asked = _Asked(
            job_id=job.job_id,
            reason=job.state_reason,
            held=job.held,
            held_by_admin=job.held_by_admin,
            begin_time=job.spec.begin_time,
            name=job.spec.name,
            others={i: job_state_name(state.jobs[i].state) for i in named if i in state.jobs},
        )
        backfill = state.sched_config.scheduler == "sched/backfill"
    explained = sched_explain.explain(snap, asked.job_id, now)
    assert explained is not None  # the job is in the snapshot's pending jobs
    _fill(asked, explained, out, backfill)
    return out


def _not_pending(job: JobRecord, out: pb.WhyResponse) -> None:
    nodes = job.nodes
    if job.state in FINISHED_STATES:
        out.text = f"Job {job.job_id} has ended: {out.state} at {format_timestamp(job.end_time)}. Nothing to wait for."
        return
    out.nodes = nodes
    out.partition = job.partition
    out.end_time = job.end_time if job.time_limit_min > 0 else 0
    until = (
        f"until {format_timestamp(job.end_time)} (its time limit)" if out.end_time else "with no time limit"
    )
    out.text = (
        f"Job {job.job_id} is {out.state} on {nodes or 'no node yet'} in partition {job.partition}, "
        f"since {format_timestamp(job.start_time)}, {until}."
    )


def _fill(job: _Asked, ex: Explanation, out: pb.WhyResponse, backfill: bool) -> None:
    now = out.now
    out.reason = job.reason if job.held and job.reason else ex.reason
    out.partition = ex.partition
    out.starts_now = ex.starts_now
    if ex.planned_start is not None:
        out.planned_start = ex.planned_start
        out.planned_nodes = hostlist.collect(ex.planned_nodes)
    lines: list[str] = []
    if ex.starts_now:
        out.reason = out.reason if out.reason not in ("", reasons.NONE) else reasons.NONE
        lines.append(
            f"Job {job.job_id} is PENDING, Reason: {out.reason}. Nothing holds it back now: the next "
            f"scheduling pass starts it on {out.planned_nodes} in partition {ex.partition}."
        )
        out.text = "\n".join(lines)
        return
    lines.append(f"Job {job.job_id} is PENDING, Reason: {out.reason}.")
    for wait in _waits(job, ex):
        out.waits_for.append(wait)
        lines.append(wait.text)
    if ex.ahead is not None:
        out.ahead = len(ex.ahead.job_ids)
    lines.append(_plan_line(ex, out, backfill))
    for s in ex.suggestions:
        out.suggestions.append(
            pb.WhySuggestion(change=s.change, planned_start=s.start, nodes=hostlist.collect(s.nodes))
        )
    if ex.suggestions:
        said = [
            f"{s.change} would start it {_at(s.start, now)} on {hostlist.collect(s.nodes)}"
            for s in ex.suggestions
        ]
        lines.append("Sooner: " + "; ".join(said) + ".")
    out.text = "\n".join(lines)


def _at(when: int, now: int) -> str:
    return "now" if when <= now else f"at {format_timestamp(when)}"


def _plan_line(ex: Explanation, out: pb.WhyResponse, backfill: bool) -> str:
    if ex.planned_start is not None:
        how = "backfill's plan" if backfill else "were nothing queued before it; sched/builtin plans no start"
        return f"Planned start: {format_timestamp(ex.planned_start)} on {out.planned_nodes} ({how})."
    if ex.unresolvable:
        return "Planned start: none until that changes."
    return (
        "Planned start: none yet (not within the backfill window, or it waits for jobs without a time limit)."
    )


def _waits(job: _Asked, ex: Explanation) -> list[pb.WhyWait]:
    out: list[pb.WhyWait] = []
    reason = ex.reason
    jid = job.job_id
    if reason == reasons.HELD_USER or (job.held and not job.held_by_admin):
        text = (
            f"It is held by its user (sbatch -H or scontrol hold): release it with `scontrol release {jid}`."
        )
        out.append(pb.WhyWait(kind="hold", text=text))
        return out
    if reason == reasons.HELD_ADMIN or job.held:
        text = f"It is held by an administrator: only an operator can release it (`scontrol release {jid}`)."
        out.append(pb.WhyWait(kind="hold", text=text))
        return out
    if reason == reasons.BEGIN_TIME:
        text = f"It may not start before {format_timestamp(job.begin_time)} (--begin)."
        out.append(pb.WhyWait(kind="begin", text=text))
    for dep in ex.dependencies:
        state_text = job.others.get(dep.job_id, "gone")
        if dep.kind == "singleton":
            text = f"It waits for its dependency singleton: another job of yours named {job.name!r} runs or is ahead."
        elif reason == reasons.DEPENDENCY_NEVER:
            text = (
                f"Its dependency {dep.kind}:{dep.job_id} can never be satisfied (job {dep.job_id} is {state_text}): "
                f"it will not start; cancel it (`scancel {jid}`)."
            )
        else:
            text = f"It waits for its dependency {dep.kind}:{dep.job_id} (job {dep.job_id} is {state_text})."
        out.append(
            pb.WhyWait(
                kind="dependency",
                text=text,
                dependency=dep.kind,
                job_ids=[dep.job_id] if dep.job_id else [],
                job_state=state_text,
            )
        )
    if reason == reasons.REQ_NODE_NOT_AVAIL:
        names = hostlist.collect(ex.required_unavailable) or "a node it asks for"
        text = f"It asks for {names} (-w), which takes no work now (down, drained or reserved)."
        out.append(pb.WhyWait(kind="nodes_down", text=text, nodes=hostlist.collect(ex.required_unavailable)))
    if reason == reasons.ARRAY_TASK_LIMIT:
        text = "Its array already runs as many tasks as its --array=...%N allows: it starts when one ends."
        out.append(pb.WhyWait(kind="limit", text=text))
    if ex.partition_problem:
        out.append(pb.WhyWait(kind="partition", text=f"It can never start as asked: {ex.partition_problem}."))
    if reason == reasons.RESERVATION:
        out.append(
            pb.WhyWait(kind="reservation", text=f"It waits for its reservation {ex.reservation} to start.")
        )
    elif reason == reasons.RESERVATION_DELETED:
        text = (
            f"Its reservation {ex.reservation} was deleted: it can never start; cancel it (`scancel {jid}`)."
        )
        out.append(pb.WhyWait(kind="reservation", text=text))
    elif reason in (reasons.RESERVED_FOR_MAINT, reasons.MAY_BE_RESERVED):
        text = "Nodes it could use are kept for a reservation over its run (`scontrol show reservation`)."
        out.append(pb.WhyWait(kind="reservation", text=text))
    if ex.limit is not None:
        lim = ex.limit
        users = f" by its jobs {', '.join(str(i) for i in lim.job_ids)}" if lim.job_ids else ""
        text = f"It waits for a limit of {lim.scope}: {lim.limit}, {lim.in_use} in use{users}; this job asks for {lim.asks}."
        out.append(
            pb.WhyWait(
                kind="limit",
                text=text,
                limit=lim.limit,
                scope=lim.scope,
                in_use=lim.in_use,
                needed=lim.asks,
                job_ids=list(lim.job_ids),
            )
        )
    elif reason not in _KNOWN and ex.unresolvable and not ex.partition_problem:
        out.append(pb.WhyWait(kind="limit", text=f"It waits for {reason}."))
    for short in ex.shortages:
        out.append(_shortage(short))
    if ex.down_nodes:
        names = hostlist.collect(ex.down_nodes)
        out.append(
            pb.WhyWait(kind="nodes_down", text=f"{names} take no work now (down or drained).", nodes=names)
        )
    if ex.ahead is not None:
        a = ex.ahead
        shown = ", ".join(str(i) for i in a.job_ids[:5]) + (" ..." if len(a.job_ids) > 5 else "")
        count = len(a.job_ids)
        why = f"job {a.top_job_id}'s priority {a.top_priority} against its {a.priority}"
        if a.tier != (0, 0):
            why = f"job {a.top_job_id}'s partition has PriorityTier {a.tier[0]} against its {a.tier[1]}"
        elif a.factors:
            why += ": " + ", ".join(f"{name} {top:.0f} vs {mine:.0f}" for name, top, mine in a.factors[:3])
        elif a.top_priority == a.priority:
            why += " (equal: it was submitted earlier)"
        text = f"{count} job{'s' if count > 1 else ''} rank{'' if count > 1 else 's'} ahead of it in its partition ({shown}): {why}."
        out.append(pb.WhyWait(kind="priority", text=text, job_ids=list(a.job_ids)))
    return out


_KNOWN = frozenset(
    {
        reasons.PRIORITY,
        reasons.RESOURCES,
        reasons.HELD_USER,
        reasons.HELD_ADMIN,
        reasons.BEGIN_TIME,
        reasons.DEPENDENCY,
        reasons.DEPENDENCY_NEVER,
        reasons.RESERVATION,
        reasons.RESERVATION_DELETED,
        reasons.RESERVED_FOR_MAINT,
        reasons.MAY_BE_RESERVED,
        reasons.REQ_NODE_NOT_AVAIL,
        reasons.ARRAY_TASK_LIMIT,
    }
)


def _shortage(short: Shortage) -> pb.WhyWait:
    kind = short.resource
    if kind.startswith("gpu:"):
        words = f"{kind.split(':', 1)[1]} GPUs"
    else:
        words = _RESOURCE_WORDS.get(kind, kind)
    nodes = hostlist.collect(short.nodes)
    amount = (lambda n: format_size_mb(n)) if kind == "mem" else str
    if kind == "node":
        text = f"It needs {words}; {nodes} {'is' if len(short.nodes) == 1 else 'are'} in use."
    else:
        text = (
            f"It needs {amount(short.needed)} {words} on a node; {nodes} "
            f"{'has' if len(short.nodes) == 1 else 'have'} at most {amount(short.free)} free."
        )
    holders = [
        pb.WhyHolder(
            job_id=h.job_id,
            user=user_name(h.user_id) if h.user_id >= 0 else "",
            nodes=hostlist.collect(h.nodes),
            end_time=h.end_time,
        )
        for h in short.holders
    ]
    if holders:
        said = [
            f"job {h.job_id}{f' ({h.user})' if h.user else ''} on {h.nodes} "
            + (f"until {format_timestamp(h.end_time)}" if h.end_time else "with no time limit")
            for h in holders[:4]
        ]
        more = f" and {len(holders) - 4} more" if len(holders) > 4 else ""
        text += " Held by " + ", ".join(said) + more + "."
    return pb.WhyWait(
        kind="resources",
        text=text,
        resource=kind,
        needed=short.needed,
        free=short.free,
        nodes=nodes,
        holders=holders,
    )
