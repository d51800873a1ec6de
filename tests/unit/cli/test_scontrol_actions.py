"""scontrol's actions and dispatch as a user sees them (record formatting is cli/show.py's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli import scontrol


def run_scontrol(args: Any, env: Any = None) -> Any:
    full = {**os.environ, "SHOAL_AGENT_SOCKET": "/nonexistent/agent.sock", "SLURM_CONF": "/nonexistent.conf"}
    full.pop("SLURM_JOB_NODELIST", None)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "cli.scontrol", *args], capture_output=True, text=True, env=full, timeout=60
    )


CONNECT = "Unable to contact slurm controller (connect failure)"


@pytest.mark.parametrize(
    ("args", "env", "stdout"),
    [
        (["show", "hostnames", "node[1-3,7]"], {}, "node1\nnode2\nnode3\nnode7\n"),
        (["show", "hostname", "gpu[01-02]"], {}, "gpu01\ngpu02\n"),
        (["show", "hostnames"], {"SLURM_JOB_NODELIST": "n[1-2]"}, "n1\nn2\n"),
        (["show", "hostlist", "node1,node2,node3,node7"], {}, "node[1-3,7]\n"),
        (["show", "hostlist", "n3,n1,n2,gpu1"], {}, "n[3,1-2],gpu1\n"),
        (["show", "hostlistsorted", "n3,n1,n2"], {}, "n[1-3]\n"),
        (["sho", "hostn", "n[1-2]"], {}, "n1\nn2\n"),
    ],
    ids=[
        "hostnames",
        "hostname-padded",
        "hostnames-from-env",
        "hostlist",
        "hostlist-keeps-order",
        "hostlistsorted",
        "abbreviations",
    ],
)
def test_hostlists_need_no_controller(args: Any, env: Any, stdout: Any) -> None:
    result = run_scontrol(args, env)
    assert (result.returncode, result.stdout, result.stderr) == (0, stdout, "")


@pytest.mark.parametrize(
    ("args", "code", "stdout", "stderr"),
    [
        (["show", "hostnames", "-o", "n[1-2]"], 0, "n1\nn2\n", ""),
        (["show", "job", "-d", "12"], 1, "", f"slurm_load_jobs error: {CONNECT}\n"),
        (
            ["show", "job", "-z", "12"],
            1,
            "",
            "scontrol: invalid option -- 'z'\nTry \"scontrol --help\" for more information\n",
        ),
    ],
    ids=["flag-after-the-command", "details-after-show-job", "bad-option-after-the-command"],
)
def test_options_anywhere_on_the_line_as_2205(args: Any, code: int, stdout: str, stderr: str) -> None:
    """22.05's getopt_long permutes: `scontrol show job -d 12` is -d and job 12 (scenario 246), and an
    unknown letter there is its invalid-option error, not a job id."""
    result = run_scontrol(args)
    assert (result.returncode, result.stdout, result.stderr) == (code, stdout, stderr)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["n1", "n2", "n3", "n7"], "n[1-3,7]"),
        (["n01", "n02", "n10"], "n[01-02,10]"),
        (["login", "n1"], "login,n1"),
        (["n5"], "n5"),
    ],
    ids=["ranges", "zero-padded", "plain-name", "single"],
)
def test_compress_in_order(names: Any, expected: Any) -> None:
    assert scontrol.compress_in_order(names) == expected


@pytest.mark.parametrize(
    ("args", "stdout", "stderr"),
    [
        (["foo"], "", "invalid keyword: foo\n"),
        (["show", "foo"], "", "invalid entity:foo for keyword:show \n"),
        (["hold"], "", "too few arguments for keyword:hold\n"),
        (["show", "hostnames"], "", "scontrol: error: host list is empty\n"),
        (
            ["update", "NodeName=n1", "State=DRAIN"],
            "",
            "You must specify a reason when DOWNING or DRAINING a node. Request denied\n",
        ),
        (
            ["update", "NodeName=n1", "State=down"],
            "",
            "You must specify a reason when DOWNING or DRAINING a node. Request denied\n",
        ),
        (["update", "JobId=5", "TimeLimit=soon"], "", "scontrol: error: Invalid TimeLimit value\n"),
        (
            ["update", "JobId=5", "Colour=red"],
            "",
            "Update of this parameter is not supported: Colour=red\nRequest aborted\n",
        ),
        (
            ["update", "Colour=red"],
            "",
            'No valid entity in update command\nInput line must include "NodeName", "PartitionName", '
            '"Reservation=<reservation_name>", or "JobId"\n',
        ),
        (["update", "JobId=abc", "TimeLimit=5"], "", "Invalid job id specified for job abc\n"),  # 22.05
        (["-Q", "foo"], "", ""),
        (["suspend"], "", "too few arguments for keyword:suspend\n"),  # 22.05, as the four below
        (["res"], "", "too few arguments for keyword:resume\n"),
        (["su", "abc"], "", "Invalid job id specified for job abc\n"),
        (["s", "1"], "", "invalid keyword: s\n"),
    ],
    ids=[
        "unknown-command",
        "unknown-entity",
        "hold-no-ids",
        "empty-hostlist",
        "drain-needs-reason",
        "down-needs-reason",
        "bad-timelimit",
        "unknown-job-key",
        "no-entity",
        "bad-job-id",
        "quiet",
        "suspend-no-ids",
        "resume-abbreviated",
        "suspend-bad-id",
        "s-is-ambiguous",
    ],
)
def test_errors(args: Any, stdout: Any, stderr: Any) -> None:
    result = run_scontrol(args)
    assert (result.returncode, result.stdout, result.stderr) == (1, stdout, stderr)


# what 22.05 prints after the lines when a controller is down (docs/ha.md)
BANNER = (
    "*****************************************\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n"
    "*****************************************\n"
)


@pytest.mark.parametrize(
    ("args", "stdout", "stderr"),
    [
        (["ping"], f"Slurmctld(primary) at localhost is DOWN\n{BANNER}", ""),
        (["show", "job", "5"], "", f"slurm_load_jobs error: {CONNECT}\n"),
        (["show", "nodes"], "", f"slurm_load_node error: {CONNECT}\n"),
        (["show", "partition"], "", f"slurm_load_partitions error: {CONNECT}\n"),
        (["show", "config"], "", f"slurm_load_ctl_conf error: {CONNECT}\n"),
        (["update", "JobId=5", "TimeLimit=10"], "", f"slurm_update error: {CONNECT}\n"),
        (["update", "job", "5", "Partition=gpu"], "", f"slurm_update error: {CONNECT}\n"),
        (["update", "NodeName=n1", "State=RESUME"], "", f"slurm_update error: {CONNECT}\n"),
        (["hold", "12,13"], "", f"{CONNECT} for job 12\n{CONNECT} for job 13\n"),
        (["release", "JobId=12"], "", f"{CONNECT} for job 12\n"),
        (["requeue", "12"], "", f"{CONNECT} for job 12\n"),
    ],
    ids=[
        "ping",
        "show-job",
        "show-nodes",
        "show-partition",
        "show-config",
        "update-job",
        "update-job-word",
        "update-node",
        "hold",
        "release",
        "requeue",
    ],
)
def test_without_a_controller(args: Any, stdout: Any, stderr: Any) -> None:
    result = run_scontrol(args)
    assert (result.returncode, result.stdout, result.stderr) == (1, stdout, stderr)


def test_ping_reads_the_controller_host_from_slurm_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\nSlurmctldHost=head01(10.0.0.1)\n")
    result = run_scontrol(["ping"], {"SLURM_CONF": str(conf)})
    assert result.stdout == f"Slurmctld(primary) at head01 is DOWN\n{BANNER}"


def test_ping_names_each_controller_by_its_position_in_slurm_conf(tmp_path: Path) -> None:
    """22.05: primary, then backup (of two) or backup1, backup2 ...; all down: the banner and exit 1."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\nSlurmctldHost=head01(10.0.0.1)\nSlurmctldHost=head02(10.0.0.2)\n")
    two = run_scontrol(["ping"], {"SLURM_CONF": str(conf)})
    assert (two.returncode, two.stdout) == (
        1,
        f"Slurmctld(primary) at head01 is DOWN\nSlurmctld(backup) at head02 is DOWN\n{BANNER}",
    )
    conf.write_text(conf.read_text() + "SlurmctldHost=head03\n")
    three = run_scontrol(["ping"], {"SLURM_CONF": str(conf)})
    assert three.stdout.splitlines()[:3] == [
        "Slurmctld(primary) at head01 is DOWN",
        "Slurmctld(backup1) at head02 is DOWN",
        "Slurmctld(backup2) at head03 is DOWN",
    ]


