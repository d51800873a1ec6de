"""The state store's contract, run against each engine: SQLite (the embedded default) and MariaDB.

What ctld relies on: every method keeps what was written, a transaction commits whole or not at all,
what was committed survives closing (and a crash of the writing process), and concurrent writers
neither lose nor mix up each other's records.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctld.store import StateStore, StoreError
from ctld.store_mariadb import MariaDBBackend
from tests.state_db import scratch_database

Opener = Callable[[], StateStore]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(params=["sqlite", "mariadb"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Opener]]:
    """(engine, a function that opens a new handle on the same, initially empty, store)."""
    opened: list[StateStore] = []

    def track(store: StateStore) -> StateStore:
        opened.append(store)
        return store

    if request.param == "sqlite":
        yield "sqlite", lambda: track(StateStore(tmp_path))
    else:
        with scratch_database() as conf:
            yield f"mariadb:{conf.database}", lambda: track(StateStore(backend=MariaDBBackend(conf, "")))
            for store in opened:
                store.close()
            return
    for store in opened:
        store.close()


def test_every_record_kind_round_trips(opener: tuple[str, Opener]) -> None:
    store = opener[1]()
    blob = bytes(range(256)) * 4096  # NULs and high bytes, 1 MiB: a job's script and environment
    with store.transaction() as tx:
        tx.put_job(7, b"seven")
        tx.put_job(3, blob)
        tx.put_job(9, b"nine")
        tx.put_node("n1", b"lower")
        tx.put_node("N1", b"upper")  # node names are case-sensitive, as in slurm.conf
        tx.put_reservation("zeta", b"z")
        tx.put_reservation("alpha", b"a")
        tx.set_meta("next_job_id", "10")
    with store.transaction() as tx:
        tx.put_job(7, b"seven again")  # a job's record is replaced, not added
        tx.delete_job(9)
        tx.put_node("n1", b"lower again")
        tx.delete_reservation("zeta")
        tx.put_reservation("beta", b"b")
        tx.set_meta("next_job_id", "11")
    assert store.load_jobs() == [blob, b"seven again"]  # in job id order
    assert store.load_nodes() == {"n1": b"lower again", "N1": b"upper"}
    assert store.load_reservations() == [b"a", b"b"]  # in name order
    assert store.get_meta("next_job_id") == "11"
    assert store.get_meta("never set") is None


def test_accounting_queue_keeps_order_until_dropped(opener: tuple[str, Opener]) -> None:
    store = opener[1]()
    with store.transaction() as tx:
        seqs = [tx.enqueue_record(f"r{i}".encode()) for i in range(5)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert store.queued_records(3) == [(seqs[0], b"r0"), (seqs[1], b"r1"), (seqs[2], b"r2")]
    store.drop_records_through(seqs[1])
    assert [data for _, data in store.queued_records(10)] == [b"r2", b"r3", b"r4"]
    with store.transaction() as tx:
        later = tx.enqueue_record(b"r5")
    assert later > seqs[-1]  # a sequence number is never reused, even after the queue was drained
    store.drop_records_through(later)
    assert store.queued_records(10) == []


def test_many_rows_in_one_statement_keep_what_one_by_one_keeps(opener: tuple[str, Opener]) -> None:
    """An array's tasks are saved with put_jobs and queued with enqueue_records (one statement each)."""
    store = opener[1]()
    with store.transaction() as tx:
        first = tx.enqueue_record(b"before")
        tx.put_jobs([(5, b"old five")])
        tx.put_jobs([(k, f"task {k}".encode()) for k in range(1, 1002)])  # replaces 5, as put_job does
        tx.put_jobs([])
        tx.enqueue_records([f"task {k}".encode() for k in range(1, 1002)])
        tx.enqueue_records([])
        last = tx.enqueue_record(b"after")
    assert store.load_jobs() == [f"task {k}".encode() for k in range(1, 1002)]
    queued = store.queued_records(2000)
    assert [data for _, data in queued] == [
        b"before",
        *(f"task {k}".encode() for k in range(1, 1002)),
        b"after",
    ]
    seqs = [seq for seq, _ in queued]
    assert seqs == sorted(set(seqs)) and seqs[0] == first and seqs[-1] == last
    with pytest.raises(RuntimeError, match="boom"), store.transaction() as tx:
        tx.put_jobs([(1, b"rolled back"), (2000, b"never")])
        tx.enqueue_records([b"never"])
        raise RuntimeError("boom")
    assert store.load_jobs()[0] == b"task 1" and len(store.load_jobs()) == 1001
    assert len(store.queued_records(2000)) == 1003
    with pytest.raises(StoreError, match="outside a transaction"):
        store.put_jobs([(1, b"x")])


