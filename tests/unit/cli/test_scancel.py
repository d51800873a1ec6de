"""scancel as a user sees it: selection options, Slurm's messages and exit codes."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
from typing import Any

import pytest

from cli import scancel
from cli.options import OptionError


def run_scancel(args: Any) -> Any:
    env = {**os.environ, "SHOAL_AGENT_SOCKET": "/nonexistent/agent.sock"}
    return subprocess.run(
        [sys.executable, "-m", "cli.scancel", *args], capture_output=True, text=True, env=env, timeout=60
    )


ME = pwd.getpwuid(os.getuid()).pw_name


@pytest.mark.parametrize(
    ("args", "field", "expected"),
    [
        (["12"], "job_ids", ["12"]),
        (["12", "30_2", "40_[1-3]", "50.0", "60_*"], "job_ids", ["12", "30_2", "40_[1-3]", "50.0", "60_*"]),
        (["12,13"], "job_ids", ["12", "13"]),
        (["-s", "USR1", "12"], "signal", int(signal.SIGUSR1)),
        (["--signal=SIGTERM", "12"], "signal", int(signal.SIGTERM)),
        (["-s", "9", "12"], "signal", 9),
        (["-s", "kill", "12"], "signal", 9),
        (["12"], "signal", 0),
        (["-n", "later"], "name", "later"),
        (["--jobname=later"], "name", "later"),
        (["--name", "later"], "name", "later"),
        (["-t", "PD,r"], "states", ["PENDING", "RUNNING"]),
        (["--state=suspended"], "states", ["SUSPENDED"]),
        (["-p", "debug"], "partition", "debug"),
        (["-A", "physics"], "account", "physics"),
        (["-w", "node[1-2]"], "nodelist", "node[1-2]"),
        (["-b", "12"], "batch", True),
        (["-f", "12"], "full", True),
        (["--me"], "user_id", os.getuid()),
        (["--me"], "filter_user", True),
        (["-u", ME], "user_name", ME),
        (["-u", ME], "user_id", os.getuid()),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_selection(args: Any, field: Any, expected: Any) -> None:
    sel = scancel.parse(args)
    assert sel is not None
    assert getattr(sel, field) == expected


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        ([], "scancel: error: No job identification provided\n"),
        (["-s", "USR1"], "scancel: error: No job identification provided\n"),
        (["abc"], "scancel: error: Invalid job id abc\n"),
        (["12_x"], "scancel: error: Invalid job id 12_x\n"),
        (["-s", "NOPE", "12"], "Unknown job signal: NOPE\n"),
        (["-u", "no-such-user-xyz"], "scancel: error: Invalid user name: no-such-user-xyz\n"),
        (
            ["-t", "COMPLETED"],
            "scancel: error: Invalid job state specified: COMPLETED\n"
            "scancel: error: Valid job states are PENDING, RUNNING, and SUSPENDED\n",
        ),
        (["--foo"], "scancel: unrecognized option '--foo'\nTry \"scancel --help\" for more information\n"),
    ],
    ids=[
        "nothing",
        "signal-only",
        "bad-id",
        "bad-array-id",
        "bad-signal",
        "bad-user",
        "bad-state",
        "bad-option",
    ],
)
def test_errors(args: Any, stderr: Any) -> None:
    result = run_scancel(args)
    assert (result.returncode, result.stderr, result.stdout) == (1, stderr, "")


def test_no_controller_reports_each_job() -> None:
    result = run_scancel(["20", "21"])
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "scancel: error: Kill job error on job id 20: Unable to contact slurm controller (connect failure)",
        "scancel: error: Kill job error on job id 21: Unable to contact slurm controller (connect failure)",
    ]


def test_no_controller_with_filters_only() -> None:
    result = run_scancel(["-n", "later"])
    assert result.returncode == 1
    assert result.stderr == (
        "scancel: error: slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    )


def test_option_error_is_getopt_style() -> None:
    with pytest.raises(OptionError) as info:
        scancel.parse(["-s"])
    assert info.value.lines[0] == "scancel: option requires an argument -- 's'"


@pytest.mark.parametrize("flag", ["-V", "--version", "-h", "--help", "--usage"])
def test_informational_flags_exit_zero(flag: Any) -> None:
    result = run_scancel([flag])
    assert result.returncode == 0
    assert result.stdout


GONE = "Invalid job id specified"
DONE = "Job/step already completing or completed"
DENIED = "Access/permission denied"


@pytest.mark.parametrize(
    ("args", "failed", "lines", "status"),
    [
        # 106: a job id the controller does not know, killed: silent, exit 0 (any id: 5, 999999, 100000000)
        (["999999"], [("999999", GONE)], [], 0),
        (["12"], [("12", DONE)], [], 0),  # a job that just ended
        (["-v", "12"], [("12", DONE)], [f"scancel: error: Kill job error on job id 12: {DONE}"], 0),
        (["-s", "USR1", "12"], [("12", GONE)], [f"scancel: error: Kill job error on job id 12: {GONE}"], 1),
        (["12.0"], [("12.0", GONE)], [f"scancel: error: Kill job error on job step id 12.0: {GONE}"], 1),
        # 109: another user's job: the low byte of ESLURM_ACCESS_DENIED (2002)
        (
            ["12", "999999"],
            [("12", DENIED), ("999999", GONE)],
            [f"scancel: error: Kill job error on job id 12: {DENIED}"],
            210,
        ),
        (["-Q", "12"], [("12", DENIED)], [], 210),
    ],
    ids=["unknown", "done", "verbose", "signal", "step", "other user", "quiet"],
)
def test_refusals_as_slurm_reports_them(
    args: list[str], failed: list[tuple[str, str]], lines: list[str], status: int
) -> None:
    sel = scancel.parse(args)
    assert sel is not None
    assert scancel.report(sel, failed) == (lines, status)
