"""Every command and daemon reports one version line, Slurm's release first (tools parse it)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import shoal

# (program as run by a user or an init script, the module behind it, its version option)
PROGRAMS = [
    *(
        (name, f"cli.{name}", opt)
        for name in (
            "sbatch",
            "srun",
            "salloc",
            "squeue",
            "sinfo",
            "scontrol",
            "scancel",
            "sacct",
            "sacctmgr",
            "sprio",
            "sshare",
            "sreport",
            "sdiag",
            "sstat",
        )
        for opt in ("-V", "--version")
    ),
    ("shoal", "cli.shoal_admin", "--version"),
    ("shoal-ctld", "ctld.main", "-V"),
    ("shoal-noded", "noded.main", "-V"),
    ("shoal-dbd", "dbd.main", "-V"),
    ("shoal-agentd", "shoal.agent.agentd", "-V"),
]


@pytest.mark.parametrize(("name", "module", "opt"), PROGRAMS, ids=[f"{p[0]} {p[2]}" for p in PROGRAMS])
def test_one_version_line_everywhere(name: str, module: str, opt: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", module, opt],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "SLURM_CONF": "/nonexistent/slurm.conf"},
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, shoal.version_line() + "\n", "")


def test_the_line_parses_as_slurm_2205() -> None:
    """What tools do with it: `sinfo --version | awk '{print $2}'`, or a regex on the digits."""
    line = shoal.version_line()
    assert line.split()[:2] == ["slurm", "22.05.8"]
    assert re.match(r"slurm (\d+)\.(\d+)\.(\d+)", line)
    assert shoal.__version__ in line
