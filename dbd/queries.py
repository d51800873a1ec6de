"""Read side for sacct and sreport: jobs with their steps, and usage summaries."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session

from dbd.ingest import JOB_FIELDS, STEP_FIELDS
from dbd.models import Cluster, Job, Step, Usage
from shoal.v1 import accounting_pb2 as pb


def find_jobs(session: Session, q: pb.JobQuery) -> list[pb.AcctJob]:
    """Jobs matching `q` in (cluster, job id) order, each with its steps."""
    stmt = select(Job)
    if q.clusters:
        stmt = stmt.where(Job.cluster.in_(list(q.clusters)))
    id_terms: list[ColumnElement[bool]] = []
    plain = [int(i) for i in q.job_ids if i.isdigit()]
    tasks = [tuple(int(x) for x in i.split("_", 1)) for i in q.job_ids if "_" in i]
    if plain:
        id_terms.append(Job.job_id.in_(plain))
        id_terms.append(Job.array_job_id.in_(plain))
    if q.array_job_ids:
        id_terms.append(Job.array_job_id.in_(list(q.array_job_ids)))
    for array_id, task in tasks:
        id_terms.append((Job.array_job_id == array_id) & (Job.array_task_id == task))
    if id_terms:
        stmt = stmt.where(or_(*id_terms))
    if q.users:
        stmt = stmt.where(Job.user.in_(list(q.users)))
    if q.accounts:
        stmt = stmt.where(Job.account.in_(list(q.accounts)))
    if q.names:
        stmt = stmt.where(Job.name.in_(list(q.names)))
    if q.partitions:
        stmt = stmt.where(Job.partition.in_(list(q.partitions)))
    if q.states:
        stmt = stmt.where(Job.state.in_(list(q.states)))
    if q.start:
        stmt = stmt.where(or_(Job.end_time == 0, Job.end_time >= q.start))
    if q.end:
        stmt = stmt.where(Job.submit_time < q.end)
    stmt = stmt.order_by(Job.cluster, Job.job_id, Job.submit_time)
    if q.limit:
        stmt = stmt.limit(q.limit)
    rows = list(session.scalars(stmt))
    if q.nodes:
        wanted = set(q.nodes)
        from shoal import hostlist

        rows = [r for r in rows if r.nodelist and wanted.intersection(hostlist.expand(r.nodelist))]
    if not q.duplicates:
        latest: dict[tuple[str, int], Job] = {}
        for row in rows:
            latest[(row.cluster, row.job_id)] = row  # ordered by submit time: the last one wins
        rows = [r for r in rows if latest[(r.cluster, r.job_id)] is r]
    steps: dict[int, list[Step]] = defaultdict(list)
    ids = [r.id for r in rows]
    for chunk in range(0, len(ids), 900):
        part = ids[chunk : chunk + 900]
        for step in session.scalars(select(Step).where(Step.job_row.in_(part))):
            steps[step.job_row].append(step)
    return [
        pb.AcctJob(job=job_record(r), steps=[step_record(r, s) for s in sorted(steps[r.id], key=_step_order)])
        for r in rows
    ]


def _step_order(step: Step) -> tuple[int, int]:
    # Slurm lists .batch and .extern before numbered steps
    return (0 if step.step_id < 0 else 1, -step.step_id if step.step_id < 0 else step.step_id)


def job_record(row: Job) -> pb.JobRecord:
    rec = pb.JobRecord(job_id=row.job_id, cluster=row.cluster)
    for field in JOB_FIELDS:
        setattr(rec, field, getattr(row, field))
    return rec


def step_record(job: Job, row: Step) -> pb.StepRecord:
    rec = pb.StepRecord(job_id=job.job_id, step_id=row.step_id, submit_time=job.submit_time)
    for field in STEP_FIELDS:
        setattr(rec, field, getattr(row, field))
    return rec


def report(session: Session, req: pb.ReportRequest) -> pb.ReportResponse:
    """Usage rows for sreport between start and end: per (account, user) CPU-seconds."""
    stmt = select(Usage).where(Usage.hour >= req.start - req.start % 3600, Usage.hour < req.end)
    if req.cluster:
        stmt = stmt.where(Usage.cluster == req.cluster)
    totals: dict[tuple[str, str, str], int] = defaultdict(int)
    for usage in session.scalars(stmt):
        totals[(usage.cluster, usage.account, usage.user)] += usage.cpu_seconds
    out = pb.ReportResponse(start=req.start, end=req.end)
    for (cluster, account, user), seconds in sorted(totals.items()):
        out.rows.add(fields={"cluster": cluster, "account": account, "user": user, "cpu_seconds": str(seconds)})
    cluster_row = session.get(Cluster, req.cluster) if req.cluster else None
    out.cluster_cpus = cluster_row.cpus if cluster_row is not None else 0
    return out
