"""Read side for sacct and sreport: jobs with their steps, and usage summaries."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, func, or_, select
from sqlalchemy.orm import Session

from dbd.ingest import JOB_FIELDS, STEP_FIELDS, tres_count
from dbd.models import Cluster, Job, NodeEvent, Step, Usage
from shoal import acct_records
from shoal.v1 import accounting_pb2 as pb


def find_jobs(
    session: Session, q: pb.JobQuery, only: tuple[str, frozenset[str]] | None = None
) -> pb.AcctJobsResponse:
    """Jobs matching `q` in (cluster, job id) order, and their steps, as columns (shoal.acct_records).

    Only the fields the caller asked for are read; plain Core rows go column by column into the
    answer (no ORM objects, no message per record), and the steps of all the selected jobs come in
    one range scan or a few IN queries (no per-job loads). `only` (PrivateData=jobs: a user and the
    accounts they coordinate) keeps the jobs of that user or of those accounts.
    """
    with acct_records.gc_paused():
        return _find_jobs(session, q, only)


def _find_jobs(
    session: Session, q: pb.JobQuery, only: tuple[str, frozenset[str]] | None
) -> pb.AcctJobsResponse:
    job_fields, step_fields = _wanted(q)
    rows = _job_rows(session, q, job_fields, only)
    if q.nodes:
        wanted = set(q.nodes)
        from shoal import hostlist

        rows = [r for r in rows if r[_NODELIST] and wanted.intersection(hostlist.expand(r[_NODELIST]))]
    if not q.duplicates:
        latest: dict[tuple[str, int], int] = {}
        for row in rows:
            latest[(row[1], row[2])] = row[0]  # ordered by submit time: the last one wins
        rows = [r for r in rows if latest[(r[1], r[2])] == r[0]]
    steps = _steps_of(session, [r[0] for r in rows], step_fields)
    step_rows: list[tuple[Any, ...]] = []
    for index, r in enumerate(rows):
        mine = steps.get(r[0])
        if mine:
            step_rows.extend((index, *s[1:]) for s in sorted(mine, key=_step_order))
    out = pb.AcctJobsResponse()
    acct_records.encode(out.jobs, ("cluster", "job_id", "submit_time", *job_fields), [r[1:] for r in rows])
    acct_records.encode(out.steps, (acct_records.JOB_INDEX, "step_id", *step_fields), step_rows)
    return out


_NODELIST = -1  # the nodes filter appends nodelist as the last column


def _wanted(q: pb.JobQuery) -> tuple[list[str], list[str]]:
    """The job and step columns to read besides the identifying ones."""
    asked = set(q.fields)
    job_fields = [f for f in JOB_FIELDS if f != "submit_time" and (not asked or f in asked)]
    step_fields = [f for f in STEP_FIELDS if not asked or f in asked]
    if q.nodes and "nodelist" in job_fields:
        job_fields.remove("nodelist")
    if q.nodes:
        job_fields.append("nodelist")
    return job_fields, step_fields


def _job_rows(
    session: Session, q: pb.JobQuery, fields: list[str], only: tuple[str, frozenset[str]] | None = None
) -> list[tuple[Any, ...]]:
    """(row id, cluster, job id, submit time, *fields) of the matching jobs, read through Core."""
    conn = session.connection()
    stmt = select(Job.id, Job.cluster, Job.job_id, Job.submit_time, *(getattr(Job, f) for f in fields))
    if only is not None:
        user, accounts = only
        stmt = stmt.where(or_(Job.user == user, Job.account.in_(sorted(accounts))))
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
    # times are whole seconds: "until now" (sacct -E now) includes what happened in this second (a job
    # submitted and ended in it, which the Snakemake plugin asks for at once)
    if q.end:
        stmt = stmt.where(Job.submit_time <= q.end)
    if q.start or q.end:
        # as 22.05: a time window holds the jobs eligible within it; one cancelled while held, waiting
        # on a dependency or before its --begin time never was, and is not listed (sacct -j still shows it)
        until = q.end or int(time.time())
        stmt = stmt.where(Job.eligible_time > 0, Job.eligible_time <= until)
    rows = _fetch(conn, stmt, Job.id)
    rows.sort(key=_job_order)
    return rows[: q.limit] if q.limit else rows


def _job_order(row: tuple[Any, ...]) -> tuple[str, int, int]:
    return (row[1], row[2], row[3])  # cluster, job id, submit time


ROWS_PER_TEXT = 500  # MySQL/MariaDB rows folded into one JSON text (see _fetch)


def _fetch(conn: Connection, stmt: Select[Any], bucket: Any) -> list[tuple[Any, ...]]:
    """The rows of `stmt`, in no particular order.

    On MySQL/MariaDB, PyMySQL parses every field of every row in pure Python (~10 us each, most of a
    100,000-job sacct), so the rows come folded: ROWS_PER_TEXT of them (grouped by `bucket`, an
    integer key, DIV ROWS_PER_TEXT) as one JSON array text, decoded in C by json.loads.
    """
    if conn.dialect.name not in ("mysql", "mariadb"):
        return [tuple(r) for r in conn.execute(stmt)]
    conn.exec_driver_sql("SET SESSION group_concat_max_len = 1073741824")  # MariaDB caps JSON_ARRAYAGG by it
    rows = (
        stmt.with_only_columns(
            func.json_array(*stmt.selected_columns).label("r"), bucket.op("DIV")(ROWS_PER_TEXT).label("b")
        )
        .order_by(None)
        .subquery()
    )
    loads = json.loads
    out: list[tuple[Any, ...]] = []
    for (text,) in conn.execute(select(func.json_arrayagg(rows.c.r)).group_by(rows.c.b)):
        out.extend(map(tuple, loads(text)))
    return out


def _steps_of(session: Session, job_rows: list[int], fields: list[str]) -> dict[int, list[tuple[Any, ...]]]:
    """(job row, step id, *fields) per job row; one range scan when the selection is most of the table."""
    steps: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    if not job_rows:
        return steps
    conn = session.connection()
    query = select(Step.job_row, Step.step_id, *(getattr(Step, f) for f in fields))
    wanted = set(job_rows)
    lo, hi = min(job_rows), max(job_rows)
    if len(job_rows) > 5000 and hi - lo < 4 * len(job_rows):
        for step in _fetch(
            conn, query.where(Step.job_row.between(lo, hi)), Step.id
        ):  # one range scan, filtered
            if step[0] in wanted:
                steps[step[0]].append(step)
        return steps
    for chunk in range(0, len(job_rows), 900):
        for step in _fetch(conn, query.where(Step.job_row.in_(job_rows[chunk : chunk + 900])), Step.id):
            steps[step[0]].append(step)
    return steps


def _step_order(step: tuple[Any, ...]) -> tuple[int, int]:
    # Slurm lists .batch and .extern before numbered steps
    return (0, -step[1]) if step[1] < 0 else (1, step[1])


def report(session: Session, req: pb.ReportRequest) -> pb.ReportResponse:
    """Usage rows for sreport between start and end: per (account, user) CPU- and GPU-seconds; for
    cluster utilization also the down, planned-down and planned (eligible but waiting) TRES-seconds.
    """
    stmt = select(Usage).where(Usage.hour >= req.start - req.start % 3600, Usage.hour < req.end)
    if req.cluster:
        stmt = stmt.where(Usage.cluster == req.cluster)
    totals: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for usage in session.scalars(stmt):
        row = totals[(usage.cluster, usage.account, usage.user)]
        row[0] += usage.cpu_seconds
        row[1] += usage.gpu_seconds
    out = pb.ReportResponse(start=req.start, end=req.end)
    for (cluster, account, user), (cpu, gpu) in sorted(totals.items()):
        out.rows.add(
            fields={
                "cluster": cluster,
                "account": account,
                "user": user,
                "cpu_seconds": str(cpu),
                "gpu_seconds": str(gpu),
            }
        )
    cluster_row = session.get(Cluster, req.cluster) if req.cluster else None
    out.cluster_cpus = cluster_row.cpus if cluster_row is not None else 0
    out.cluster_gpus = cluster_row.gpus if cluster_row is not None else 0
    if req.cluster:
        first_hour = session.scalar(select(func.min(Usage.hour)).where(Usage.cluster == req.cluster))
        known = [t for t in (cluster_row.created if cluster_row is not None else 0, first_hour or 0) if t]
        out.cluster_since = min(known) if known else 0
    if req.report == "cluster_utilization" and req.cluster:
        out.totals.update(_node_time(session, req))
        out.totals.update(_planned_time(session, req))
    return out


def decayed_usage(session: Session, req: pb.GetUsageRequest) -> pb.GetUsageResponse:
    """CPU- and GPU-seconds per (account, user) since `req.since`, each hour decayed from its middle to
    `req.now` with the half-life ctld uses (the seed of its fair-share ledger after a lost state)."""
    stmt = select(Usage.account, Usage.user, Usage.hour, Usage.cpu_seconds, Usage.gpu_seconds).where(
        Usage.cluster == req.cluster, Usage.hour + 3600 > req.since
    )
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for account, user, hour, cpu, gpu in session.execute(stmt):
        age = max(0, req.now - hour - 1800)
        factor = 0.5 ** (age / req.half_life_s) if req.half_life_s > 0 else 1.0
        row = totals[(account, user)]
        row[0] += cpu * factor
        row[1] += gpu * factor
    out = pb.GetUsageResponse()
    for (account, user), (cpu_s, gpu_s) in sorted(totals.items()):
        out.usage.add(account=account, user=user, cpu_seconds=cpu_s, gpu_seconds=gpu_s)
    return out


DOWN_STATES = {
    "DOWN": "down",
    "DRAIN": "down",
    "FAIL": "down",
    "POWERED_DOWN": "plnd_down",
    "POWER_DOWN": "plnd_down",
}


def _overlap(start: int, end: int, req: pb.ReportRequest) -> int:
    return max(0, min(end or req.end, req.end) - max(start, req.start))


def _node_time(session: Session, req: pb.ReportRequest) -> dict[str, int]:
    """TRES-seconds of the period nodes spent down (DOWN/DRAIN) or planned down (powered down)."""
    out = {f"{kind}_{tres}": 0 for kind in ("down", "plnd_down") for tres in ("cpu", "gpu")}
    events = session.execute(
        select(
            NodeEvent.state, NodeEvent.start_time, NodeEvent.end_time, NodeEvent.cpus, NodeEvent.gpus
        ).where(
            NodeEvent.cluster == req.cluster,
            NodeEvent.start_time < req.end,
            or_(NodeEvent.end_time == 0, NodeEvent.end_time > req.start),
        )
    )
    for state, start, end, cpus, gpus in events:
        kind = DOWN_STATES.get(state)
        if kind is None:
            continue
        seconds = _overlap(start, end, req)
        out[f"{kind}_cpu"] += seconds * cpus
        out[f"{kind}_gpu"] += seconds * gpus
    return out


def _planned_time(session: Session, req: pb.ReportRequest) -> dict[str, int]:
    """TRES-seconds of the period jobs waited while eligible (Slurm's "Planned", once "Reserved")."""
    rows = session.execute(
        select(Job.eligible_time, Job.start_time, Job.end_time, Job.req_cpus, Job.tres_req).where(
            Job.cluster == req.cluster,
            Job.eligible_time > 0,
            Job.eligible_time < req.end,
            or_(Job.start_time == 0, Job.start_time > req.start),
            or_(Job.start_time > 0, Job.end_time == 0, Job.end_time > req.start),
        )
    )
    cpu = gpu = 0
    for eligible, start, end, req_cpus, tres_req in rows:
        seconds = _overlap(eligible, start or end, req)
        cpu += seconds * req_cpus
        gpu += seconds * tres_count(tres_req, "gres/gpu")
    return {"planned_cpu": cpu, "planned_gpu": gpu}
