"""What the tool tests share: shoal's commands on PATH, as a tool finds Slurm's on a login node."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster

COMMANDS = (
    "sbatch",
    "srun",
    "salloc",
    "squeue",
    "sacct",
    "scontrol",
    "scancel",
    "sinfo",
    "sacctmgr",
    "sshare",
)


def put_commands_on_path(cluster: Cluster, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """shoal's commands (this checkout's) first on PATH, SLURM_CONF at the cluster.

    Each command falls back to the cluster's slurm.conf when SLURM_CONF is unset: that is where a
    real node keeps it (/etc/slurm), and tools that scrub SLURM_* from a step's environment
    (Snakemake's jobstep executor does) rely on it.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    conf = cluster.env["SLURM_CONF"]
    for name in COMMANDS:
        script = bin_dir / name
        script.write_text(
            f'#!/bin/sh\nexport SLURM_CONF="${{SLURM_CONF:-{conf}}}"\n'
            f'exec {sys.executable} -m cli.{name} "$@"\n'
        )
        script.chmod(0o755)
    for key in [
        k for k in os.environ if k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SQUEUE_", "SUBMITIT_"))
    ]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_CONF", conf)
    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
