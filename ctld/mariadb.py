"""Connections to the MariaDB/MySQL state database: the password file, connecting, telling a lost server
from a refused statement. Shared by the state store (ctld/store_mariadb.py) and the lease (ctld/leader.py).

PyMySQL directly rather than SQLAlchemy: each user holds one long-lived connection with explicit
BEGIN/COMMIT and a handful of fixed statements; what matters is deciding when to reconnect (never in the
middle of a transaction) and a session's lock-wait timeout, which a pool and an ORM layer would hide.
"""

from __future__ import annotations

import os
import stat
import time

import pymysql
from pymysql.constants import CLIENT

from ctld.store import StoreError
from shoal.conf.statestore import StateStoreConf

# client errors: cannot connect, server gone away, lost connection during a query; server errors: the
# connection was killed (KILL, a restart's shutdown), the server is shutting down
CONNECTION_ERRORS = frozenset({2003, 2006, 2013, 2055, 1053, 1927, 4031})
LOCK_WAIT_TIMEOUT = 1205
DEADLOCK = 1213


def read_password(path: str) -> str:
    """The first line of ShoalStateStorePassFile, which nobody but its owner may read ("" when unset)."""
    if not path:
        return ""
    try:
        info = os.stat(path)
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise StoreError(f"ShoalStateStorePassFile {path} may be read by others: chmod 600 it")
        with open(path, encoding="utf-8") as fh:
            return fh.readline().rstrip("\r\n")
    except OSError as exc:
        raise StoreError(f"cannot read ShoalStateStorePassFile {path}: {exc.strerror or exc}") from exc


def error_code(exc: BaseException) -> int:
    """The MySQL error number of a PyMySQL error (0 when it has none)."""
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else 0


def is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, pymysql.err.Error) and (
        error_code(exc) in CONNECTION_ERRORS or isinstance(exc, pymysql.err.InterfaceError)
    )


def connect(
    conf: StateStoreConf, password: str, *, lock_wait_s: int, give_up_after: float
) -> pymysql.Connection:
    """A connection in autocommit mode (reads see the newest commit; writes use explicit BEGIN), retried
    until `give_up_after` seconds have passed, then a StoreError naming the database and the last error."""
    deadline = time.monotonic() + give_up_after
    while True:
        try:
            conn = pymysql.connect(
                host=conf.host,
                port=conf.port,
                user=conf.user,
                password=password,
                database=conf.database,
                autocommit=True,
                connect_timeout=5,
                charset="utf8mb4",
                client_flag=CLIENT.FOUND_ROWS,  # rowcount = rows matched, so "renewed" never reads as "lost"
            )
            with conn.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = %s", (lock_wait_s,))
                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return conn
        except pymysql.err.Error as exc:
            if not is_connection_error(exc) or time.monotonic() >= deadline:
                raise StoreError(f"cannot reach the state store {conf.location}: {_reason(exc)}") from exc
            time.sleep(0.5)


def close_quietly(conn: pymysql.Connection | None) -> None:
    """Close a connection that may already be dead (its server gone, or KILLed)."""
    if conn is not None:
        try:
            conn.close()
        except pymysql.err.Error:
            pass


def _reason(exc: BaseException) -> str:
    args: tuple[object, ...] = tuple(getattr(exc, "args", ()))
    return str(args[1]) if len(args) > 1 else str(exc)
