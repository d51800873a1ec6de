"""A scratch MariaDB database for the state store's and the lease's tests (unit and e2e).

The server is 127.0.0.1:3306 (root, no password; SHOAL_TEST_MARIADB_HOST/PORT move it). Each user of
`scratch_database` gets its own ha_test_<random> database, dropped afterwards. Without a reachable
server the MariaDB tests are skipped with the reason, except under CI=true, where they fail.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pymysql
import pytest

from shoal.conf.statestore import StateStoreConf

HOST = os.environ.get("SHOAL_TEST_MARIADB_HOST", "127.0.0.1")
PORT = int(os.environ.get("SHOAL_TEST_MARIADB_PORT", "3306"))
USER = "root"


def admin() -> pymysql.Connection:
    return pymysql.connect(host=HOST, port=PORT, user=USER, autocommit=True, connect_timeout=3)


def require_mariadb() -> None:
    """Skip (fail under CI=true) when the server cannot be reached."""
    try:
        admin().close()
    except pymysql.err.Error as exc:
        reason = f"MariaDB at {HOST}:{PORT} unreachable: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@contextmanager
def scratch_database(lease_timeout: int = 5) -> Iterator[StateStoreConf]:
    """A new empty database, as the state store's configuration; dropped when the block ends."""
    require_mariadb()
    name = f"ha_test_{uuid.uuid4().hex[:12]}"
    conn = admin()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        yield StateStoreConf(
            kind="mysql", user=USER, host=HOST, port=PORT, database=name, lease_timeout=lease_timeout
        )
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


def kill_connections(database: str) -> int:
    """End every connection to `database` from the server's side, as a server restart does."""
    conn = admin()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s AND ID <> CONNECTION_ID()",
                (database,),
            )
            ids = [int(row[0]) for row in cur.fetchall()]
            for conn_id in ids:
                try:
                    cur.execute("KILL CONNECTION %s", (conn_id,))
                except pymysql.err.Error:
                    pass
        return len(ids)
    finally:
        conn.close()


class Relay:
    """A TCP relay in front of the MariaDB server, so a test can make the server go away for one client
    only (the shared server itself is never touched): `cut()` ends every connection through it, as a
    server restart does; `stop()` also refuses new ones, as a server that stays down; `start()` again."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                server = socket.create_connection((HOST, PORT), timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def stop(self) -> None:
        if self._listener is not None:
            try:  # wakes the accepting thread; a bare close() leaves the port listening while it waits
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        self.cut()
