"""Slurm-syntax configuration files as typed, frozen objects; errors cite "file:line".

slurm.conf (with gres.conf beside it, and topology.conf with TopologyPlugin=topology/tree) is here.
cgroup.conf and slurmdbd.conf use the same reader (shoal.conf.reader) and error type.
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
from shoal.conf.topology import SwitchConf, TopologyConf, load_topology_conf, parse_topology_conf

__all__ = [
    "ConfigError",
    "GresConf",
    "GresConfLine",
    "GresSpec",
    "NodeConf",
    "PartitionConf",
    "SlurmConfig",
    "SwitchConf",
    "TopologyConf",
    "format_gres",
    "load_gres_conf",
    "load_slurm_conf",
    "load_topology_conf",
    "parse_gres",
    "parse_gres_conf",
    "parse_gres_count",
    "parse_slurm_conf",
    "parse_topology_conf",
]
