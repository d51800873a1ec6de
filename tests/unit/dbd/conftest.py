"""The contract suite's database: every test runs once on SQLite and once on MariaDB.

MariaDB is the server at 127.0.0.1:3306 (root, no password); each test session creates its own
uniquely named database and drops it afterwards. Without a reachable server the MariaDB half is
skipped with the reason printed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from dbd.db import open_database, open_engine

MARIADB_SERVER = os.environ.get("SHOAL_TEST_MARIADB", "mysql+pymysql://root@127.0.0.1:3306")


def _mariadb_reason() -> str | None:
    try:
        engine = create_engine(MARIADB_SERVER, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # any failure to connect means: skip with the reason
        return f"MariaDB at {MARIADB_SERVER} unreachable: {str(exc).splitlines()[0]}"
    return None


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[str]:
    """A fresh database on the MariaDB server for this test session; dropped at the end."""
    reason = _mariadb_reason()
    if reason:
        print(reason)
        pytest.skip(reason)
    name = f"shoal_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(MARIADB_SERVER)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    try:
        yield f"{MARIADB_SERVER}/{name}?charset=utf8mb4"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()


def _wipe_mariadb(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("SET FOREIGN_KEY_CHECKS=0"))
        for (table,) in conn.execute(text("SHOW TABLES")).all():
            conn.execute(text(f"DROP TABLE `{table}`"))
        conn.execute(text("SET FOREIGN_KEY_CHECKS=1"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "mariadb"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database URL on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'acct.sqlite'}"
        return
    url = request.getfixturevalue("mariadb_server")
    _wipe_mariadb(url)
    yield url
    _wipe_mariadb(url)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = open_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(db_url: str) -> Iterator[sessionmaker[Session]]:
    factory = open_database(db_url)
    yield factory
    factory.kw["bind"].dispose()
