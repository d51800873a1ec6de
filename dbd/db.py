"""Open the accounting database (SQLite file or MariaDB/MySQL through PyMySQL) at the newest schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from dbd import schema
from dbd.models import Meta, Qos

ASSOC_VERSION = "assoc_version"


def open_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, a busy timeout and enforced foreign keys."""
    if url.startswith("sqlite"):
        _private_sqlite(url)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_recycle=3600, isolation_level="READ COMMITTED")


def _private_sqlite(url: str) -> None:
    """The accounting file holds every job's records: readable by SlurmUser only (0600), as ctld's state."""
    from sqlalchemy.engine import make_url

    from shoal.private import private_file

    path = make_url(url).database
    if path and path != ":memory:" and not path.startswith("file:"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        private_file(path)


def open_database(url: str) -> sessionmaker[Session]:
    """Migrate the database at `url` to head and return a session factory."""
    engine = open_engine(url)
    schema.upgrade(engine)
    factory = sessionmaker(engine, expire_on_commit=False)
    with factory.begin() as session:
        ensure_defaults(session)
    return factory


def ensure_defaults(session: Session) -> None:
    """The `normal` QOS and the version counter exist in every database."""
    if session.get(Qos, "normal") is None:
        session.add(Qos(name="normal", description="Normal QOS default"))
    if session.get(Meta, ASSOC_VERSION) is None:
        session.add(Meta(key=ASSOC_VERSION, value=1))


def bump_version(session: Session) -> None:
    """Associations, QOS or users changed: ctld reloads them at its next poll."""
    row = session.scalars(select(Meta).where(Meta.key == ASSOC_VERSION).with_for_update()).first()
    if row is None:
        session.add(Meta(key=ASSOC_VERSION, value=2))
    else:
        row.value += 1


def version(session: Session) -> int:
    row = session.get(Meta, ASSOC_VERSION)
    return 0 if row is None else int(row.value)
