"""Slurm-syntax configuration files as typed, frozen objects; errors cite "file:line".

slurm.conf (with gres.conf beside it) is here. cgroup.conf, topology.conf and slurmdbd.conf are
later issues: they will use the same reader (shoal.conf.reader) and error type.
"""

from __future__ import annotations

from shoal.conf.errors import ConfigError
from shoal.conf.gres import (
    GresConf,
    GresConfLine,
    GresSpec,
    format_gres,
    load_gres_conf,
    parse_gres,
    parse_gres_conf,
    parse_gres_count,
)
from shoal.conf.slurm import (
    NodeConf,
    PartitionConf,
    SlurmConfig,
    load_slurm_conf,
    parse_slurm_conf,
)

__all__ = [
    "ConfigError",
    "GresConf",
    "GresConfLine",
    "GresSpec",
    "NodeConf",
    "PartitionConf",
    "SlurmConfig",
    "format_gres",
    "load_gres_conf",
    "load_slurm_conf",
    "parse_gres",
    "parse_gres_conf",
    "parse_gres_count",
    "parse_slurm_conf",
]
