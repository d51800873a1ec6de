"""ctld's durable state behind one small interface: SQLite in WAL mode (embedded default) or MariaDB.

Every change is committed before the RPC that caused it answers, so a kill -9 at any moment loses no
acknowledged job. Records are stored as serialized protobuf blobs keyed by id; memory is rebuilt from
them on restart. StateStore holds the records' SQL (written once: both engines read it) and the
transaction discipline; a backend holds the one connection and what differs between the engines
(schema, how a write transaction begins, reconnecting; ctld/store_mariadb.py).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from shoal.private import private_dir, private_file

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (job_id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS reservations (name TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS acct_queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, data BLOB NOT NULL);
"""
STATE_FILE = "ctld_state.db"


class StoreError(Exception):
    """The state store cannot be opened or written; str() is the message for the admin."""


class FencedError(StoreError):
    """This ctld's leadership lease was taken by another (a newer epoch): its write was refused."""


class StoreBackend(Protocol):
    """One connection to one engine. SQL uses `?` placeholders; `write` returns the last row id."""

    description: str

    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def write(self, sql: str, params: Sequence[Any]) -> int: ...
    def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...
    def read(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]: ...
    def fence(self, epoch: int) -> None: ...
    def close(self) -> None: ...


class SqliteBackend:
    """SQLite in WAL mode: BEGIN IMMEDIATE makes one writer at a time, across processes too."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / STATE_FILE
        self.description = str(self.path)
        try:
            private_dir(self.path.parent)  # every job's script and environment: SlurmUser's only
            private_file(self.path)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit survives a process crash (kill -9); FULL would add an fsync per
            # commit for power-loss safety.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open state store {self.path}: {exc}") from exc

    def begin(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self._db.execute("COMMIT")

    def rollback(self) -> None:
        self._db.execute("ROLLBACK")

    def write(self, sql: str, params: Sequence[Any]) -> int:
        return int(self._db.execute(sql, params).lastrowid or 0)

    def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._db.executemany(sql, rows)

    def read(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return list(self._db.execute(sql, params).fetchall())

    def fence(self, epoch: int) -> None:
        raise StoreError("a leadership lease needs the state store on MariaDB (ShoalStateStore=mysql://...)")

    def close(self) -> None:
        self._db.close()


class StateStore:
    """Transactional key/blob store. Writes happen inside `transaction()`; one writer at a time.

    `StateStore(directory)` is SQLite under that directory; `StateStore(backend=...)` any other engine
    (`ctld.store_open.open_store` picks from slurm.conf).
    """

    def __init__(self, directory: str | Path | None = None, *, backend: StoreBackend | None = None) -> None:
        if backend is None:
            if directory is None:
                raise StoreError("state store: no directory and no backend given")
            backend = SqliteBackend(directory)
        self._backend = backend
        self.description = backend.description
        self._lock = threading.Lock()
        self._in_tx = False
        self._after_commit: list[Callable[[], None]] = []
        self.on_fenced: Callable[[], None] | None = None
        """Called once a transaction was refused for a newer leader (shoal-ctld steps down at once)."""

    @contextmanager
    def transaction(self) -> Iterator[StateStore]:
        """All writes inside commit together or not at all; FencedError if this ctld was deposed."""
        with self._lock:
            try:
                self._backend.begin()
                self._in_tx = True
                self._after_commit = []
                try:
                    yield self
                except BaseException:
                    self._backend.rollback()
                    raise
                else:
                    self._backend.commit()
                finally:
                    self._in_tx = False
                done, self._after_commit = self._after_commit, []
                for change in done:  # under the lock: the next transaction sees what this one committed
                    change()
            except FencedError:
                if self.on_fenced is not None:
                    self.on_fenced()
                raise
            finally:
                self._after_commit = []

    def after_commit(self, change: Callable[[], None]) -> None:
        """Run `change` once the open transaction has committed (never if it rolls back or its commit
        fails): for memory that must only say what the store holds."""
        if not self._in_tx:
            raise StoreError("state store after_commit outside a transaction")
        self._after_commit.append(change)

    def _write(self, sql: str, params: Sequence[Any]) -> int:
        if not self._in_tx:
            raise StoreError("state store write outside a transaction")
        return self._backend.write(sql, params)

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not self._in_tx:
            raise StoreError("state store write outside a transaction")
        if rows:
            self._backend.write_many(sql, rows)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._backend.read(sql, params)

    def fence(self, epoch: int) -> None:
        """Refuse every later transaction unless the leadership lease is still at `epoch` (ctld/leader.py)."""
        with self._lock:
            self._backend.fence(epoch)

    # ---- writes (inside a transaction) ----
    # REPLACE INTO and `key` in backquotes: the spelling both SQLite and MariaDB read
    def put_job(self, job_id: int, data: bytes) -> None:
        self._write("REPLACE INTO jobs (job_id, data) VALUES (?, ?)", (job_id, data))

    def put_jobs(self, rows: Sequence[tuple[int, bytes]]) -> None:
        """`put_job` for each (job_id, data), in one statement (an array's tasks)."""
        self._write_many("REPLACE INTO jobs (job_id, data) VALUES (?, ?)", rows)

    def delete_job(self, job_id: int) -> None:
        self._write("DELETE FROM jobs WHERE job_id = ?", (job_id,))

    def put_node(self, name: str, data: bytes) -> None:
        self._write("REPLACE INTO nodes (name, data) VALUES (?, ?)", (name, data))

    def put_reservation(self, name: str, data: bytes) -> None:
        self._write("REPLACE INTO reservations (name, data) VALUES (?, ?)", (name, data))

    def delete_reservation(self, name: str) -> None:
        self._write("DELETE FROM reservations WHERE name = ?", (name,))

    def set_meta(self, key: str, value: str) -> None:
        self._write("REPLACE INTO meta (`key`, value) VALUES (?, ?)", (key, value))

    def enqueue_record(self, data: bytes) -> int:
        """Append an accounting record to the queue (ctld.accounting); returns its sequence number."""
        return self._write("INSERT INTO acct_queue (data) VALUES (?)", (data,))

    def enqueue_records(self, records: Sequence[bytes]) -> None:
        """`enqueue_record` for each, in one statement; they take ascending sequence numbers in order."""
        self._write_many("INSERT INTO acct_queue (data) VALUES (?)", [(data,) for data in records])

    def queued_records(self, limit: int) -> list[tuple[int, bytes]]:
        """The oldest `limit` queued accounting records, in sequence order."""
        rows = self._read("SELECT seq, data FROM acct_queue ORDER BY seq LIMIT ?", (limit,))
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def drop_records_through(self, seq: int) -> None:
        """dbd stored every record up to `seq`: forget them."""
        with self.transaction():
            self._write("DELETE FROM acct_queue WHERE seq <= ?", (seq,))

    # ---- reads (start-up) ----
    def get_meta(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE `key` = ?", (key,))
        return None if not rows else str(rows[0][0])

    def load_jobs(self) -> list[bytes]:
        return [bytes(r[0]) for r in self._read("SELECT data FROM jobs ORDER BY job_id")]

    def load_nodes(self) -> dict[str, bytes]:
        return {str(r[0]): bytes(r[1]) for r in self._read("SELECT name, data FROM nodes")}

    def load_reservations(self) -> list[bytes]:
        return [bytes(r[0]) for r in self._read("SELECT data FROM reservations ORDER BY name")]

    def close(self) -> None:
        with self._lock:
            self._backend.close()
