"""Generic resources: "gpu:h100:8" specs on nodes and jobs, and gres.conf (which devices back them)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from shoal.conf.errors import ConfigError
from shoal.conf.keys import GRES_KEYS, canonical
from shoal.conf.reader import ConfLine, parse_config_text, read_config_file
from shoal.conf.values import Values
from shoal.hostlist import split_top_level

_COUNT_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
_GRES_KEYS = canonical(GRES_KEYS)
_AUTODETECT = ("NVML", "RSMI", "ONEAPI", "NRT", "OFF")
"""AutoDetect= values; read case-insensitively and kept lower-case ("nvml", "off")."""


@dataclass(frozen=True)
class GresSpec:
    """A count of one generic resource, optionally of one type: gpu:h100:8 -> ("gpu", "h100", 8)."""

    name: str
    type: str | None
    count: int

    def __str__(self) -> str:
        return format_gres((self,))


MAX_GPUS_PER_NODE = 1024  # far beyond any machine, far below what a typo can ask for


def parse_gres_count(text: str) -> int:
    """Read a GRES count: "8", "1K", "2G" -> a number (suffixes multiply by powers of 1024, as Slurm's)."""
    value = text.strip()
    factor = 1
    if value and value[-1].upper() in _COUNT_SUFFIX:
        factor = _COUNT_SUFFIX[value[-1].upper()]
        value = value[:-1]
    if not value.isdigit() or not value.isascii():
        raise ValueError(f"Invalid GRES count: {text!r}")
    return int(value) * factor


def _is_count(text: str) -> bool:
    try:
        parse_gres_count(text)
    except ValueError:
        return False
    return True


def parse_gres(text: str) -> tuple[GresSpec, ...]:
    """Read node or job GRES ("gpu:h100:8,nic:1") into specs. "gpu" counts 1; "(S:0-1)" socket hints and no_consume are dropped.

    A leading "gres/" or "gres:" (as in TRES strings and TresPerNode) is accepted.
    """
    value = text.strip()
    if not value or value.lower() in ("(null)", "none"):
        return ()
    specs: list[GresSpec] = []
    for item in split_top_level(value, "(", ")"):  # "gpu:2(S:0,1),nic:1"
        item = item.strip()
        if "(" in item:
            item = item[: item.index("(")]
        for prefix in ("gres/", "gres:"):
            if item.lower().startswith(prefix):
                item = item[len(prefix) :]
        parts = [p for p in item.split(":") if p.lower() != "no_consume"]
        name = parts[0] if parts else ""
        if not name or not _NAME_CHARS.issuperset(name) or len(parts) > 3:
            raise ValueError(f"Invalid GRES specification: {text!r}")
        count = 1
        if len(parts) > 1 and _is_count(parts[-1]):
            count = parse_gres_count(parts.pop())
        elif len(parts) == 3:
            raise ValueError(f"Invalid GRES specification: {text!r}")
        gres_type = parts[1] if len(parts) == 2 else None
        if gres_type is not None and not (gres_type and _NAME_CHARS.issuperset(gres_type)):
            raise ValueError(f"Invalid GRES specification: {text!r}")
        specs.append(GresSpec(name, gres_type, count))
    return tuple(specs)


def format_gres(specs: Iterable[GresSpec]) -> str:
    """Specs back to Slurm's text: "gpu:h100:8,nic:1"."""
    return ",".join(
        f"{spec.name}:{spec.type}:{spec.count}" if spec.type else f"{spec.name}:{spec.count}"
        for spec in specs
    )


@dataclass(frozen=True)
class GresConfLine:
    """One gres.conf line: which nodes (empty = all), which resource, and the devices behind it."""

    node_names: tuple[str, ...]
    name: str
    type: str | None
    count: int
    files: tuple[str, ...]
    cores: str
    links: str
    flags: tuple[str, ...]
    autodetect: str | None
    source: str

    def applies_to(self, node: str) -> bool:
        return not self.node_names or node in self.node_names


@dataclass(frozen=True)
class GresConf:
    """gres.conf as a whole. `autodetect` is the global AutoDetect= (lower-case), None when unset."""

    path: str
    lines: tuple[GresConfLine, ...] = ()
    autodetect: str | None = None
    node_autodetect: tuple[tuple[tuple[str, ...], str], ...] = ()
    warnings: tuple[str, ...] = ()

    def for_node(self, name: str) -> tuple[GresConfLine, ...]:
        """The lines that describe node `name`'s devices, in file order."""
        return tuple(line for line in self.lines if line.applies_to(name))

    def autodetect_for(self, name: str) -> str | None:
        """AutoDetect for node `name`: its own NodeName=... AutoDetect= line, else the global one."""
        for nodes, mode in reversed(self.node_autodetect):
            if name in nodes:
                return mode
        return self.autodetect


def load_gres_conf(path: str | os.PathLike[str]) -> GresConf:
    """Read gres.conf; a missing file is a ConfigError (callers decide whether it is optional)."""
    name = os.fspath(path)
    return _build(name, read_config_file(name))


def parse_gres_conf(text: str, path: str = "gres.conf") -> GresConf:
    """gres.conf from text (tests, and configs sent over the wire)."""
    return _build(path, parse_config_text(path, text))


def _build(path: str, lines: Iterable[ConfLine]) -> GresConf:
    entries: list[GresConfLine] = []
    warnings: list[str] = []
    autodetect: str | None = None
    node_autodetect: list[tuple[tuple[str, ...], str]] = []
    for line in lines:
        settings: dict[str, tuple[str, str]] = {}
        for key, value in line.pairs:
            if key.lower() not in _GRES_KEYS:
                warnings.append(f"{line.source}: unknown key '{key}' ignored")
                continue
            settings[key.lower()] = (value, line.source)
        values = Values(settings, line.source)
        nodes = tuple(values.hostnames("NodeName"))
        mode = values.choice("AutoDetect", "", _AUTODETECT).lower() or None
        if not values.has("Name"):
            if mode is None:
                raise ConfigError(f"{line.source}: gres.conf line has no Name=")
            if nodes:
                node_autodetect.append((nodes, mode))
            else:
                autodetect = mode
            continue
        entries.append(_line(values, nodes, mode, line.source))
    return GresConf(path, tuple(entries), autodetect, tuple(node_autodetect), tuple(warnings))


def _line(values: Values, nodes: tuple[str, ...], mode: str | None, source: str) -> GresConfLine:
    name = values.text("Name", "")
    if not _NAME_CHARS.issuperset(name):
        raise values.invalid("Name", "a resource name such as gpu")
    files: tuple[str, ...] = ()
    if values.has("File") or values.has("MultipleFiles"):
        key = "File" if values.has("File") else "MultipleFiles"
        files = tuple(values.hostnames(key))
    # MultipleFiles= is one device made of several files; File= is one device per file.
    count = 1 if values.has("MultipleFiles") or not files else len(files)
    if values.has("Count"):
        try:
            count = parse_gres_count(values.text("Count", "1"))
        except ValueError:
            raise values.invalid("Count", "a count such as 8 or 4K") from None
        # a GPU is a device noded lists one by one: a count no node has would only exhaust its memory
        limit = MAX_GPUS_PER_NODE if name == "gpu" else 2**64 - 1
        if count > limit:
            raise values.invalid("Count", f"a count of at most {limit}")
        if values.has("File") and count != len(files):
            raise ConfigError(
                f"{values.source('Count')}: Count={count} does not match {len(files)} File entries"
            )
    cores = values.text("Cores", values.text("CPUs", ""))
    return GresConfLine(
        node_names=nodes,
        name=name,
        type=values.raw("Type") or None,
        count=count,
        files=files,
        cores=cores,
        links=values.text("Links", ""),
        flags=values.words("Flags"),
        autodetect=mode,
        source=source,
    )
