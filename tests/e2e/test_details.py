"""What scontrol shows and when accounting changes take effect, end to end (issue 13, compared with
the real Slurm 22.05 of this machine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def acct(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("details"),
        accounting=True,
        extra=("AccountingStorageEnforce=associations,limits,qos",),
    )
    yield c
    stop_cluster(c)


def test_a_qos_added_to_a_user_is_usable_the_moment_sacctmgr_returns(acct: Cluster, workdir: Path) -> None:
    """dbd hands the change to ctld before sacctmgr returns (slurmdbd does the same for slurmctld):
    `sacctmgr -i modify user ... set qos+=X` then at once `sbatch -q X` never fails, 20 times over."""
    acct.ok("sacctmgr", "-i", "add", "account", "racing")
    acct.ok("sacctmgr", "-i", "add", "user", "root", "account=racing")
    for i in range(20):
        acct.ok("sacctmgr", "-i", "add", "qos", f"race{i}")
        acct.ok("sacctmgr", "-i", "modify", "user", "root", "set", f"qos+=race{i}")
        out = acct.run("sbatch", "-A", "racing", "-q", f"race{i}", "--hold", "--wrap", "true", cwd=workdir)
        assert out.returncode == 0, f"round {i}: {out.stderr}"
        acct.ok("scancel", out.stdout.split()[-1])
    # and a QOS the user was never given is still refused (the check is real)
    acct.ok("sacctmgr", "-i", "add", "qos", "notmine")
    out = acct.run("sbatch", "-A", "racing", "-q", "notmine", "--wrap", "true", cwd=workdir)
    assert out.returncode != 0 and "Invalid qos specification" in out.stderr


def test_after_dbd_restarts_sacctmgr_changes_still_reach_ctld_at_once(acct: Cluster, workdir: Path) -> None:
    """A restarted dbd no longer knows where ctld listens: ctld notices the lost connection and polls it
    again when it is back (not at its next safety-net poll), so the changes are pushed as before."""
    acct.ok("sacctmgr", "-i", "add", "account", "restarted")
    acct.ok("sacctmgr", "-i", "add", "user", "root", "account=restarted")
    backs = acct.log("ctld").count("is back")
    pid = int((acct.dir / "run" / "dbd.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    wait_until("dbd to exit", lambda: not Path(f"/proc/{pid}").exists())
    log = open(acct.dir / "log" / "dbd.restart.out", "ab")  # noqa: SIM115 - the daemon keeps it
    subprocess.Popen(
        [sys.executable, "-m", "dbd.main", "-f", str(acct.dir / "slurmdbd.conf")],
        env=acct.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_until("ctld to reach the restarted dbd", lambda: acct.log("ctld").count("is back") > backs, 60)
    for i in range(5):
        acct.ok("sacctmgr", "-i", "add", "qos", f"after{i}")
        acct.ok("sacctmgr", "-i", "modify", "user", "root", "set", f"qos+=after{i}")
        out = acct.run(
            "sbatch", "-A", "restarted", "-q", f"after{i}", "--hold", "--wrap", "true", cwd=workdir
        )
        assert out.returncode == 0, f"round {i}: {out.stderr}"
        acct.ok("scancel", out.stdout.split()[-1])


@pytest.fixture(scope="module")
def gpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("details-gpu"),
        nodes=2,
        cpus=16,
        mem=64000,
        up_args=("--gpus-per-node", "8", "--gpu-type", "h100", "--no-cgroups"),
    )
    yield c
    stop_cluster(c)


def _field(text: str, key: str) -> str:
    return text.split(f"{key}=", 1)[1].split()[0]


def test_details_show_which_cores_memory_and_gpus_each_node_holds(gpus: Cluster, workdir: Path) -> None:
    """The real one: `JOB_GRES=gpu:h100:4` and `Nodes=node[1-2] CPU_IDs=0-2 Mem=3000 GRES=gpu:h100:2(IDX:0-1)`."""
    job = gpus.submit(
        "-N2", "--gres=gpu:2", "-c", "3", "--mem-per-cpu=1000", "--wrap", "sleep 30", cwd=workdir
    )
    try:
        gpus.wait_state(job, {"RUNNING"})
        text = gpus.ok("scontrol", "-d", "show", "job", str(job))
        lines = text.splitlines()
        assert "   DerivedExitCode=0:0" in lines
        at = lines.index("   JOB_GRES=gpu:h100:4")
        assert lines[at - 1].startswith("   Socks/Node=")
        assert lines[at + 1] == "     Nodes=node[1-2] CPU_IDs=0-2 Mem=3000 GRES=gpu:h100:2(IDX:0-1)"
        assert lines[at + 2].startswith("   MinCPUsNode=")
        plain = gpus.ok("scontrol", "show", "job", str(job))
        assert "JOB_GRES" not in plain and "DerivedExitCode" not in plain
    finally:
        gpus.ok("scancel", str(job))
    gpus.wait_state(job, {"CANCELLED"})
    ended = gpus.ok("scontrol", "-d", "show", "job", str(job)).splitlines()
    assert "     Nodes=node[1-2] CPU_IDs=0-2 Mem=3000 GRES=" in ended  # the GPUs are no longer held


def test_last_busy_time_is_the_daemon_start_then_the_last_job_end(gpus: Cluster, workdir: Path) -> None:
    """As 22.05: SlurmdStartTime at first (never None), then when the node's last job ended."""
    node = gpus.ok("scontrol", "show", "node", "node2")
    assert _field(node, "LastBusyTime") != "None"
    assert _field(node, "LastBusyTime") >= _field(node, "SlurmdStartTime")
    job = gpus.submit("-w", "node2", "--wrap", "sleep 1", cwd=workdir)
    gpus.wait_state(job, {"COMPLETED"})
    end = _field(gpus.ok("scontrol", "show", "job", str(job)), "EndTime")
    assert _field(gpus.ok("scontrol", "show", "node", "node2"), "LastBusyTime") == end


def test_show_config_lists_22_05s_keys_and_ends_with_the_controllers_state(gpus: Cluster) -> None:
    text = gpus.ok("scontrol", "show", "config")
    lines = text.splitlines()
    assert lines[0].startswith("Configuration data as of ")
    keys = [line.split(" = ")[0].strip() for line in lines[1:-2]]
    assert keys[:3] == ["AccountingStorageBackupHost", "AccountingStorageEnforce", "AccountingStorageHost"]
    assert len(keys) == 207 and keys[-1] == "X11Parameters"
    assert "KillWait                = 2 sec" in lines  # the test cluster's slurm.conf says KillWait=2
    assert "SelectTypeParameters    = CR_CORE_MEMORY" in lines  # not in the file: what shoal does
    assert lines[-2:] == ["", "Slurmctld(primary) at localhost is UP"]
