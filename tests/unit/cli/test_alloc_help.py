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


@pytest.mark.parametrize(
    ("prog", "argv", "line"),
    [
        ("srun", ["--bogus", "hostname"], "srun: unrecognized option '--bogus'"),
        ("srun", ["-p"], "srun: option requires an argument -- 'p'"),
        ("salloc", ["-Z"], "salloc: invalid option -- 'Z'"),
        ("salloc", ["-p"], "salloc: option requires an argument -- 'p'"),
    ],
    ids=["srun long", "srun missing value", "salloc short", "salloc missing value"],
)
def test_option_refusals_exit_255(prog: str, argv: list[str], line: str) -> None:
    """22.05 (captured 2026-12-01): getopt's two lines, exit 255 (sbatch's too)."""
    out = subprocess.run(
        [sys.executable, "-m", f"cli.{prog}", *argv], capture_output=True, text=True, timeout=60
    )
    assert (out.returncode, out.stdout, out.stderr) == (
        255,
        "",
        f'{line}\nTry "{prog} --help" for more information\n',
    )
