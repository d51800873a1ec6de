"""cgroup.conf (beside slurm.conf): which cgroup version, and what a job's cgroup constrains."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from shoal.conf.reader import ConfLine, parse_config_text, read_config_file
from shoal.conf.values import Values

CGROUP_KEYS = (
    "CgroupPlugin", "CgroupMountpoint", "ConstrainCores", "ConstrainRAMSpace", "AllowedRAMSpace",
    "ConstrainSwapSpace", "AllowedSwapSpace", "ConstrainDevices", "MinRAMSpace", "MaxRAMPercent",
    "MaxSwapPercent", "CgroupAutomount", "IgnoreSystemd", "EnableControllers",
)  # fmt: skip
_PLUGINS = ("AUTODETECT", "CGROUP/V1", "CGROUP/V2")
_CANONICAL = {key.lower(): key for key in CGROUP_KEYS}


@dataclass(frozen=True)
class CgroupConf:
    """Slurm's defaults: nothing constrained until cgroup.conf says so."""

    path: str = ""
    plugin: str = "autodetect"  # autodetect, cgroup/v1, cgroup/v2
    mountpoint: str = "/sys/fs/cgroup"
    constrain_cores: bool = False
    constrain_ram_space: bool = False
    allowed_ram_space: float = 100.0  # percent of the job's memory
    constrain_swap_space: bool = False
    allowed_swap_space: float = 0.0  # percent of the job's memory, on top of RAM
    constrain_devices: bool = False
    min_ram_space_mb: int = 30
    warnings: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        return self.constrain_cores or self.constrain_ram_space or self.constrain_devices


def load_cgroup_conf(path: str | os.PathLike[str]) -> CgroupConf:
    """cgroup.conf at `path`; a missing file is Slurm's defaults (nothing constrained)."""
    name = os.fspath(path)
    if not os.path.exists(name):
        return CgroupConf(path=name)
    return _build(name, read_config_file(name))


def parse_cgroup_conf(text: str, path: str = "cgroup.conf") -> CgroupConf:
    return _build(path, parse_config_text(path, text))


def _percent(values: Values, key: str, default: float) -> float:
    raw = values.raw(key)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw.rstrip("%"))
    except ValueError:
        raise values.invalid(key, "a percentage such as 100") from None
    if value < 0:
        raise values.invalid(key, "a percentage such as 100")
    return value


def _build(path: str, lines: Iterable[ConfLine]) -> CgroupConf:
    settings: dict[str, tuple[str, str]] = {}
    warnings: list[str] = []
    for line in lines:
        for key, value in line.pairs:
            if key.lower() not in _CANONICAL:
                warnings.append(f"{line.source}: unknown key '{key}' ignored")
                continue
            settings[key.lower()] = (value, line.source)
    values = Values(settings, path)
    plugin = values.choice("CgroupPlugin", "AUTODETECT", _PLUGINS).lower()
    return CgroupConf(
        path=path,
        plugin=plugin,
        mountpoint=values.text("CgroupMountpoint", "/sys/fs/cgroup"),
        constrain_cores=values.flag("ConstrainCores", False),
        constrain_ram_space=values.flag("ConstrainRAMSpace", False),
        allowed_ram_space=_percent(values, "AllowedRAMSpace", 100.0),
        constrain_swap_space=values.flag("ConstrainSwapSpace", False),
        allowed_swap_space=_percent(values, "AllowedSwapSpace", 0.0),
        constrain_devices=values.flag("ConstrainDevices", False),
        min_ram_space_mb=values.megabytes("MinRAMSpace", 30),
        warnings=tuple(warnings),
    )
