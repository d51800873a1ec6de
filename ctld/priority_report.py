"""GetPriorities (sprio) and GetShares (sshare): the pending jobs' factors and the associations' shares.

Both read the cluster state under its lock (and write nothing: fair-share usage is accrued in memory,
saved by housekeeping); the numbers come from the pure core (priority.py, fairshare.py) so sprio shows
exactly what the scheduler used.
"""

from __future__ import annotations

from ctld import privacy, snapshot
from ctld.fairshare_usage import job_tres
from ctld.record import JobRecord
from ctld.sched import priority, reasons
from ctld.sched.fairshare import ShareAssoc, ShareRow
from ctld.sched.model import PriorityConfig
from ctld.show_config import tracked_tres
from ctld.state import Caller, ClusterState, user_name
from shoal.v1 import controller_pb2 as pb
from shoal.v1 import jobs_pb2

# reasons of jobs the scheduler does not consider yet (see _listed)
WAITING_FOR_OTHERS = frozenset({reasons.DEPENDENCY, reasons.DEPENDENCY_NEVER})


def get_priorities(
    state: ClusterState, req: pb.GetPrioritiesRequest, caller: Caller | None = None
) -> pb.GetPrioritiesResponse:
    """sprio's rows; under PrivateData=jobs a user's own jobs only (22.05's sprio -j of another's job
    finds none)."""
    conf = state.sched_config.priority
    out = pb.GetPrioritiesResponse(weights=_weights(conf), multifactor=conf.type == priority.MULTIFACTOR)
    if not out.multifactor:
        return out
    now = state.now()
    with state.reading():
        state.accrue_usage()
        only = privacy.viewer(state, caller)
        pending = [j for j in state.jobs.values() if _listed(j, now) and privacy.sees(only, j)]
        reqs = [r for r in (state.request(j) for j in pending) if r is not None]
        snap = snapshot.build(state, reqs)
        ctx = priority.cluster_context(snap)
        parts = {p.name: p for p in snap.partitions}
        arrays_seen: set[int] = set()
        for job_req in sorted(snap.pending, key=lambda r: r.job_id):
            job = state.jobs[job_req.job_id]
            if job.array_job_id:  # an array's pending tasks are one row, under the array's id
                if job.array_job_id in arrays_seen:
                    continue
                arrays_seen.add(job.array_job_id)
            for name in job_req.partitions:
                part = parts.get(name)
                if part is None:
                    continue
                factors = priority.job_factors(job_req, part, now, conf, ctx)
                weighted = priority.weigh(factors, conf)
                out.jobs.append(
                    pb.JobPriority(
                        job_id=job.array_job_id or job.job_id,
                        partition=name,
                        user_name=job.user_name,
                        user_id=job.user_id,
                        account=job.account,
                        priority=job.priority if job_req.admin_priority is not None else weighted.priority,
                        weighted=pb.PriorityFactors(
                            age=weighted.age,
                            assoc=weighted.assoc,
                            fairshare=weighted.fairshare,
                            job_size=weighted.job_size,
                            partition=weighted.partition,
                            qos=weighted.qos,
                            nice=weighted.nice,
                            tres=[f"{n}={v:g}" for n, v in weighted.tres],
                            site=weighted.site,
                        ),
                        normalized=pb.PriorityFactors(
                            age=factors.age,
                            assoc=factors.assoc,
                            fairshare=factors.fairshare,
                            job_size=factors.job_size,
                            partition=factors.partition,
                            qos=factors.qos,
                            nice=factors.nice,
                            tres=[f"{n}={v:g}" for n, v in factors.tres],
                            site=factors.site,
                        ),
                    )
                )
    return out


def _listed(job: JobRecord, now: int) -> bool:
    """sprio shows the jobs the scheduler may start: pending, not held, not waiting for a dependency or
    a begin time (22.05 leaves those out)."""
    return (
        job.state == jobs_pb2.PENDING
        and not job.held
        and job.spec.begin_time <= now
        and job.state_reason not in WAITING_FOR_OTHERS
    )


