"""Accounting figures: dbd ingest rate (records/s) on SQLite and MariaDB, and sacct over 100,000 job
records on MariaDB (the query dbd runs plus sacct's formatting).

    python bench/dbd_bench.py [--jobs 100000] [--ingest 5000] [--mariadb mysql+pymysql://root@127.0.0.1:3306]

Needs a MariaDB server for the MariaDB figures (skipped with a note otherwise). Databases it creates
are dropped at the end.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, insert, text

from cli.sacct import group_rows, needed_fields, parse_format, render
from dbd import ingest, queries
from dbd.db import open_database
from dbd.models import Job, Step
from shoal.acct_records import decode, gc_paused
from shoal.v1 import accounting_pb2 as pb


def _job(i: int) -> pb.JobRecord:
    return pb.JobRecord(
        job_id=i,
        name=f"job{i}",
        user="alice",
        account="physics",
        partition="batch",
        state="COMPLETED",
        submit_time=1000 + i,
        start_time=1000 + i,
        end_time=1060 + i,
        alloc_cpus=4,
        nodelist="node[1-2]",
        array_task_id=-1,
        cancelled_by=-1,
    )


def ingest_rate(url: str, count: int, batch: int = 500) -> float:
    """Records/s through dbd's ingest (a job record and its .batch step per job, in batches like ctld's)."""
    sessions = open_database(url)
    records = []
    for i in range(1, count // 2 + 1):
        records.append(pb.AcctRecord(job=_job(i)))
        records.append(
            pb.AcctRecord(
                step=pb.StepRecord(
                    job_id=i, step_id=-4, name="batch", state="COMPLETED", submit_time=1000 + i
                )
            )
        )
    for seq, rec in enumerate(records, start=1):
        rec.seq = seq
    started = time.perf_counter()
    for k in range(0, len(records), batch):
        with sessions.begin() as session:
            ingest.apply_records(
                session, pb.SendRecordsRequest(cluster="bench", epoch="e", records=records[k : k + batch])
            )
    elapsed = time.perf_counter() - started
    sessions.kw["bind"].dispose()
    return len(records) / elapsed


def sacct_time(url: str, jobs: int) -> tuple[float, float, int]:
    """Seconds for dbd's query and for sacct's formatting of every job (with its .batch step)."""
    sessions = open_database(url)
    with sessions.begin() as session:
        chunk = 5000
        for k in range(0, jobs, chunk):
            rows = [
                dict(
                    cluster="c",
                    job_id=i,
                    name=f"job{i}",
                    user="alice",
                    account="physics",
                    partition="batch",
                    state="COMPLETED",
                    submit_time=1000 + i,
                    start_time=1000 + i,
                    end_time=1060 + i,
                    alloc_cpus=4,
                    nodelist="node[1-2]",
                    array_task_id=-1,
                    cancelled_by=-1,
                )
                for i in range(k + 1, min(jobs, k + chunk) + 1)
            ]
            session.execute(insert(Job), rows)
        ids = session.execute(text("SELECT id FROM jobs")).scalars().all()
        for k in range(0, len(ids), chunk):
            session.execute(
                insert(Step),
                [
                    dict(job_row=r, step_id=-4, name="batch", state="COMPLETED", nodelist="node1")
                    for r in ids[k : k + chunk]
                ],
            )
    fields = parse_format("JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode")  # sacct's default
    started, cpu = time.perf_counter(), time.process_time()
    with sessions() as session:
        response = queries.find_jobs(session, pb.JobQuery(users=["alice"], fields=needed_fields(fields)))
        data = response.SerializeToString()
    queried, query_cpu = time.perf_counter() - started, time.process_time() - cpu
    started, cpu = time.perf_counter(), time.process_time()
    with gc_paused():  # as sacct does
        parsed = decode(pb.AcctJobsResponse.FromString(data))
        lines = render(group_rows(parsed, with_steps=True), fields, parsable="", header=True, now=10**9)
    formatted, format_cpu = time.perf_counter() - started, time.process_time() - cpu
    sessions.kw["bind"].dispose()
    print(
        f"  (this process's CPU: query {query_cpu:.2f} s, format {format_cpu:.2f} s; the rest of the wall time"
        f" is the database server and the other processes on the machine; answer {len(data) / 1e6:.1f} MB)"
    )
    return queried, formatted, len(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--ingest", type=int, default=5000)
    p.add_argument("--mariadb", default="mysql+pymysql://root@127.0.0.1:3306")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rate = ingest_rate(f"sqlite:///{Path(tmp) / 'a.sqlite'}", args.ingest)
        print(f"ingest SQLite:  {rate:,.0f} records/s ({args.ingest} records, batches of 500)")
        q, f, n = sacct_time(f"sqlite:///{Path(tmp) / 'b.sqlite'}", args.jobs)
        print(f"sacct SQLite:   {args.jobs:,} jobs: query {q:.2f} s, format {f:.2f} s ({n:,} lines)")
    admin = create_engine(args.mariadb)
    try:
        with admin.begin() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # no server: say so and stop
        print(f"MariaDB figures skipped: {str(exc).splitlines()[0]}")
        return
    names = [f"shoal_bench_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        with admin.begin() as conn:
            for name in names:
                conn.execute(text(f"CREATE DATABASE `{name}`"))
        rate = ingest_rate(f"{args.mariadb}/{names[0]}", args.ingest)
        print(f"ingest MariaDB: {rate:,.0f} records/s ({args.ingest} records, batches of 500)")
        q, f, n = sacct_time(f"{args.mariadb}/{names[1]}", args.jobs)
        print(f"sacct MariaDB:  {args.jobs:,} jobs: query {q:.2f} s, format {f:.2f} s ({n:,} lines)")
    finally:
        with admin.begin() as conn:
            for name in names:
                conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))


if __name__ == "__main__":
    main()
