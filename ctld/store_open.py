"""Which state store slurm.conf names: SQLite under StateSaveLocation (the default) or MariaDB.

Apart from ctld/store.py so that the store's interface does not import its MariaDB backend (which
imports the store's errors): no import cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctld.store import STATE_FILE, StateStore

if TYPE_CHECKING:
    from shoal.conf.slurm import SlurmConfig


def open_store(cfg: SlurmConfig, *, clear: bool = False, epoch: int | None = None) -> StateStore:
    """The store slurm.conf names: SQLite under StateSaveLocation, or MariaDB (ShoalStateStore), fenced
    by the leadership lease's `epoch` when given.

    `clear` (shoal-ctld -c) starts from empty state: the SQLite files are removed, the tables emptied.
    """
    conf = cfg.state_store
    if conf.kind == "sqlite":
        directory = Path(cfg.state_save_location or "/var/spool/shoal/ctld")
        if clear:
            for suffix in ("", "-wal", "-shm"):
                Path(str(directory / STATE_FILE) + suffix).unlink(missing_ok=True)
        return StateStore(directory)
    from ctld.mariadb import read_password
    from ctld.store_mariadb import MariaDBBackend

    backend = MariaDBBackend(conf, read_password(conf.pass_file), reconnect_for=float(cfg.msg_timeout))
    store = StateStore(backend=backend)
    if epoch is not None:
        store.fence(epoch)
    if clear:
        with store.transaction():
            for table in ("jobs", "nodes", "reservations", "meta", "acct_queue"):
                store._write(f"DELETE FROM {table}", ())
    return store
