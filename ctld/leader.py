"""Leadership of the cluster through a lease row in the state database, with a fencing epoch.

One row per cluster: the holder, an epoch (the fencing token: it grows by one at every change of
holder) and an expiry computed by the DATABASE's clock, so hosts whose clocks disagree still agree on
who leads. The holder renews well before the expiry; another ctld may take the lease only once it has
expired, and then bumps the epoch. Every write transaction of the state store locks the row and
checks the epoch (`check_fence`), so a deposed holder that wakes up (SIGSTOP, a long pause) cannot
commit anything: its transaction is refused and it learns it must step down. A holder stopped in the
middle of a transaction holds the row's lock; the taker then kills that connection (recorded as
`store_conn`), which rolls the transaction back on the server.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql

from ctld.mariadb import LOCK_WAIT_TIMEOUT, close_quietly, connect, error_code, is_connection_error
from ctld.store import FencedError, StoreError
from shoal.conf.statestore import StateStoreConf

LEASE_NAME = "shoal-ctld"
LEASE_DDL = """CREATE TABLE IF NOT EXISTS shoal_lease (
    name VARCHAR(64) NOT NULL PRIMARY KEY,
    holder VARCHAR(255) NOT NULL,
    epoch BIGINT NOT NULL,
    expires DATETIME(6) NOT NULL,
    store_conn BIGINT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

log = logging.getLogger("shoal.ctld.leader")


def create_lease_row(cur: pymysql.cursors.Cursor, name: str = LEASE_NAME) -> None:
    """The lease table and its row (epoch 0, expired: nobody holds it yet)."""
    cur.execute(LEASE_DDL)
    cur.execute(
        "INSERT IGNORE INTO shoal_lease (name, holder, epoch, expires) VALUES (%s, '', 0, NOW(6) - INTERVAL 1 SECOND)",
        (name,),
    )


def check_fence(cur: pymysql.cursors.Cursor, epoch: int | None, name: str = LEASE_NAME) -> None:
    """Inside a write transaction: lock the lease row (one writer at a time) and refuse if `epoch` is no
    longer the lease's (None: a store without a lease, as in a single ctld's tests, only locks)."""
    cur.execute("SELECT epoch FROM shoal_lease WHERE name = %s FOR UPDATE", (name,))
    row = cur.fetchone()
    current = int(row[0]) if row else 0
    if epoch is not None and current != epoch:
        raise FencedError(f"leadership lost: this ctld holds epoch {epoch}, the lease is at epoch {current}")


def register_store_connection(cur: pymysql.cursors.Cursor, epoch: int, name: str = LEASE_NAME) -> None:
    """Record the holder's store connection, for a taker to kill if it is stuck in a transaction."""
    cur.execute(
        "UPDATE shoal_lease SET store_conn = CONNECTION_ID() WHERE name = %s AND epoch = %s", (name, epoch)
    )
    if cur.rowcount != 1:
        raise FencedError(f"leadership lost: the lease is no longer at epoch {epoch}")


@dataclass(frozen=True)
class LeaseState:
    holder: str
    epoch: int
    expired: bool
    store_conn: int | None


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Lease:
    """Acquire, renew and release the cluster's leadership lease (its own connection, apart from the store's)."""

    def __init__(
        self,
        conf: StateStoreConf,
        password: str,
        *,
        holder: str | None = None,
        timeout: float | None = None,
        name: str = LEASE_NAME,
    ) -> None:
        self.conf = conf
        self.holder = holder or default_holder()
        self.timeout = float(timeout if timeout is not None else conf.lease_timeout)
        self.name = name
        self.epoch: int | None = None
        self._renewed_at = 0.0  # time.monotonic() when the last renewal was sent: the holder's own deadline
        self._password = password
        self._conn: pymysql.Connection | None = None
        self._lock = threading.Lock()

    # ---- the connection ----
    def _cursor(self) -> pymysql.cursors.Cursor:
        if self._conn is None:
            # one attempt: the renewal loop tries again every third of the timeout
            self._conn = connect(self.conf, self._password, lock_wait_s=1, give_up_after=0)
            with self._conn.cursor() as cur:
                create_lease_row(cur, self.name)
        return self._conn.cursor()

    def _drop(self) -> None:
        close_quietly(self._conn)
        self._conn = None

    def state(self) -> LeaseState:
        """Who holds the lease now, as the database sees it."""
        with self._lock, self._cursor() as cur:
            return self._read(cur)

    def _read(self, cur: pymysql.cursors.Cursor, lock: str = "") -> LeaseState:
        cur.execute(
            "SELECT holder, epoch, expires <= NOW(6), store_conn FROM shoal_lease WHERE name = %s" + lock,
            (self.name,),
        )
        holder, epoch, expired, store_conn = cur.fetchone()
        return LeaseState(
            str(holder), int(epoch), bool(expired), None if store_conn is None else int(store_conn)
        )

    # ---- acquire / renew / release ----
    def try_acquire(self) -> bool:
        """Take the lease if it is free (expired, or never held); True when this ctld now holds it."""
        with self._lock:
            if self.epoch is not None:
                return self._renew()
            try:
                return self._take()
            except pymysql.err.Error as exc:
                if is_connection_error(exc):
                    self._drop()
                    return False
                raise StoreError(f"cannot take the leadership lease: {exc}") from exc

    def _take(self) -> bool:
        sent = time.monotonic()
        with self._cursor() as cur:
            seen = self._read(cur)  # a plain read: never waits for a lock
            if not seen.expired:
                return False
            assert self._conn is not None
            self._conn.begin()
            try:
                locked = self._read(cur, " FOR UPDATE")
            except pymysql.err.OperationalError as exc:
                self._conn.rollback()
                if error_code(exc) != LOCK_WAIT_TIMEOUT:
                    raise
                if seen.store_conn is None:
                    return False
                # the expired holder is stuck inside a write transaction (stopped?): end it on the server
                log.warning(
                    "lease holder %s (epoch %d) is stuck in a transaction: killing its connection %d",
                    seen.holder,
                    seen.epoch,
                    seen.store_conn,
                )
                try:
                    cur.execute("KILL CONNECTION %s", (seen.store_conn,))
                except pymysql.err.Error as kill_exc:
                    log.warning("cannot kill connection %d: %s", seen.store_conn, kill_exc)
                return False
            if not locked.expired or locked.epoch != seen.epoch:
                self._conn.rollback()
                return False
            cur.execute(
                "UPDATE shoal_lease SET holder = %s, epoch = epoch + 1, store_conn = NULL,"
                " expires = NOW(6) + INTERVAL %s MICROSECOND WHERE name = %s",
                (self.holder, int(self.timeout * 1e6), self.name),
            )
            self._conn.commit()
            self.epoch = locked.epoch + 1
            self._renewed_at = sent
            log.info("took the leadership lease (epoch %d; previous holder %r)", self.epoch, locked.holder)
            return True

    def renew(self) -> bool:
        """Push the expiry out by the timeout; False (and epoch None) once another ctld holds the lease."""
        with self._lock:
            return self._renew()

    def _renew(self) -> bool:
        if self.epoch is None:
            return False
        sent = time.monotonic()
        try:
            with self._cursor() as cur:
                cur.execute(
                    "UPDATE shoal_lease SET expires = NOW(6) + INTERVAL %s MICROSECOND"
                    " WHERE name = %s AND holder = %s AND epoch = %s",
                    (int(self.timeout * 1e6), self.name, self.holder, self.epoch),
                )
                renewed = bool(cur.rowcount == 1)
        except (pymysql.err.Error, StoreError) as exc:
            # the database is unreachable: still the holder until the lease's expiry (the store's fence
            # refuses writes anyway); past it, a backup may hold it: step down
            self._drop()
            if time.monotonic() - self._renewed_at < self.timeout:
                log.warning("cannot renew the leadership lease: %s", exc)
                return True
            log.error("leadership lost: no renewal of the lease for %.0f s: %s", self.timeout, exc)
            self.epoch = None
            return False
        if renewed:
            self._renewed_at = sent
        else:
            log.error("leadership lost: the lease is no longer at epoch %d", self.epoch)
            self.epoch = None
        return renewed

    def release(self) -> None:
        """Step down on purpose: expire the lease now so a backup takes over at once."""
        with self._lock:
            if self.epoch is None:
                return
            for attempt in (1, 2):  # the connection may have died since the last renewal: one fresh try
                try:
                    with self._cursor() as cur:
                        cur.execute(
                            "UPDATE shoal_lease SET expires = NOW(6) - INTERVAL 1 SECOND, store_conn = NULL"
                            " WHERE name = %s AND epoch = %s",
                            (self.name, self.epoch),
                        )
                    break
                except (pymysql.err.Error, StoreError) as exc:
                    self._drop()
                    if attempt == 2:
                        log.warning(
                            "cannot release the leadership lease (a backup waits for its expiry): %s", exc
                        )
            self.epoch = None

    def close(self) -> None:
        with self._lock:
            self._drop()

    # ---- the loop a leader runs ----
    def keep(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Renew every third of the timeout until `stop`; call `on_lost` once when the lease is gone."""
        while not stop.wait(self.timeout / 3):
            if not self.renew():
                on_lost()
                return


def wait_for_lease(lease: Lease, stop: threading.Event, poll: float | None = None) -> bool:
    """Stand by until this ctld holds the lease (True) or `stop` is set (False)."""
    interval = poll if poll is not None else min(1.0, lease.timeout / 4)
    logged = False
    while not stop.is_set():
        try:
            if lease.try_acquire():
                return True
        except StoreError as exc:  # the database went away while standing by: keep trying
            log.warning("%s", exc)
        if not logged:
            try:
                log.info("standing by: the leadership lease is held by %s", lease.state().holder)
            except (pymysql.err.Error, StoreError):
                pass
            logged = True
        stop.wait(interval)
    return False
