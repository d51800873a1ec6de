"""`shoal up --ha`: a primary and a backup shoal-ctld of the local cluster, on MariaDB at 127.0.0.1:3306.

Two SlurmctldHost lines on two loopback addresses (one host plays both heads), the state store in a
database of its own per cluster directory (shoal_<hash of the directory>), created here as root with
no password (this machine's server); docs/ha.md says how the two share the leadership.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

DB_HOST = "127.0.0.1"
DB_PORT = 3306
HEADS = ("head1", "head2")


def database(directory: Path) -> str:
    """The cluster's own database: the same directory always gets the same one."""
    return "shoal_" + hashlib.sha256(str(directory).encode()).hexdigest()[:12]


def backup_addr(base_addr: str) -> str:
    """The backup's loopback address: .254 of the nodes' /24 (the primary keeps 127.0.0.1)."""
    a, b, c, _d = base_addr.split(".")
    return f"{a}.{b}.{c}.254"


def conf_lines(directory: Path, base_addr: str) -> list[tuple[str, str]]:
    """slurm.conf's lines for two heads on the cluster's database."""
    return [
        ("SlurmctldHost", f"{HEADS[0]}(127.0.0.1)"),
        ("SlurmctldHost", f"{HEADS[1]}({backup_addr(base_addr)})"),
        ("ShoalStateStore", f"mysql://root@{DB_HOST}:{DB_PORT}/{database(directory)}"),
    ]


def create_database(directory: Path) -> str | None:
    """CREATE DATABASE IF NOT EXISTS; an error for the user (None when done)."""
    import pymysql

    name = database(directory)
    try:
        conn = pymysql.connect(host=DB_HOST, port=DB_PORT, user="root", password="", connect_timeout=5)
    except pymysql.err.Error as exc:
        return f"--ha needs MariaDB at {DB_HOST}:{DB_PORT} (root, no password): {exc}"
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{name}`")
    except pymysql.err.Error as exc:
        return f"cannot create the database {name}: {exc}"
    finally:
        conn.close()
    return None


def pid_names(directory: Path) -> tuple[str, ...]:
    """The two ctlds' pid files that `shoal up --ha` writes (run/ctld-head1.pid, ...), when it did."""
    return tuple(f"ctld-{h}" for h in HEADS if (directory / "run" / f"ctld-{h}.pid").exists())
