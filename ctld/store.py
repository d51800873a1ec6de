"""ctld's durable state in StateSaveLocation: SQLite in WAL mode behind one small interface.

Every change is committed before the RPC that caused it answers, so a kill -9 at any moment loses no
acknowledged job. Records are stored as serialized protobuf blobs keyed by id; memory is rebuilt from
them on restart. The interface is small so a later HA mode can keep the same schema on MariaDB/Galera.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shoal.private import private_dir, private_file

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (job_id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS reservations (name TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS acct_queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, data BLOB NOT NULL);
"""


class StoreError(Exception):
    """The state store cannot be opened or written; str() is the message for the admin."""


class StateStore:
    """Transactional key/blob store. Writes happen inside `transaction()`; one writer at a time."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "ctld_state.db"
        try:
            private_dir(self.path.parent)  # every job's script and environment: SlurmUser's only
            private_file(self.path)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit survives a process crash (kill -9); FULL would add an fsync per
            # commit for power-loss safety. StateSaveFsync=yes (shoal key) turns that on.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open state store {self.path}: {exc}") from exc
        self._lock = threading.Lock()
        self._in_tx = False

    @contextmanager
    def transaction(self) -> Iterator[StateStore]:
        """All writes inside commit together or not at all."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._in_tx = True
            try:
                yield self
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")
            finally:
                self._in_tx = False

    def _require_tx(self) -> None:
        if not self._in_tx:
            raise StoreError("state store write outside a transaction")

    # ---- writes (inside a transaction) ----
    def put_job(self, job_id: int, data: bytes) -> None:
        self._require_tx()
        self._db.execute("INSERT OR REPLACE INTO jobs (job_id, data) VALUES (?, ?)", (job_id, data))

    def delete_job(self, job_id: int) -> None:
        self._require_tx()
        self._db.execute("DELETE FROM jobs WHERE job_id = ?", (job_id,))

    def put_node(self, name: str, data: bytes) -> None:
        self._require_tx()
        self._db.execute("INSERT OR REPLACE INTO nodes (name, data) VALUES (?, ?)", (name, data))

    def put_reservation(self, name: str, data: bytes) -> None:
        self._require_tx()
        self._db.execute("INSERT OR REPLACE INTO reservations (name, data) VALUES (?, ?)", (name, data))

    def delete_reservation(self, name: str) -> None:
        self._require_tx()
        self._db.execute("DELETE FROM reservations WHERE name = ?", (name,))

    def set_meta(self, key: str, value: str) -> None:
        self._require_tx()
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def enqueue_record(self, data: bytes) -> int:
        """Append an accounting record to the queue (ctld.accounting); returns its sequence number."""
        self._require_tx()
        cur = self._db.execute("INSERT INTO acct_queue (data) VALUES (?)", (data,))
        return int(cur.lastrowid or 0)

    def queued_records(self, limit: int) -> list[tuple[int, bytes]]:
        """The oldest `limit` queued accounting records, in sequence order."""
        with self._lock:
            rows = self._db.execute("SELECT seq, data FROM acct_queue ORDER BY seq LIMIT ?", (limit,)).fetchall()
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def drop_records_through(self, seq: int) -> None:
        """dbd stored every record up to `seq`: forget them."""
        with self.transaction():
            self._db.execute("DELETE FROM acct_queue WHERE seq <= ?", (seq,))

    # ---- reads (start-up) ----
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def load_jobs(self) -> list[bytes]:
        with self._lock:
            return [bytes(r[0]) for r in self._db.execute("SELECT data FROM jobs ORDER BY job_id")]

    def load_nodes(self) -> dict[str, bytes]:
        with self._lock:
            return {str(r[0]): bytes(r[1]) for r in self._db.execute("SELECT name, data FROM nodes")}

    def load_reservations(self) -> list[bytes]:
        with self._lock:
            return [bytes(r[0]) for r in self._db.execute("SELECT data FROM reservations ORDER BY name")]

    def close(self) -> None:
        with self._lock:
            self._db.close()
