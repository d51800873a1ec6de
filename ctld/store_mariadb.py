"""The state store's MariaDB/MySQL backend (ShoalStateStore=mysql://...): the same records as SQLite, in
InnoDB, so a primary and its backups share them (docs/ha.md).

A write transaction starts by locking the lease row (`leader.check_fence`): writers take turns, as
with SQLite's BEGIN IMMEDIATE, and a ctld that lost its lease has its transaction refused before it
writes anything. A lost connection (a server restart, a KILL) is reopened at the next transaction or
read, never inside one: the transaction that saw it fails and is rolled back by the server. When the
server stays away for `reconnect_for` seconds the admin gets an error naming the database.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pymysql

from ctld.leader import LEASE_NAME, check_fence, create_lease_row, register_store_connection
from ctld.mariadb import close_quietly, connect, is_connection_error
from ctld.store import FencedError, StoreError
from shoal.conf.statestore import StateStoreConf

_TABLE = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS meta (`key` VARCHAR(191) NOT NULL PRIMARY KEY, value LONGTEXT NOT NULL) {_TABLE}",
    f"CREATE TABLE IF NOT EXISTS jobs (job_id BIGINT NOT NULL PRIMARY KEY, data LONGBLOB NOT NULL) {_TABLE}",
    f"CREATE TABLE IF NOT EXISTS nodes (name VARCHAR(191) NOT NULL PRIMARY KEY, data LONGBLOB NOT NULL) {_TABLE}",
    f"CREATE TABLE IF NOT EXISTS reservations (name VARCHAR(191) NOT NULL PRIMARY KEY, data LONGBLOB NOT NULL) {_TABLE}",
    "CREATE TABLE IF NOT EXISTS acct_queue (seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, data LONGBLOB NOT NULL)"
    f" {_TABLE}",
)  # fmt: skip

log = logging.getLogger("shoal.ctld.store")


class MariaDBBackend:
    """One PyMySQL connection (autocommit for reads, explicit BEGIN for writes), reopened when lost."""

    def __init__(
        self,
        conf: StateStoreConf,
        password: str,
        *,
        reconnect_for: float = 10.0,
        lease_name: str = LEASE_NAME,
    ) -> None:
        self.conf = conf
        self.description = conf.location
        self._password = password
        self._reconnect_for = reconnect_for
        self._lease_name = lease_name
        self._lock_wait_s = max(2, 2 * conf.lease_timeout)
        self._epoch: int | None = None
        self._conn: pymysql.Connection | None = None
        self._statements: dict[str, str] = {}
        self._connection()  # fail at start-up, with the reason, when the database cannot be used

    # ---- the connection ----
    def _connection(self) -> pymysql.Connection:
        if self._conn is not None:
            return self._conn
        conn = connect(
            self.conf, self._password, lock_wait_s=self._lock_wait_s, give_up_after=self._reconnect_for
        )
        try:
            with conn.cursor() as cur:
                for ddl in SCHEMA:
                    cur.execute(ddl)
                create_lease_row(cur, self._lease_name)
                if self._epoch is not None:
                    register_store_connection(cur, self._epoch, self._lease_name)
        except pymysql.err.Error as exc:
            close_quietly(conn)
            raise StoreError(f"cannot use the state store {self.description}: {exc}") from exc
        except FencedError:
            close_quietly(conn)
            raise
        self._conn = conn
        return conn

    def _drop(self, exc: BaseException) -> None:
        log.error("lost the connection to the state store %s: %s", self.description, exc)
        close_quietly(self._conn)
        self._conn = None

    def _sql(self, sql: str) -> str:
        converted = self._statements.get(sql)
        if converted is None:
            converted = self._statements[sql] = sql.replace("?", "%s")
        return converted

    def fence(self, epoch: int) -> None:
        """From now on every write transaction must find the lease at `epoch` (this ctld's)."""
        self._epoch = epoch
        conn = self._connection()
        with conn.cursor() as cur:
            register_store_connection(cur, epoch, self._lease_name)

    # ---- transactions ----
    def begin(self) -> None:
        for attempt in (1, 2):  # a connection found dead before anything was written is reopened once
            conn = self._connection()
            try:
                conn.begin()
                with conn.cursor() as cur:
                    check_fence(cur, self._epoch, self._lease_name)
                return
            except FencedError:
                self.rollback()
                raise
            except pymysql.err.Error as exc:
                if not is_connection_error(exc):
                    self.rollback()
                    raise StoreError(f"state store {self.description}: {exc}") from exc
                self._drop(exc)
                if attempt == 2:
                    raise StoreError(f"state store {self.description}: {exc}") from exc

    def commit(self) -> None:
        conn = self._connection()
        try:
            conn.commit()
        except pymysql.err.Error as exc:
            failure = self._failed(exc, "during a commit (it may not have happened)")
            self.rollback()  # never leave a transaction open: the next BEGIN would commit it
            raise failure from exc

    def rollback(self) -> None:
        if self._conn is None:
            return  # the server rolled back when the connection was lost
        try:
            self._conn.rollback()
        except pymysql.err.Error as exc:
            self._drop(exc)

    def write(self, sql: str, params: Sequence[Any]) -> int:
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                cur.execute(self._sql(sql), tuple(params))
                return int(cur.lastrowid or 0)
        except pymysql.err.Error as exc:
            failure = self._failed(exc, "in a transaction (rolled back)")
            if self._conn is None:
                self._fenced_since_lost()
            raise failure from exc

    def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                cur.executemany(self._sql(sql), [tuple(row) for row in rows])
        except pymysql.err.Error as exc:
            failure = self._failed(exc, "in a transaction (rolled back)")
            if self._conn is None:
                self._fenced_since_lost()
            raise failure from exc

    def _failed(self, exc: pymysql.err.Error, when: str) -> StoreError:
        """The error for a failed statement; a lost connection is dropped, to be reopened later."""
        if is_connection_error(exc):
            self._drop(exc)
            return StoreError(f"lost the state store {self.description} {when}: {exc}")
        return StoreError(f"state store {self.description}: {exc}")

    def _fenced_since_lost(self) -> None:
        """After a lost connection: if a newer leader took the lease meanwhile, say so (FencedError)."""
        if self._epoch is None:
            return
        try:
            self._connection()
        except FencedError:
            raise
        except StoreError:
            return

    def read(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        for attempt in (1, 2):
            conn = self._connection()
            try:
                with conn.cursor() as cur:
                    cur.execute(self._sql(sql), tuple(params))
                    return list(cur.fetchall())
            except pymysql.err.Error as exc:
                if not is_connection_error(exc):
                    raise StoreError(f"state store {self.description}: {exc}") from exc
                self._drop(exc)
                if attempt == 2:
                    raise StoreError(f"state store {self.description}: {exc}") from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        close_quietly(self._conn)
        self._conn = None
