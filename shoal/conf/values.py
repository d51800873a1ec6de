"""Typed reads of one line's (or the top level's) settings, failing with "<file>:<line>: ..."."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shoal import hostlist, sizefmt, timefmt
from shoal.conf.errors import ConfigError

_TRUE = frozenset({"yes", "true", "1", "on"})
_FALSE = frozenset({"no", "false", "0", "off"})
_UNLIMITED = frozenset({"unlimited", "infinite"})
# Slurm keeps its numeric settings in 32 bits, except these (megabytes)
_WIDE_INTEGERS = frozenset({"realmemory", "memspeclimit"})


class Values:
    """Settings keyed by lower-case name, each with the "file:line" it came from.

    Callers ask with Slurm's spelling of a key ("RealMemory"), which is also the spelling used
    in the error message when the value does not convert.
    """

    def __init__(self, settings: Mapping[str, tuple[str, str]], where: str) -> None:
        self._settings = settings
        self._where = where

    def has(self, key: str) -> bool:
        return key.lower() in self._settings

    def source(self, key: str) -> str:
        """Where `key` was set, or where the record starts when it was not."""
        found = self._settings.get(key.lower())
        return found[1] if found else self._where

    def invalid(self, key: str, expected: str) -> ConfigError:
        value = self._settings.get(key.lower(), ("", self._where))[0]
        return ConfigError(f"{self.source(key)}: invalid value for {key}: {value!r} (expected {expected})")

    def raw(self, key: str) -> str | None:
        found = self._settings.get(key.lower())
        return found[0] if found else None

    def text(self, key: str, default: str) -> str:
        value = self.raw(key)
        return default if value is None or value == "" else value

    def integer(self, key: str, default: int, *, unlimited: int | None = None) -> int:
        """A non-negative integer; `unlimited` is what UNLIMITED/INFINITE read as, if allowed."""
        value = self.raw(key)
        if value is None:
            return default
        if value == "":  # "KillWait=": 22.05 refuses to start (a parse error), it never means the default
            raise self.invalid(key, "an integer")
        if unlimited is not None and value.lower() in _UNLIMITED:
            return unlimited
        if not value.isdigit() or not value.isascii():
            raise self.invalid(key, "an integer")
        limit = 2**63 - 1 if key.lower() in _WIDE_INTEGERS else 2**32 - 1
        if len(value.lstrip("0")) > 20 or int(value) > limit:
            raise ConfigError(f"{self.source(key)}: {key} value ({value}) is out of range")
        return int(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None or value == "":
            return default
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise self.invalid(key, "YES or NO")

    def words(self, key: str) -> tuple[str, ...]:
        """A comma-separated list, empty items dropped."""
        value = self.raw(key) or ""
        return tuple(item.strip() for item in value.split(",") if item.strip())

    def minutes(self, key: str, default: int) -> int:
        """A Slurm time limit in minutes (UNLIMITED/INFINITE -> timefmt.UNLIMITED)."""
        value = self.raw(key)
        if value is None or value == "":
            return default
        if value.lower() == "none":
            return timefmt.NOT_SET
        try:
            return timefmt.parse_time_limit(value)
        except ValueError:
            raise self.invalid(key, "a time such as 60, 1:00:00, 1-0 or INFINITE") from None

    def megabytes(self, key: str, default: int) -> int:
        """A memory size in MB (size suffixes allowed; UNLIMITED -> 0)."""
        value = self.raw(key)
        if value is None or value == "":
            return default
        if value.lower() in _UNLIMITED:
            return 0
        try:
            return sizefmt.parse_size_mb(value)
        except ValueError:
            raise self.invalid(key, "a size in MB") from None

    def choice(self, key: str, default: str, choices: Iterable[str]) -> str:
        """One of `choices` (case-insensitive), returned upper-case."""
        value = self.raw(key)
        if value is None or value == "":
            return default
        allowed = tuple(choices)
        if value.upper() not in allowed:
            raise self.invalid(key, "one of " + ", ".join(allowed))
        return value.upper()

    def hostnames(self, key: str) -> list[str]:
        """A hostlist expression expanded ("node[1-2]" -> ["node1", "node2"])."""
        value = self.raw(key) or ""
        try:
            return hostlist.expand(value)
        except hostlist.HostlistError:
            raise self.invalid(key, "a hostlist such as node[1-4]") from None
