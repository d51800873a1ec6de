"""srun --help and salloc --help list the options each command takes (22.05 prints them all; shoal
printed one usage line)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cli.alloc_help import HELP_ONLY
from cli.options import Opt
from cli.salloc import SALLOC_OPTIONS
from cli.srun import SRUN_OPTIONS

UNLISTED = {"slurmd_debug", "get_user_env"}  # debugging and root-only login-environment options


@pytest.mark.parametrize(("prog", "table"), [("srun", SRUN_OPTIONS), ("salloc", SALLOC_OPTIONS)])
def test_help_lists_every_option_the_command_takes(prog: str, table: tuple[Opt, ...]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", f"cli.{prog}", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"Usage: {prog} [OPTIONS(0)...")
    assert {"Parallel run options:", "GPU scheduling options:", "Help options:"} <= set(lines)
    for opt in table:
        if opt.dest not in UNLISTED | HELP_ONLY:
            assert any(f"--{opt.longs[0]}" in line for line in lines), opt.longs[0]
    assert "  -N, --nodes=n[-m]           number of nodes" in lines


def test_usage_stays_one_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cli.srun", "--usage"], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.count("\n") == 1 and out.stdout.startswith("Usage: srun ")
