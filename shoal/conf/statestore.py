"""Where ctld keeps its state: SQLite under StateSaveLocation (the default) or a MariaDB/MySQL database.

shoal's own keys, validated here so a bad value fails at file:line when slurm.conf loads:
`ShoalStateStore=mysql://user@host[:port]/database` (the password never in slurm.conf, which every host
reads: it lives in `ShoalStateStorePassFile`, readable by SlurmUser only), and `ShoalLeaseTimeout`
(seconds a leader may stay silent before another ctld takes over; docs/ha.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from shoal.conf.errors import ConfigError
from shoal.conf.values import Values

DEFAULT_LEASE_TIMEOUT = 5
MYSQL_PORT = 3306
_SCHEMES = ("mysql", "mariadb")
_DATABASE = re.compile(r"[A-Za-z0-9_$]{1,64}")
_EXPECTED = "sqlite, or mysql://user@host[:port]/database"


@dataclass(frozen=True)
class StateStoreConf:
    """The state store as configured; `kind` is "sqlite" (then the other fields are unused) or "mysql"."""

    kind: str = "sqlite"
    user: str = ""
    host: str = ""
    port: int = MYSQL_PORT
    database: str = ""
    pass_file: str = ""
    lease_timeout: int = DEFAULT_LEASE_TIMEOUT

    @property
    def location(self) -> str:
        """The database for messages to the admin (never with a password)."""
        return f"mysql://{self.user}@{self.host}:{self.port}/{self.database}"


def parse_state_store(values: Values) -> StateStoreConf:
    """ShoalStateStore, ShoalStateStorePassFile and ShoalLeaseTimeout from slurm.conf's top level."""
    lease_timeout = values.integer("ShoalLeaseTimeout", DEFAULT_LEASE_TIMEOUT)
    if lease_timeout < 1:
        raise values.invalid("ShoalLeaseTimeout", "a whole number of seconds, at least 1")
    pass_file = values.text("ShoalStateStorePassFile", "")
    raw = values.text("ShoalStateStore", "sqlite").strip()
    if raw.lower() == "sqlite":
        return StateStoreConf(lease_timeout=lease_timeout)
    try:
        url = urlsplit(raw)
        port = url.port or MYSQL_PORT
    except ValueError:
        raise values.invalid("ShoalStateStore", _EXPECTED) from None
    database = url.path.removeprefix("/")
    if (
        url.scheme.lower() not in _SCHEMES
        or not url.username
        or not url.hostname
        or url.query
        or url.fragment
    ):
        raise values.invalid("ShoalStateStore", _EXPECTED)
    if url.password is not None:  # the message leaves the value out: it holds the password
        raise ConfigError(
            f"{values.source('ShoalStateStore')}: invalid value for ShoalStateStore: no password in the URL "
            "(put it in ShoalStateStorePassFile, readable by SlurmUser only)"
        )
    if not _DATABASE.fullmatch(database):
        raise values.invalid("ShoalStateStore", "a database name of letters, digits, _ and $")
    return StateStoreConf(
        kind="mysql",
        user=unquote(url.username),
        host=url.hostname,
        port=port,
        database=database,
        pass_file=pass_file,
        lease_timeout=lease_timeout,
    )