@pytest.mark.parametrize("args", [["version"], ["-V"], ["--version"]], ids=["command", "-V", "--version"])
def test_version(args: Any) -> None:
    result = run_scontrol(args)
    assert result.returncode == 0
    assert result.stdout.startswith("slurm 22.05.8 ") and "(shoal " in result.stdout


@pytest.mark.parametrize(
    ("word", "full", "least", "ok"),
    [
        ("sho", "show", 3, True),
        ("sh", "show", 3, False),
        ("SHOW", "show", 3, True),
        ("shows", "show", 3, False),
    ],
    ids=["abbrev", "too-short", "case", "too-long"],
)
def test_keyword_abbreviations(word: Any, full: Any, least: Any, ok: Any) -> None:
    assert scontrol.matches(word, full, least) is ok


@pytest.mark.parametrize(
    ("action", "message", "lines"),
    [
        # 187: a user raising a pending job's limit over the partition's MaxTime
        ("update", "Access/permission denied", ["Access/permission denied for job 12"]),
        (
            "update",
            "Access denied to requested reservation",
            ["Access denied to requested reservation for job 12"],
        ),
        ("requeue", "Invalid job id specified", ["Invalid job id specified for job 12"]),
        # 113: hold, uhold and release add slurm_suspend's line
        ("hold", "Invalid user id", ["Invalid user id for job 12", "slurm_suspend error: Invalid user id"]),
        (
            "release",
            "Invalid job id specified",
            ["Invalid job id specified for job 12", "slurm_suspend error: Invalid job id specified"],
        ),
    ],
    ids=["update", "reservation", "requeue", "hold", "release"],
)
def test_refused_job_lines_as_slurm(action: str, message: str, lines: list[str]) -> None:
    from cli.scontrol import refusal_lines

    assert refusal_lines(action, "12", message) == lines


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (["takeover"], "slurm_takeover error: Unable to contact slurm controller (connect failure)\n"),
        (["takeover", "1"], "takeover: invalid backup controller index (1)\n"),
        (["takeover", "x"], "takeover: invalid backup controller index (0)\n"),
        (["takeover", "1", "2"], "takeover: too many arguments\n"),
    ],
    ids=["no-backup", "index-past-the-lines", "not-a-number", "two-indexes"],
)
def test_takeover_without_a_backup_line_is_refused_as_22_05(tmp_path: Path, args: Any, stderr: str) -> None:
    """Seen on the reference (one SlurmctldHost); 22.05 also prints two socket errors before the first."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\nSlurmctldHost=head01(10.0.0.1)\n")
    result = run_scontrol(args, {"SLURM_CONF": str(conf)})
    assert (result.returncode, result.stdout, result.stderr) == (1, "", stderr)


@pytest.mark.parametrize(
    ("args", "lines"),
    [
        (["reboot"], ["Missing node list. Specify ALL|<NodeList>"]),
        (["reboot", "asap"], ["Missing node list. Specify ALL|<NodeList>"]),
        (["reboot", "nextstate=resume"], ["Missing node list. Specify ALL|<NodeList>"]),
        (["reboot", "nextstate=foo", "node3"], ["Invalid state: foo", "Valid states: DOWN, RESUME"]),
        (
            ["reboot", "ASAP", "nextstate=idle", "node3"],
            ["Invalid state: idle", "Valid states: DOWN, RESUME"],
        ),
        (["reboot", "reason=", "node3"], ["missing reason"]),
        (["reboot", "node3", "node4"], ["too many arguments for keyword:reboot"]),
        (["reboot", "foo=bar", "node3"], ["too many arguments for keyword:reboot"]),
        (["reboot", "reason", "node9"], ["too many arguments for keyword:reboot"]),
        (["cancel_reboot"], ["missing argument for keyword:cancel_reboot"]),
        (["cancel_reboot", "node3", "node4"], ["too many arguments for keyword:cancel_reboot"]),
    ],
    ids=[
        "no-nodes",
        "asap-no-nodes",
        "nextstate-no-nodes",
        "bad-nextstate",
        "idle-is-no-nextstate",
        "empty-reason",
        "two-nodelists",
        "unknown-key",
        "reason-without-value",
        "cancel-no-nodes",
        "cancel-two-nodelists",
    ],  # fmt: skip
)
def test_reboot_refusals_as_2205(args: list[str], lines: list[str]) -> None:
    """Measured on the real 22.05 (each exits 1); none reaches the controller."""
    with pytest.raises(scontrol.Failure) as refused:
        scontrol.dispatch(args[0], args[1:], scontrol.Flags())
    assert list(refused.value.lines) == lines


@pytest.mark.parametrize(
    ("args", "parsed"),
    [
        (["reboot", "node[1-2]"], scontrol.RebootRequest("node[1-2]")),
        (["reboot", "ALL"], scontrol.RebootRequest("ALL")),
        (["reboot", "asap", "NEXTSTATE=Down", "reason=new kernel", "n1"], scontrol.RebootRequest("n1", True, "DOWN", "new kernel")),
        (["reboot", "n1", "ASAP", "asap"], scontrol.RebootRequest("n1", True)),
    ],
    ids=["nodes", "all", "everything", "words-anywhere"],
)  # fmt: skip
def test_reboot_arguments(args: list[str], parsed: scontrol.RebootRequest) -> None:
    assert scontrol.parse_reboot(args[1:]) == parsed
