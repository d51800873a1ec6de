"""One node served by this noded process: its configuration, spool and what it reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from noded.hooks import HookConfig
from noded.isolation import Isolation
from shoal.conf import NodeConf


@dataclass(frozen=True)
class HostedNode:
    """A real or emulated node; several may share one process (each with its own spool)."""

    conf: NodeConf
    spool: Path
    port: int
    emulated: bool
    isolation: Isolation | None = None  # cgroup enforcement; None = none
    gpu_cpus: Mapping[int, tuple[int, ...]] = field(
        default_factory=dict
    )  # CPUs affine to each GPU (--gpu-bind=closest)
    identity: Mapping[str, str] = field(
        default_factory=dict
    )  # noded.nodens: its own hostname/hosts; {} = the host's
    hooks: HookConfig = field(default_factory=HookConfig)  # Prolog, Epilog, TaskProlog, TaskEpilog

    @property
    def name(self) -> str:
        return self.conf.name


def spool_root(spool_dir: str, node_name: str, host: str) -> Path:
    """SlurmdSpoolDir with %n (node name) and %h (host name) replaced, as Slurm does."""
    return Path(spool_dir.replace("%n", node_name).replace("%h", host))
