"""ShoalStateStore / ShoalStateStorePassFile / ShoalLeaseTimeout: where ctld keeps its state, errors at file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.conf import ConfigError, load_slurm_conf
from shoal.conf.statestore import DEFAULT_LEASE_TIMEOUT, StateStoreConf

HEAD = "ClusterName=test\nSlurmctldHost=head\nNodeName=n1 CPUs=1\n"


def _load(tmp_path: Path, text: str) -> StateStoreConf:
    conf = tmp_path / "slurm.conf"
    conf.write_text(HEAD + text)
    cfg = load_slurm_conf(conf)
    assert not [w for w in cfg.warnings if "Shoal" in w]  # shoal's own keys are known keys
    return cfg.state_store


def test_sqlite_is_the_default(tmp_path: Path) -> None:
    assert _load(tmp_path, "") == StateStoreConf(kind="sqlite", lease_timeout=DEFAULT_LEASE_TIMEOUT)
    assert _load(tmp_path, "ShoalStateStore=SQLite\n").kind == "sqlite"


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("ShoalStateStore=mysql://slurm@db1/shoal_state\n", ("slurm", "db1", 3306, "shoal_state")),
        ("shoalstatestore=mariadb://slurm@10.0.0.5:3307/ctld\n", ("slurm", "10.0.0.5", 3307, "ctld")),
    ],
    ids=["default-port", "mariadb-scheme-and-port"],
)
def test_mysql_url(tmp_path: Path, line: str, want: tuple[str, str, int, str]) -> None:
    got = _load(tmp_path, line + "ShoalStateStorePassFile=/etc/slurm/state.pass\nShoalLeaseTimeout=3\n")
    assert (got.kind, got.user, got.host, got.port, got.database) == ("mysql", *want)
    assert (got.pass_file, got.lease_timeout) == ("/etc/slurm/state.pass", 3)
    assert got.location == f"mysql://{want[0]}@{want[1]}:{want[2]}/{want[3]}"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ShoalStateStore=postgres://u@h/db", "expected sqlite, or mysql://user@host[:port]/database"),
        ("ShoalStateStore=mysql://h/db", "expected sqlite, or mysql://user@host[:port]/database"),
        ("ShoalStateStore=mysql://u@h:99999/db", "expected sqlite, or mysql://user@host[:port]/database"),
        ("ShoalStateStore=mysql://u:secret@h/db", "put it in ShoalStateStorePassFile"),
        ("ShoalStateStore=mysql://u@h/", "a database name of letters"),
        ("ShoalStateStore=mysql://u@h/a;drop", "a database name of letters"),
        ("ShoalLeaseTimeout=0", "at least 1"),
        ("ShoalLeaseTimeout=soon", "an integer"),
    ],
    ids=["scheme", "no-user", "port", "password", "no-database", "bad-database", "lease-zero", "lease-word"],
)
def test_bad_values_name_file_and_line(tmp_path: Path, line: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, line + "\n")
    message = str(caught.value)
    assert f"{tmp_path / 'slurm.conf'}:4: invalid value for {line.split('=')[0]}" in message
    assert expected in message
    assert "secret" not in message
