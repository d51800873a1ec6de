"""Store the records ctld sends, exactly once: a batch is applied in one transaction together with the
highest sequence number seen for (cluster, queue epoch); records at or below it are skipped.

A batch costs a handful of statements whatever its size: the cluster row and the sequence, existing job
states in one SELECT, jobs, steps and hourly usage each as one multi-row INSERT .. ON CONFLICT/ON
DUPLICATE KEY UPDATE. Every statement of a batch is compiled once per process and run on the driver (no
ORM objects, no per-batch statement building: for the small batches that trickle in while jobs run,
that building was most of dbd's CPU). Only node events (rare, order-dependent) go through the ORM.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, CursorResult, Table, bindparam, delete, insert, select, tuple_, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.expression import ClauseElement

from dbd.models import Base, Cluster, Job, NodeEvent, Received, Step, Usage
from shoal.v1 import accounting_pb2 as pb

FINISHED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
JOB_FIELDS = (
    "array_job_id",
    "array_task_id",
    "name",
    "uid",
    "gid",
    "user",
    "account",
    "partition",
    "qos",
    "tres_req",
    "tres_alloc",
    "nodelist",
    "alloc_cpus",
    "alloc_nodes",
    "req_cpus",
    "req_nodes",
    "req_mem_mb",
    "submit_time",
    "eligible_time",
    "start_time",
    "end_time",
    "time_limit_min",
    "state",
    "exit_code",
    "exit_signal",
    "derived_exit_code",
    "derived_exit_signal",
    "work_dir",
    "reason",
    "cancelled_by",
    "priority",
    "suspended_secs",
    "suspend_time",
)
STEP_FIELDS = (
    "name",
    "nodelist",
    "num_tasks",
    "num_cpus",
    "num_nodes",
    "start_time",
    "end_time",
    "state",
    "exit_code",
    "exit_signal",
    "cpu_time_s",
    "max_rss_kb",
    "tres_alloc",
    "gpu_util_avg",
    "gpu_util_max",
    "gpu_mem_max_mb",
)


def _table(model: type[Base]) -> Table:
    """A model's Core Table (SQLAlchemy types `__table__` as the wider FromClause)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


# Core columns, not ORM attributes, in the per-batch SELECTs: the ORM's statement handling was a third
# of a small batch's CPU, and these only read plain values.
JOBS = _table(Job)
USAGE = _table(Usage)
STEPS = _table(Step)
CLUSTERS = _table(Cluster)
RECEIVED = _table(Received)
ROWS_PER_STATEMENT = 500  # rows per executemany / per IN list
UsageKey = tuple[str, str, int]  # (account, user, hour)


def apply_records(session: Session, req: pb.SendRecordsRequest) -> tuple[int, int]:
    """Apply the records (in sequence order) not applied before; returns (applied_through, newly applied)."""
    cluster, epoch = req.cluster, req.epoch
    conn = session.connection()
    _register_cluster(conn, req)
    # the sequence row is locked (MariaDB: FOR UPDATE) until this batch commits: exactly once
    found = _run(conn, _received_stmt, {"cluster": cluster, "epoch": epoch}).first()
    last_seq = 0 if found is None else int(found[0])
    fresh = [r for r in req.records if r.seq > last_seq]
    jobs = [r.job for r in fresh if r.WhichOneof("kind") == "job"]
    steps = [r.step for r in fresh if r.WhichOneof("kind") == "step"]
    events = [r.node_event for r in fresh if r.WhichOneof("kind") == "node_event"]
    if jobs:
        _apply_jobs(session, cluster, jobs)
    if steps:
        _apply_steps(session, cluster, steps)
    _drop_steps_of_unlaunched(session, cluster, jobs)
    for event in events:
        _apply_event(session, cluster, event)
    through = max([last_seq, *(r.seq for r in fresh)])
    if found is None:
        _run(conn, _received_insert, {"cluster": cluster, "epoch": epoch, "last_seq": through})
    elif through != last_seq:
        _run(conn, _received_update, {"cluster": cluster, "epoch": epoch, "last_seq": through})
    return through, len(fresh)


