"""The MariaDB state store's own failure modes: a server that drops the connection (a restart), one that
stays away, and a password file others may read."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ctld.mariadb import read_password
from ctld.store import StateStore, StoreError
from ctld.store_mariadb import MariaDBBackend
from shoal.conf.statestore import StateStoreConf
from tests.state_db import kill_connections, scratch_database


def test_a_dropped_connection_is_reopened_for_the_next_transaction() -> None:
    with scratch_database() as conf:
        store = StateStore(backend=MariaDBBackend(conf, ""))
        with store.transaction() as tx:
            tx.put_job(1, b"before")
        assert kill_connections(conf.database) == 1  # what a server restart does to every client
        with store.transaction() as tx:
            tx.put_job(2, b"after")
        assert store.load_jobs() == [b"before", b"after"]
        kill_connections(conf.database)
        assert store.get_meta("x") is None  # reads reconnect too
        store.close()


def test_a_connection_lost_inside_a_transaction_fails_it_and_nothing_of_it_is_kept() -> None:
    with scratch_database() as conf:
        store = StateStore(backend=MariaDBBackend(conf, ""))
        with pytest.raises(StoreError, match="in a transaction"), store.transaction() as tx:
            tx.put_job(1, b"half")
            kill_connections(conf.database)
            tx.put_job(2, b"other half")
        assert store.load_jobs() == []
        store.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_that_stays_away_is_a_clear_error_naming_the_database() -> None:
    conf = StateStoreConf(kind="mysql", user="slurm", host="127.0.0.1", port=_closed_port(), database="shoal")
    with pytest.raises(StoreError) as caught:  # it gives up (after reconnect_for) rather than hang
        MariaDBBackend(conf, "", reconnect_for=1.0)
    message = str(caught.value)
    assert message.startswith(f"cannot reach the state store mysql://slurm@127.0.0.1:{conf.port}/shoal: ")
    assert "Can't connect" in message


def test_password_file_must_be_private(tmp_path: Path) -> None:
    secret = tmp_path / "state.pass"
    secret.write_text("s3cret\n")
    secret.chmod(0o644)
    with pytest.raises(
        StoreError, match=f"ShoalStateStorePassFile {secret} may be read by others: chmod 600 it"
    ):
        read_password(str(secret))
    secret.chmod(0o600)
    assert read_password(str(secret)) == "s3cret"
    with pytest.raises(StoreError, match="cannot read ShoalStateStorePassFile .*missing"):
        read_password(str(tmp_path / "missing"))
