"""The leadership lease on MariaDB: acquire, renew, release, takeover after the timeout (by the
database's clock), and fencing: a deposed holder's writes are refused and it learns it lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctld.leader import Lease, wait_for_lease
from ctld.store import FencedError, StateStore, StoreError
from ctld.store_mariadb import MariaDBBackend
from shoal.conf.statestore import StateStoreConf
from tests.state_db import HOST, PORT, scratch_database

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = (
    3  # seconds (the default is 5): renewals every second, so a loaded CI machine does not lose the lease
)


@pytest.fixture
def conf() -> Iterator[StateStoreConf]:
    with scratch_database(lease_timeout=TIMEOUT) as c:
        yield c


def _take(lease: Lease) -> int:
    assert wait_for_lease(lease, threading.Event(), poll=0.1)
    assert lease.epoch is not None
    return lease.epoch


def test_one_holder_at_a_time_and_a_newer_epoch_for_each(conf: StateStoreConf) -> None:
    a, b = Lease(conf, "", holder="head1"), Lease(conf, "", holder="head2")
    assert a.try_acquire() and a.epoch == 1
    assert not b.try_acquire()  # live: renewed within the timeout
    assert a.renew()
    assert not b.try_acquire()
    assert b.state().holder == "head1"
    a.release()  # stepping down on purpose hands over at once
    assert b.try_acquire() and b.epoch == 2
    assert not a.renew() and a.epoch is None
    a.close()
    b.close()


def test_a_silent_holder_is_replaced_after_the_timeout_and_its_writes_are_refused(
    conf: StateStoreConf,
) -> None:
    a, b = Lease(conf, "", holder="head1"), Lease(conf, "", holder="head2")
    epoch_a = _take(a)
    store_a = StateStore(backend=MariaDBBackend(conf, ""))
    store_a.fence(epoch_a)
    with store_a.transaction() as tx:
        tx.put_job(1, b"while leading")
    told: list[str] = []
    store_a.on_fenced = lambda: told.append("step down")
    # head1 falls silent (no renewal): head2 takes over once the database's clock passes the expiry
    assert _take(b) == epoch_a + 1
    with pytest.raises(FencedError, match=f"holds epoch {epoch_a}, the lease is at epoch {epoch_a + 1}"):
        with store_a.transaction() as tx:
            tx.put_job(2, b"after losing the lease")
    assert told == ["step down"]
    assert not a.renew()  # and its renewal tells it the same
    store_b = StateStore(backend=MariaDBBackend(conf, ""))
    store_b.fence(epoch_a + 1)
    with store_b.transaction() as tx:
        tx.put_job(3, b"new leader")
    assert store_b.load_jobs() == [b"while leading", b"new leader"]
    for closable in (store_a, store_b, a, b):
        closable.close()


def test_a_holder_stuck_inside_a_transaction_is_cut_off_and_its_writes_rolled_back(
    conf: StateStoreConf,
) -> None:
    a, b = Lease(conf, "", holder="head1"), Lease(conf, "", holder="head2")
    epoch_a = _take(a)
    store_a = StateStore(backend=MariaDBBackend(conf, ""))
    store_a.fence(epoch_a)
    inside, resume = threading.Event(), threading.Event()
    outcome: list[BaseException | None] = []

    def stuck_writer() -> None:
        try:
            with store_a.transaction() as tx:
                tx.put_job(1, b"written by a stuck leader")
                inside.set()
                resume.wait(60)  # as if SIGSTOPped here, holding the lease row's lock
                tx.put_job(2, b"after waking up")
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    writer = threading.Thread(target=stuck_writer)
    writer.start()
    assert inside.wait(10)
    assert _take(b) == epoch_a + 1  # the taker ended head1's connection rather than wait on its lock
    resume.set()
    writer.join(30)
    assert isinstance(outcome[0], StoreError)
    with pytest.raises(FencedError):
        with store_a.transaction() as tx:
            tx.put_job(3, b"retry")
    assert StateStore(backend=MariaDBBackend(conf, "")).load_jobs() == []
    for closable in (store_a, a, b):
        closable.close()


class Worker:
    """A lease_worker.py process and the lines it printed."""

    def __init__(self, conf: StateStoreConf, holder: str, mode: str, base: int, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.unit.ctld.lease_worker",
                HOST,
                str(PORT),
                conf.database,
                holder,
                str(TIMEOUT),
                mode,
                str(base),
            ],
            cwd=ROOT,
            stdout=out.open("w"),
            stderr=subprocess.STDOUT,
        )

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines()

    def wait_for(self, prefix: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines():
                if line.startswith(prefix):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no {prefix!r} line from the worker: {self.lines()[-20:]}")

    def ids(self, word: str, lines: list[str] | None = None) -> set[int]:
        return {
            int(line.split()[1])
            for line in (lines if lines is not None else self.lines())
            if line.startswith(word + " ")
        }


@pytest.mark.parametrize(
    "mode", ["idle", "in-tx"], ids=["stopped-between-writes", "stopped-inside-a-transaction"]
)
def test_sigstopped_leader_is_deposed_and_cannot_write_after_sigcont(
    conf: StateStoreConf, tmp_path: Path, mode: str
) -> None:
    a = Worker(conf, "head1", mode, 1_000_000, tmp_path / "a.out")
    b = None
    try:
        epoch_a = int(a.wait_for("LEADER").split()[1])
        b = Worker(conf, "head2", mode, 2_000_000, tmp_path / "b.out")
        while len(a.ids("WROTE")) < 3:
            time.sleep(0.05)
        assert "LEADER" not in b.out.read_text()  # a backup stands by while the primary renews
        os.kill(a.proc.pid, signal.SIGSTOP)
        assert int(b.wait_for("LEADER").split()[1]) == epoch_a + 1
        b.wait_for("WROTE")
        before_cont = len(a.lines())
        os.kill(a.proc.pid, signal.SIGCONT)
        assert a.proc.wait(60) == 3, a.lines()
        # refused by the fence check of its next transaction, or, when the taker ended its connection
        # mid-transaction, by the reconnect that finds the lease at another epoch: both name its epoch
        fenced = a.wait_for("FENCED")
        assert fenced.startswith("FENCED leadership lost: ") and f"epoch {epoch_a}" in fenced, fenced
        b.wait_for("WROTE 2000005")  # the new leader goes on writing
    finally:
        for worker in (a, b):
            if worker is not None and worker.proc.poll() is None:
                os.kill(worker.proc.pid, signal.SIGCONT)
                worker.proc.kill()
                worker.proc.wait()
    store = StateStore(backend=MariaDBBackend(conf, ""))
    rows = _rows(store)
    a_rows = {job_id for job_id, holder in rows.items() if holder == "head1"}
    assert a_rows == a.ids("WROTE")  # every write of head1 in the store was acknowledged to it ...
    # ... and none it tried and was not told was written: the write fenced after SIGCONT, whose TRY
    # may come before the SIGSTOP (stopped inside that transaction) or after the SIGCONT (between writes)
    unacknowledged = a.ids("TRY") - a.ids("WROTE")
    assert unacknowledged and not unacknowledged & set(rows), (unacknowledged, a.lines()[before_cont:])
    assert {job_id for job_id, holder in rows.items() if holder == "head2"} >= set(
        range(2_000_001, 2_000_006)
    )
    store.close()


def _rows(store: StateStore) -> dict[int, str]:
    return {int(r[0]): bytes(r[1]).decode() for r in store._read("SELECT job_id, data FROM jobs")}