def _register_cluster(conn: Connection, req: pb.SendRecordsRequest) -> None:
    """The cluster's row with what ctld says of it (its size, its controller); written only on a change."""
    found = _run(conn, _cluster_stmt, {"name": req.cluster}).first()
    was = {"cpus": 0, "gpus": 0, "control_host": "", "created": 0} if found is None else dict(found._mapping)
    row = dict(was)
    if req.cluster_cpus:
        row["cpus"] = req.cluster_cpus
        if not row["created"]:  # its first registration: sreport reports from then on
            row["created"] = int(time.time())
    if req.cluster_gpus:
        row["gpus"] = req.cluster_gpus
    if req.control_host:
        row["control_host"] = req.control_host
    if found is None:
        _run(conn, _cluster_insert, {"name": req.cluster, **row})
    elif row != was:
        _run(conn, _cluster_update, {"name": req.cluster, **row})


# ------------------------------------------------------------------ statements compiled once


def _run(
    conn: Connection, build: Callable[..., ClauseElement], params: Mapping[str, Any], *shape: int
) -> CursorResult[Any]:
    """Run the statement `build(*shape)` makes, compiled once per dialect and shape, on the driver."""
    sql, order = _compiled(conn.dialect, build, shape)
    return conn.exec_driver_sql(sql, tuple(params[c] for c in order) if order else dict(params))


@functools.lru_cache(maxsize=256)
def _compiled(
    dialect: Dialect, build: Callable[..., ClauseElement], shape: tuple[int, ...]
) -> tuple[str, tuple[str, ...]]:
    """SQL text and positional parameter order (empty: named) of one statement for one dialect."""
    compiled = build(*shape).compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    order = tuple(compiled.positiontup or ()) if compiled.positional else ()
    return str(compiled), order


def _padded(keys: Sequence[Any]) -> tuple[int, list[Any]]:
    """An IN list (at most ROWS_PER_STATEMENT keys) padded to a power of two or to ROWS_PER_STATEMENT,
    the last key repeated: a few compiled shapes, never more parameters than the chunk allows."""
    size = 1
    while size < len(keys):
        size *= 2
    size = min(size, ROWS_PER_STATEMENT)
    return size, [*keys, *[keys[-1]] * (size - len(keys))]


def _cluster_stmt() -> ClauseElement:
    c = CLUSTERS.c
    return select(c.cpus, c.gpus, c.control_host, c.created).where(c.name == bindparam("name"))


def _cluster_insert() -> ClauseElement:
    return insert(CLUSTERS)


def _cluster_update() -> ClauseElement:
    return (
        update(CLUSTERS)
        .where(CLUSTERS.c.name == bindparam("name"))
        .values({c: bindparam(c) for c in ("cpus", "gpus", "control_host", "created")})
    )


def _received_stmt() -> ClauseElement:
    c = RECEIVED.c
    return (
        select(c.last_seq)
        .where(c.cluster == bindparam("cluster"), c.epoch == bindparam("epoch"))
        .with_for_update()
    )


def _received_insert() -> ClauseElement:
    return insert(RECEIVED)


def _received_update() -> ClauseElement:
    c = RECEIVED.c
    return (
        update(RECEIVED)
        .where(c.cluster == bindparam("cluster"), c.epoch == bindparam("epoch"))
        .values(last_seq=bindparam("last_seq"))
    )


def _job_states_stmt(size: int) -> ClauseElement:
    c = JOBS.c
    pairs = [tuple_(bindparam(f"j{k}"), bindparam(f"s{k}")) for k in range(size)]
    return select(c.job_id, c.submit_time, c.state).where(
        c.cluster == bindparam("cluster"), tuple_(c.job_id, c.submit_time).in_(pairs)
    )


def _job_rows_stmt(size: int) -> ClauseElement:
    c = JOBS.c
    return select(c.job_id, c.submit_time, c.id).where(
        c.cluster == bindparam("cluster"), c.job_id.in_([bindparam(f"j{k}") for k in range(size)])
    )


