"""slurmdbd.conf: backends, addresses, purge ages and errors that name file:line."""

from __future__ import annotations

import pytest

from shoal.conf.errors import ConfigError
from shoal.conf.slurmdbd import parse_slurmdbd_conf

CASES = [
    ("embedded default", "DbdPort=7000\n", "sqlite:////etc/slurm/slurm_acct_db.sqlite", 7000, 0),
    (
        "sqlite path",
        "StorageType=accounting_storage/sqlite\nStorageLoc=/var/lib/acct.db\n",
        "sqlite:////var/lib/acct.db",
        6819,
        0,
    ),
    (
        "mysql",
        "StorageType=accounting_storage/mysql\nStorageHost=db\nStorageUser=slurm\nStoragePass=p@ss\n"
        "StorageLoc=acct\nPurgeJobAfter=12months\n",
        "mysql+pymysql://slurm:p%40ss@db:3306/acct?charset=utf8mb4",
        6819,
        12 * 720,
    ),
    ("purge in days", "PurgeJobAfter=30days\n", "sqlite:////etc/slurm/slurm_acct_db.sqlite", 6819, 30 * 24),
]


@pytest.mark.parametrize("text,url,port,purge_h", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse(text: str, url: str, port: int, purge_h: int) -> None:
    cfg = parse_slurmdbd_conf("/etc/slurm/slurmdbd.conf", text)
    assert (cfg.database_url(), cfg.dbd_port, cfg.purge_job_after_h) == (url, port, purge_h)


@pytest.mark.parametrize(
    "text,message",
    [
        ("StorageType=accounting_storage/pgsql\n", "slurmdbd.conf:1: invalid value for StorageType"),
        ("\nDbdPort=abc\n", "slurmdbd.conf:2: invalid value for DbdPort"),
        ("PurgeJobAfter=soon\n", "slurmdbd.conf:1: invalid value for PurgeJobAfter"),
    ],
    ids=["storage type", "port", "purge"],
)
def test_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_slurmdbd_conf("/etc/slurm/slurmdbd.conf", text)


def test_unknown_key_is_a_warning() -> None:
    cfg = parse_slurmdbd_conf("/x/slurmdbd.conf", "Bogus=1\n")
    assert cfg.warnings == ("/x/slurmdbd.conf:1: unknown key Bogus ignored",)
