"""Fair-share end to end: a user with usage ranks below one without in sprio; sshare shows the usage."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def fs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("fs"),
        accounting=True,
        extra=(
            "PriorityType=priority/multifactor",
            "PriorityWeightFairshare=10000",
            "PriorityWeightAge=0",
            "PriorityDecayHalfLife=1-0",
        ),
    )
    c.ok("sacctmgr", "-i", "add", "account", "physics", "fairshare=40")
    c.ok("sacctmgr", "-i", "add", "user", "root", "account=physics")
    c.ok("sacctmgr", "-i", "add", "user", "nobody", "account=physics")
    time.sleep(2.5)  # ctld polls the association version every second
    yield c
    stop_cluster(c)


def test_user_with_usage_gets_the_lower_fairshare_factor(fs: Cluster, workdir: Path) -> None:
    busy = fs.submit("-A", "physics", "-N2", "--exclusive", "--wrap", "sleep 6", cwd=workdir)
    fs.wait_state(busy, {"RUNNING"})
    time.sleep(2)  # root's association accrues usage while its job runs
    mine = fs.submit("-A", "physics", "-N2", "--wrap", "true", cwd=workdir)
    theirs = fs.submit("-A", "physics", "-N2", "--wrap", "true", user=NOBODY, cwd=workdir)
    out = fs.ok("sprio", "-h", "-n", "-o", "%i %u %f")
    factor = {int(line.split()[0]): float(line.split()[2]) for line in out.splitlines()}
    assert factor[theirs] > factor[mine]
    weighted = fs.ok("sprio", "-h", "-o", "%i %F", "-j", f"{mine},{theirs}")
    values = {int(line.split()[0]): int(line.split()[1]) for line in weighted.splitlines()}
    assert values[theirs] > values[mine]  # Fair Tree ranks: other accounts without usage come first
    shares = fs.ok("sshare", "-a", "-P", "-n", "-A", "physics")
    rows = {(line.split("|")[0].strip(), line.split("|")[1]): line.split("|") for line in shares.splitlines()}
    assert int(rows[("physics", "root")][4]) > 0 and rows[("physics", "nobody")][4] == "0"
    assert "sleep" not in fs.ok("sprio", "-w")  # the weights row, no jobs
    fs.ok("scancel", str(mine))
    fs.run("scancel", str(theirs), user=NOBODY, cwd=workdir)


def test_usage_survives_a_lost_state_save_location(tmp_path: Path) -> None:
    c = start_cluster(tmp_path / "c", accounting=True, extra=("PriorityType=priority/multifactor",))
    try:
        c.ok("sacctmgr", "-i", "add", "account", "physics")
        c.ok("sacctmgr", "-i", "add", "user", "root", "account=physics")
        c.ok("sacctmgr", "-i", "add", "user", "nobody", "account=physics")
        time.sleep(2.5)
        job = c.submit("-A", "physics", "-n4", "--wrap", "sleep 3", cwd=tmp_path)
        deadline = time.monotonic() + 60
        while "COMPLETED" not in c.ok("sacct", "-n", "-X", "-P", "-o", "State", "-j", str(job)):
            assert time.monotonic() < deadline, "the job never reached accounting"
            time.sleep(0.3)
        pid = int((c.dir / "run" / "ctld.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        for lost in (c.dir / "state").glob("ctld_state.db*"):  # the controller's own state, not dbd's
            lost.unlink()
        log = open(c.dir / "log" / "ctld.restart.out", "ab")  # noqa: SIM115 - the daemon keeps it
        subprocess.Popen(
            [sys.executable, "-m", "ctld.main", "-f", str(c.conf)],
            env=c.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        usage: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while usage.get("root", 0) == 0 and time.monotonic() < deadline:
            out = c.run("sshare", "-a", "-P", "-n", "-A", "physics")
            rows = [line.split("|") for line in out.stdout.splitlines()] if out.returncode == 0 else []
            usage = {r[1]: int(r[4]) for r in rows if r[1]}
            time.sleep(0.5)
        assert usage["root"] >= 4 * 2 and usage["nobody"] == 0  # 4 CPUs for about 3 s, from dbd's records
    finally:
        stop_cluster(c)


def _raw_usage(c: Cluster, account: str) -> dict[str, int]:
    out = c.ok("sshare", "-a", "-P", "-n", "-A", account)
    return {r[1]: int(r[4]) for r in (line.split("|") for line in out.splitlines())}


def test_sacctmgr_set_rawusage_0_resets_the_association(fs: Cluster, workdir: Path) -> None:
    """22.05, measured: `sacctmgr modify user U account=A set RawUsage=0` names the local cluster, and
    sshare shows the association's RawUsage 0 at once; its errors come in 22.05's words and order."""
    job = fs.submit("-A", "physics", "-n2", "--wrap", "sleep 2", cwd=workdir)
    fs.wait_state(job, {"COMPLETED"})
    assert _raw_usage(fs, "physics")["root"] > 0
    refusals = [
        (["modify", "user", "root", "set", "RawUsage=0"], "sacctmgr: error: An account must be specified\n"),
        (
            ["modify", "user", "root", "account=physics", "set", "RawUsage=5"],
            "sacctmgr: error: Raw usage can only be set to 0 (zero)\n",
        ),
        (
            ["modify", "user", "root", "account=physics", "set", "RawUsage=0.0"],
            "sacctmgr: error: Invalid value for RawUsage (0.0)\n You didn't give me anything to set\n",
        ),
        (
            ["modify", "account", "nosuch", "set", "RawUsage=0"],
            "sacctmgr: error: Failed to find cluster {c} account nosuch association in database\n",
        ),
        (
            ["modify", "user", "root", "account=research", "set", "RawUsage=0"],
            "sacctmgr: error: Failed to find cluster {c} account research user root association in database\n",
        ),
    ]
    cluster = fs.ok("scontrol", "show", "config").split("ClusterName", 1)[1].split("=", 1)[1].split()[0]
    for words, stderr in refusals:
        out = fs.run("sacctmgr", "-i", *words)
        assert (out.returncode, out.stderr) == (1, stderr.format(c=cluster)), words
    denied = fs.run(
        "sacctmgr", "-i", "modify", "user", "root", "account=physics", "set", "RawUsage=0", user=NOBODY
    )
    assert (denied.returncode, denied.stderr) == (1, "")
    assert _raw_usage(fs, "physics")["root"] > 0
    out = fs.run("sacctmgr", "-i", "modify", "user", "root", "account=physics", "set", "RawUsage=0")
    assert (out.returncode, out.stdout) == (
        0,
        f"No cluster specified, resetting on local cluster {cluster}\n",
    )
    assert _raw_usage(fs, "physics")["root"] == 0
