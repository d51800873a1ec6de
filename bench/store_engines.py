"""The state store's cost per transaction on each engine: what a submit pays to be durable.

Each transaction is a submit's: one job record (a ~4 KB blob, a script and its environment), the
next job id, one accounting record. Prints transactions per second for SQLite (WAL, synchronous=
NORMAL, the default) and MariaDB (InnoDB at the server's settings, through one connection; the lease
row locked FOR UPDATE as a fenced store does). Figures, not a test.

    python bench/store_engines.py [--transactions 2000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pymysql

from ctld.store import StateStore
from ctld.store_mariadb import MariaDBBackend
from shoal.conf.statestore import StateStoreConf

HOST, PORT = "127.0.0.1", 3306


def _run(store: StateStore, transactions: int) -> float:
    blob = b"#!/bin/bash\n" + b"x" * 4096
    started = time.perf_counter()
    for job_id in range(1, transactions + 1):
        with store.transaction() as tx:
            tx.put_job(job_id, blob)
            tx.set_meta("next_job_id", str(job_id + 1))
            tx.enqueue_record(blob[:512])
    return transactions / (time.perf_counter() - started)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transactions", type=int, default=2000)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        sqlite = StateStore(Path(tmp))
        print(f"sqlite   {_run(sqlite, args.transactions):8.0f} transactions/s")
        sqlite.close()
    name = f"store_bench_{int(time.time())}"
    admin = pymysql.connect(host=HOST, port=PORT, user="root", autocommit=True)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
        cur.execute("SELECT @@innodb_flush_log_at_trx_commit")
        flush = cur.fetchone()[0]
    try:
        conf = StateStoreConf(kind="mysql", user="root", host=HOST, port=PORT, database=name)
        maria = StateStore(backend=MariaDBBackend(conf, ""))
        rate = _run(maria, args.transactions)
        print(f"mariadb  {rate:8.0f} transactions/s (innodb_flush_log_at_trx_commit={flush})")
        maria.close()
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE `{name}`")
        admin.close()


if __name__ == "__main__":
    main()