def test_write_outside_a_transaction_is_refused(opener: tuple[str, Opener]) -> None:
    store = opener[1]()
    with pytest.raises(StoreError, match="outside a transaction"):
        store.put_job(1, b"x")
    assert store.load_jobs() == []


def test_an_exception_rolls_back_the_whole_transaction(opener: tuple[str, Opener]) -> None:
    store = opener[1]()
    with store.transaction() as tx:
        tx.put_job(1, b"kept")
    with pytest.raises(RuntimeError, match="boom"), store.transaction() as tx:
        tx.put_job(1, b"overwritten")
        tx.put_job(2, b"new")
        tx.put_node("n1", b"node")
        tx.set_meta("k", "v")
        tx.enqueue_record(b"rec")
        raise RuntimeError("boom")
    assert store.load_jobs() == [b"kept"]
    assert store.load_nodes() == {}
    assert store.get_meta("k") is None
    assert store.queued_records(10) == []
    with store.transaction() as tx:  # and the store goes on working
        tx.put_job(3, b"after")
    assert store.load_jobs() == [b"kept", b"after"]


def test_committed_state_survives_reopen(opener: tuple[str, Opener]) -> None:
    first = opener[1]()
    with first.transaction() as tx:
        tx.put_job(1, b"job")
        tx.put_node("n1", b"node")
        tx.put_reservation("r", b"resv")
        tx.set_meta("next_job_id", "2")
        tx.enqueue_record(b"rec")
    first.close()
    second = opener[1]()
    assert second.load_jobs() == [b"job"]
    assert second.load_nodes() == {"n1": b"node"}
    assert second.load_reservations() == [b"resv"]
    assert second.get_meta("next_job_id") == "2"
    assert [data for _, data in second.queued_records(10)] == [b"rec"]


CRASHING_WRITER = """
import os, signal, sys
from pathlib import Path
from ctld.store import StateStore
from ctld.store_mariadb import MariaDBBackend
from shoal.conf.statestore import StateStoreConf
kind, where = sys.argv[1], sys.argv[2]
if kind == "sqlite":
    store = StateStore(Path(where))
else:
    store = StateStore(backend=MariaDBBackend(StateStoreConf(kind="mysql", user="root", host=sys.argv[3],
                                                             port=int(sys.argv[4]), database=where), ""))
with store.transaction() as tx:
    tx.put_job(1, b"committed")
with store.transaction() as tx:
    tx.put_job(2, b"never committed")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_commit_survives_kill_9_of_the_writer_and_an_open_transaction_does_not(
    opener: tuple[str, Opener], tmp_path: Path
) -> None:
    engine, open_store = opener
    store = open_store()  # creates the schema
    if engine == "sqlite":
        argv = ["sqlite", str(tmp_path)]
    else:
        from tests.state_db import HOST, PORT

        argv = ["mysql", engine.split(":", 1)[1], HOST, str(PORT)]
    out = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == -9, out.stderr
    assert store.load_jobs() == [b"committed"]
    assert open_store().load_jobs() == [b"committed"]


def test_concurrent_writers_lose_nothing(opener: tuple[str, Opener]) -> None:
    """Two handles (as two ctld threads or processes would) and four threads each: every committed
    transaction is there whole, and no accounting sequence number is handed out twice."""
    open_store = opener[1]
    stores = [open_store(), open_store()]
    seqs: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        store = stores[n % 2]
        try:
            for i in range(25):
                job_id = n * 1000 + i
                with store.transaction() as tx:
                    tx.put_job(job_id, f"job {job_id}".encode())
                    seq = tx.enqueue_record(f"record {job_id}".encode())
                    tx.set_meta("last_writer", str(n))
                with lock:
                    seqs.append(seq)
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    reader = open_store()
    assert sorted(reader.load_jobs()) == sorted(
        f"job {n * 1000 + i}".encode() for n in range(4) for i in range(25)
    )
    queued = reader.queued_records(1000)
    assert sorted(seq for seq, _ in queued) == sorted(seqs) and len(set(seqs)) == 100
    assert all(data == f"record {int(data.split()[1])}".encode() for _, data in queued)
    assert reader.get_meta("last_writer") in {"0", "1", "2", "3"}