def _upsert(
    session: Session,
    table: Table,
    rows: Sequence[dict[str, Any]],
    keys: Sequence[str],
    update: Sequence[str],
    add: Sequence[str] = (),
) -> None:
    """INSERT rows (all with the same keys); on a clash of `keys` overwrite the `update` columns and add
    to the `add` columns.

    One statement with the rows as its parameter list: SQLite runs it through executemany, PyMySQL
    rewrites it into multi-row INSERTs. The SQL is compiled once per process (`_compiled_upsert`).
    """
    if not rows:
        return
    conn = session.connection()
    sql, order = _compiled_upsert(conn.dialect, table, tuple(keys), tuple(update), tuple(add), tuple(rows[0]))
    for chunk in _chunks(rows, ROWS_PER_STATEMENT):
        params: list[Any] = [tuple(row[c] for c in order) for row in chunk] if order else list(chunk)
        conn.exec_driver_sql(sql, params)


@functools.cache
def _compiled_upsert(
    dialect: Dialect,
    table: Table,
    keys: tuple[str, ...],
    update: tuple[str, ...],
    add: tuple[str, ...],
    columns: tuple[str, ...],
) -> tuple[str, tuple[str, ...]]:
    """The upsert's SQL for this dialect, and the column order of its positional parameters (empty for
    named ones). SQLAlchemy 2.0 does not cache the compiled form of its SQLite and MySQL upserts
    (their statements have no cache key), so executing the construct compiled it on every batch: two
    thirds of dbd's CPU for the small batches of jobs that trickle in. The columns are integers and
    strings, whose values the drivers take as they are (no bind processing to skip)."""
    stmt: Insert
    if dialect.name == "sqlite":
        ins = sqlite.insert(table)
        sets: dict[str, Any] = {c: ins.excluded[c] for c in update}
        sets.update({c: table.c[c] + ins.excluded[c] for c in add})
        stmt = ins.on_conflict_do_update(index_elements=[table.c[c] for c in keys], set_=sets)
    elif dialect.name in ("mysql", "mariadb"):
        mins = mysql.insert(table)
        msets: dict[str, Any] = {c: mins.inserted[c] for c in update}
        msets.update({c: table.c[c] + mins.inserted[c] for c in add})
        stmt = mins.on_duplicate_key_update(msets)
    else:
        raise NotImplementedError(f"accounting storage dialect {dialect.name} is not supported")
    compiled = stmt.compile(dialect=dialect, column_keys=list(columns))
    order = tuple(compiled.positiontup or ()) if compiled.positional else ()
    return str(compiled), order


def _apply_jobs(session: Session, cluster: str, records: Iterable[pb.JobRecord]) -> None:
    """Upsert the last record of each job and add usage for every transition into a finished state."""
    records = list(records)
    keys = {(r.job_id, r.submit_time) for r in records}
    states: dict[tuple[int, int], str] = {}
    conn = session.connection()
    for chunk in _chunks(sorted(keys), ROWS_PER_STATEMENT):
        size, padded = _padded(chunk)
        params: dict[str, Any] = {"cluster": cluster}
        for k, (job_id, submit) in enumerate(padded):
            params[f"j{k}"], params[f"s{k}"] = job_id, submit
        found = _run(conn, _job_states_stmt, params, size)
        states.update({(job_id, submit): state for job_id, submit, state in found})
    last: dict[tuple[int, int], pb.JobRecord] = {}
    usage: dict[UsageKey, list[int]] = {}
    for rec in records:
        key = (rec.job_id, rec.submit_time)
        was_finished = states.get(key, "") in FINISHED
        if rec.state in FINISHED and not was_finished and rec.start_time and rec.end_time > rec.start_time:
            _add_usage(usage, rec)
        states[key] = rec.state
        last[key] = rec
    rows = [
        dict({f: getattr(r, f) for f in JOB_FIELDS}, cluster=cluster, job_id=r.job_id) for r in last.values()
    ]
    _upsert(session, JOBS, rows, ("cluster", "job_id", "submit_time"), JOB_FIELDS)
    if usage:
        usage_rows = [
            dict(cluster=cluster, account=a, user=u, hour=h, cpu_seconds=c, gpu_seconds=g)
            for (a, u, h), (c, g) in usage.items()
        ]
        _upsert(
            session,
            USAGE,
            usage_rows,
            ("cluster", "account", "user", "hour"),
            (),
            add=("cpu_seconds", "gpu_seconds"),
        )


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for k in range(0, len(items), size):
        yield items[k : k + size]