def get_shares(
    state: ClusterState, req: pb.GetSharesRequest, caller: Caller | None = None
) -> pb.GetSharesResponse:
    now = state.now()
    with state.reading():
        state.accrue_usage()
        tree = state.accounting.share_tree()
        rows = state.shares.rows(tree)
        out = pb.GetSharesResponse(fair_tree=state.shares.fair_tree)
        # 22.05 keeps the running jobs' TRES-minutes only where it enforces limits: with
        # AccountingStorageEnforce=associations alone TRESRunMins stays 0 (measured over a 5.6 min job)
        running = [
            (state.accounting.assoc_id(job), run_tres_seconds(job, now))
            for job in state.jobs.values()
            if job.state in (jobs_pb2.RUNNING, jobs_pb2.SUSPENDED) and job.start_time
        ]
        if not state.accounting.enforce_limits:
            running = []
        limits = state.accounting.grp_tres_mins()
        names = tracked_tres(state.cfg)
    run_secs = per_subtree(tree, running)
    depths = {id(row): row.depth for row in rows}
    if privacy.private(state, caller, privacy.USAGE):
        assert caller is not None
        depths = _private_depths(rows, user_name(caller.uid), state.coordinated(caller))
    for row in rows:
        if id(row) not in depths:
            continue
        out.rows.append(
            pb.ShareRow(
                account=row.account,
                user=row.user,
                depth=depths[id(row)],
                raw_shares=row.raw_shares,
                norm_shares=row.norm_shares,
                raw_usage=row.raw_usage,
                norm_usage=row.norm_usage,
                effective_usage=row.effective_usage,
                level_fs=row.level_fs,
                fairshare=row.fairshare,
                grp_tres_mins=tres_text(limits.get(row.id, ""), names),
                tres_run_mins=",".join(f"{n}={int(run_secs.get(row.id, {}).get(n, 0)) // 60}" for n in names),
            )
        )
    return out


def _private_depths(rows: list[ShareRow], user: str, accounts: frozenset[str]) -> dict[int, int]:
    """PrivateData=usage, as 22.05's sshare: a user sees their own rows and the accounts they coordinate
    with those accounts' users; each row is indented under the shown rows above it only (a user's row
    of an account not shown stands at the left)."""
    shown: dict[int, int] = {}
    above: list[tuple[int, bool]] = []  # (depth, shown) of the rows this one sits under
    for row in rows:
        while above and above[-1][0] >= row.depth:
            above.pop()
        visible = row.account in accounts or (bool(row.user) and row.user == user)
        if visible:
            shown[id(row)] = sum(1 for _, seen in above if seen)
        above.append((row.depth, visible))
    return shown


def run_tres_seconds(job: JobRecord, now: int) -> dict[str, float]:
    """TRES-seconds a running job has left before its time limit (TRESRunMins x 60); a job without a
    limit has none counted."""
    if job.time_limit_min <= 0:
        return {}
    left = max(0, job.start_time + job.time_limit_min * 60 + job.suspended_secs - now)
    tres = job_tres(job)
    tres["billing"] = tres["cpu"]  # as its TRES list (tres_alloc) counts it
    return {name: count * left for name, count in tres.items()}


def per_subtree(
    tree: list[ShareAssoc], charges: list[tuple[int, dict[str, float]]]
) -> dict[int, dict[str, float]]:
    """Each association's total of `charges` (by association id) over itself and every one below it."""
    parent = {a.id: a.parent_id for a in tree}
    out: dict[int, dict[str, float]] = {}
    for assoc, amounts in charges:
        seen: set[int] = set()
        while assoc and assoc not in seen:
            seen.add(assoc)
            total = out.setdefault(assoc, {})
            for name, value in amounts.items():
                total[name] = total.get(name, 0.0) + value
            assoc = parent.get(assoc, 0)
    return out


def tres_text(text: str, names: list[str]) -> str:
    """A TRES list ("gres/gpu=600,cpu=6000") in the tracked TRES' order, as 22.05 prints limits."""
    items = [i.strip() for i in text.split(",") if i.strip()]
    order = {n: k for k, n in enumerate(names)}
    return ",".join(sorted(items, key=lambda i: order.get(i.partition("=")[0].lower(), len(order))))


def _weights(conf: PriorityConfig) -> pb.PriorityFactors:
    return pb.PriorityFactors(
        age=conf.weight_age,
        assoc=conf.weight_assoc,
        fairshare=conf.weight_fairshare,
        job_size=conf.weight_job_size,
        partition=conf.weight_partition,
        qos=conf.weight_qos,
        tres=[f"{n}={v:g}" for n, v in conf.weight_tres],
    )
