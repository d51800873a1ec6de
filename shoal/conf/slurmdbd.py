"""slurmdbd.conf -> SlurmdbdConfig: where shoal-dbd listens and which database it keeps.

StorageType=accounting_storage/mysql uses MariaDB/MySQL (StorageHost/Port/User/Pass, database
StorageLoc); accounting_storage/sqlite (shoal's name for the embedded backend) keeps a SQLite file
at StorageLoc. Errors cite "file:line" like every other config file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from shoal.conf.errors import ConfigError
from shoal.conf.reader import parse_config_text, read_config_file
from shoal.conf.values import Values

DEFAULT_PATH = "/etc/slurm/slurmdbd.conf"
STORAGE_TYPES = ("accounting_storage/mysql", "accounting_storage/sqlite")
KNOWN_KEYS = frozenset(
    k.lower()
    for k in (
        "ArchiveJobs",
        "ArchiveSteps",
        "ArchiveEvents",
        "ArchiveDir",
        "AuthType",
        "AuthInfo",
        "AuthKeyFile",
        "DbdAddr",
        "DbdHost",
        "DbdPort",
        "DebugLevel",
        "LogFile",
        "PidFile",
        "PrivateData",
        "PurgeJobAfter",
        "PurgeStepAfter",
        "PurgeEventAfter",
        "PurgeUsageAfter",
        "SlurmUser",
        "StorageHost",
        "StorageLoc",
        "StoragePass",
        "StoragePort",
        "StorageType",
        "StorageUser",
        "StorageParameters",
        "TrackWCKey",
    )
)


@dataclass(frozen=True)
class SlurmdbdConfig:
    path: str
    storage_type: str = "accounting_storage/sqlite"
    storage_host: str = "localhost"
    storage_port: int = 3306
    storage_user: str = "root"
    storage_pass: str = ""
    storage_loc: str = ""
    dbd_host: str = "localhost"
    dbd_addr: str = ""
    dbd_port: int = 6819
    auth_key_file: str = ""
    log_file: str = ""
    pid_file: str = ""
    slurm_user: str = "root"
    purge_job_after_h: int = 0  # 0 = keep forever
    private_data: tuple[str, ...] = ()  # PrivateData: jobs, users, accounts (dbd/privacy.py)
    warnings: tuple[str, ...] = ()

    @property
    def listen_addr(self) -> str:
        return self.dbd_addr or self.dbd_host

    def database_url(self) -> str:
        """The SQLAlchemy URL of the configured backend."""
        if self.storage_type == "accounting_storage/sqlite":
            loc = self.storage_loc or str(Path(self.path).parent / "slurm_acct_db.sqlite")
            return f"sqlite:///{loc}"
        auth = quote(self.storage_user, safe="")
        if self.storage_pass:
            auth += ":" + quote(self.storage_pass, safe="")
        db = self.storage_loc or "slurm_acct_db"
        return f"mysql+pymysql://{auth}@{self.storage_host}:{self.storage_port}/{db}?charset=utf8mb4"


def _purge_hours(values: Values, key: str) -> int:
    """PurgeJobAfter: a number with an optional unit (hours, days, months); the default unit is months."""
    raw = (values.raw(key) or "").strip().lower()
    if not raw:
        return 0
    digits = "".join(ch for ch in raw if ch.isdigit())
    unit = raw[len(digits) :]
    if not digits:
        raise values.invalid(key, "a number with an optional unit: hours, days or months")
    number = int(digits)
    for names, hours in (
        (("h", "hour", "hours"), 1),
        (("d", "day", "days"), 24),
        (("", "m", "month", "months"), 720),
    ):
        if unit in names:
            return number * hours
    raise values.invalid(key, "a number with an optional unit: hours, days or months")


def parse_slurmdbd_conf(path: str, text: str | None = None) -> SlurmdbdConfig:
    """Parse slurmdbd.conf at `path` (or `text` as if read from it)."""
    lines = read_config_file(path) if text is None else parse_config_text(path, text)
    settings: dict[str, tuple[str, str]] = {}
    warnings: list[str] = []
    for line in lines:
        for key, value in line.pairs:
            if key.lower() not in KNOWN_KEYS:
                warnings.append(f"{line.source}: unknown key {key} ignored")
            settings[key.lower()] = (value, line.source)
    values = Values(settings, path)
    storage_type = values.text("StorageType", "accounting_storage/sqlite").lower()
    if storage_type not in STORAGE_TYPES:
        raise values.invalid("StorageType", " or ".join(STORAGE_TYPES))
    default_key = str(Path(path).parent / "shoal.key")
    return SlurmdbdConfig(
        path=path,
        storage_type=storage_type,
        storage_host=values.text("StorageHost", "localhost"),
        storage_port=values.integer("StoragePort", 3306),
        storage_user=values.text("StorageUser", "root"),
        storage_pass=values.text("StoragePass", ""),
        storage_loc=values.text("StorageLoc", ""),
        dbd_host=values.text("DbdHost", "localhost"),
        dbd_addr=values.text("DbdAddr", ""),
        dbd_port=values.integer("DbdPort", 6819),
        auth_key_file=values.text("AuthKeyFile", default_key),
        log_file=values.text("LogFile", ""),
        pid_file=values.text("PidFile", ""),
        slurm_user=values.text("SlurmUser", "root"),
        purge_job_after_h=_purge_hours(values, "PurgeJobAfter"),
        private_data=tuple(w.lower() for w in values.words("PrivateData")),
        warnings=tuple(warnings),
    )


def load_slurmdbd_conf(path: str | None = None) -> SlurmdbdConfig:
    """slurmdbd.conf from `path`, else $SLURMDBD_CONF, else beside $SLURM_CONF, else /etc/slurm."""
    if path is None:
        path = os.environ.get("SLURMDBD_CONF")
    if path is None and os.environ.get("SLURM_CONF"):
        path = str(Path(os.environ["SLURM_CONF"]).parent / "slurmdbd.conf")
    return parse_slurmdbd_conf(path or DEFAULT_PATH)


__all__ = ["ConfigError", "SlurmdbdConfig", "load_slurmdbd_conf", "parse_slurmdbd_conf"]