def _add_usage(usage: dict[UsageKey, list[int]], rec: pb.JobRecord) -> None:
    """Spread the job's CPU- and GPU-seconds over the hours it ran."""
    gpus = tres_count(rec.tres_alloc, "gres/gpu")
    start, end = rec.start_time, rec.end_time
    hour = start - start % 3600
    while hour < end:
        seconds = min(end, hour + 3600) - max(start, hour)
        totals = usage.setdefault((rec.account, rec.user, hour), [0, 0])
        totals[0] += seconds * rec.alloc_cpus
        totals[1] += seconds * gpus
        hour += 3600


def tres_count(tres: str, name: str) -> int:
    """N of `name=N` in a TRES string (0 when absent)."""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == name and value.isdigit():
            return int(value)
    return 0


def _apply_steps(session: Session, cluster: str, records: Sequence[pb.StepRecord]) -> None:
    """Upsert the last record of each step; a step of a job accounting never saw is dropped."""
    job_ids = sorted({r.job_id for r in records})
    rows_of: dict[int, list[tuple[int, int]]] = {}  # job id -> [(submit time, row id)]
    conn = session.connection()
    for chunk in _chunks(job_ids, ROWS_PER_STATEMENT):
        size, padded = _padded(chunk)
        params: dict[str, Any] = {"cluster": cluster, **{f"j{k}": job_id for k, job_id in enumerate(padded)}}
        found = _run(conn, _job_rows_stmt, params, size)
        for job_id, submit, row_id in found:
            rows_of.setdefault(job_id, []).append((submit, row_id))
    last: dict[tuple[int, int], pb.StepRecord] = {}
    for rec in records:
        candidates = rows_of.get(rec.job_id, [])
        if rec.submit_time:
            candidates = [c for c in candidates if c[0] == rec.submit_time]
        if candidates:  # no submit time: the newest job with that id
            last[(max(candidates)[1], rec.step_id)] = rec
    rows = [
        dict({f: getattr(r, f) for f in STEP_FIELDS}, job_row=job_row, step_id=step_id)
        for (job_row, step_id), r in last.items()
    ]
    _upsert(session, STEPS, rows, ("job_row", "step_id"), STEP_FIELDS)


def _drop_steps_of_unlaunched(session: Session, cluster: str, records: Sequence[pb.JobRecord]) -> None:
    """A run that never reached its node (a controller stopped between the start and the launch; ctld
    records it NODE_FAIL with no start) keeps no steps: drop the `.batch` recorded RUNNING at its start
    (after the steps of this batch are applied: that record may travel with the run's)."""
    keys = sorted({(r.job_id, r.submit_time) for r in records if r.state == "NODE_FAIL" and not r.start_time})
    for chunk in _chunks(keys, ROWS_PER_STATEMENT):
        rows = select(JOBS.c.id).where(
            JOBS.c.cluster == cluster, tuple_(JOBS.c.job_id, JOBS.c.submit_time).in_(chunk)
        )
        session.execute(delete(STEPS).where(STEPS.c.job_row.in_(rows)))


def _apply_event(session: Session, cluster: str, rec: pb.NodeEventRecord) -> None:
    open_event = session.scalars(
        select(NodeEvent)
        .where(NodeEvent.cluster == cluster, NodeEvent.node == rec.node, NodeEvent.end_time == 0)
        .order_by(NodeEvent.start_time.desc())
    ).first()
    if open_event is not None:
        open_event.end_time = rec.end_time or rec.start_time
    if rec.state:  # an empty state only closes the open event (the node is back)
        session.add(
            NodeEvent(
                cluster=cluster,
                node=rec.node,
                state=rec.state,
                reason=rec.reason,
                reason_uid=rec.reason_uid,
                start_time=rec.start_time,
                end_time=rec.end_time,
                cpus=rec.cpus,
                gpus=rec.gpus,
            )
        )
    session.flush()
