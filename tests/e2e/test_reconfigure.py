"""`scontrol reconfigure` and SIGHUP on a running cluster: ctld re-reads slurm.conf and applies what can
change at once (partitions, limits, priority weights), refuses a broken file (with file:line) and a key
only a restart can change (by name) with nothing changed, and running jobs are not disturbed.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal import configless
from shoal.auth.key import load_key
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

ALICE = 1001


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("reconf"), nodes=2, extra=("SlurmctldParameters=enable_configless",)
    )
    yield c
    stop_cluster(c)


@pytest.fixture(autouse=True)
def original(cluster: Cluster) -> Iterator[str]:
    """Each test edits slurm.conf; the file (and ctld's configuration) is put back after it."""
    text = cluster.conf.read_text()
    yield text
    if cluster.conf.read_text() != text:
        cluster.conf.write_text(text)
        cluster.ok("scontrol", "reconfigure")


def edit(cluster: Cluster, change: Callable[[str], str]) -> None:
    text = cluster.conf.read_text()
    new = change(text)
    assert new != text, "the edit changed nothing"
    cluster.conf.write_text(new)


def partition(cluster: Cluster, name: str) -> str:
    return cluster.ok("scontrol", "-o", "show", "partition", name)


def test_a_partition_added_takes_a_job_at_once(cluster: Cluster) -> None:
    assert cluster.run("sbatch", "-p", "extra", "--wrap", "true").returncode == 1  # not known yet
    edit(cluster, lambda t: t + "PartitionName=extra Nodes=node1 MaxTime=00:10:00 State=UP\n")
    out = cluster.run("scontrol", "reconfigure")
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    assert "PartitionName=extra " in partition(cluster, "extra")
    job = cluster.submit("-p", "extra", "--wrap", "hostname")
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    assert cluster.job_field(job, "%P %N") == "extra node1"


def test_a_partitions_maxtime_changes(cluster: Cluster) -> None:
    assert "MaxTime=01:00:00" in partition(cluster, "debug")
    edit(cluster, lambda t: re.sub(r"(PartitionName=debug .*)MaxTime=01:00:00", r"\1MaxTime=02:30:00", t))
    cluster.ok("scontrol", "reconfigure")
    assert "MaxTime=02:30:00" in partition(cluster, "debug")
    # and it is what the scheduler uses: a job asking more than the old limit runs now
    job = cluster.submit("-p", "debug", "-t", "2:00:00", "--wrap", "true")
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"


def test_a_priority_weight_shows_in_sprio(cluster: Cluster) -> None:
    assert cluster.ok("sprio", "-w", "-o", "%A").split()[-1] == "1000"
    edit(cluster, lambda t: t.replace("PriorityWeightAge=1000", "PriorityWeightAge=4321"))
    cluster.ok("scontrol", "reconfigure")
    assert cluster.ok("sprio", "-w", "-o", "%A").split()[-1] == "4321"


def test_a_broken_line_is_refused_with_file_and_line_and_nothing_changes(cluster: Cluster) -> None:
    edit(
        cluster,
        lambda t: t.replace("PriorityWeightAge=1000", "PriorityWeightAge=5") + "NodeName=node1 CPUs=lots\n",
    )
    line = len(cluster.conf.read_text().splitlines())
    out = cluster.run("scontrol", "reconfigure")
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith(f"slurm_reconfigure error: {cluster.conf}:{line}: "), out.stderr
    assert f"{cluster.conf}:{line}" in cluster.log()  # ctld logged it too
    # the old configuration runs on: the weight before the broken line was not taken, jobs still run
    assert cluster.ok("sprio", "-w", "-o", "%A").split()[-1] == "1000"
    job = cluster.submit("--wrap", "true")
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"


def test_a_change_of_slurmctldport_is_refused_naming_the_key(cluster: Cluster) -> None:
    port = re.search(r"^SlurmctldPort=(\d+)$", cluster.conf.read_text(), re.M)
    assert port is not None
    edit(
        cluster,
        lambda t: t.replace(port.group(0), f"SlurmctldPort={int(port.group(1)) + 1}").replace(
            "MaxTime=01:00:00", "MaxTime=03:00:00"
        ),
    )
    out = cluster.run("scontrol", "reconfigure")
    assert out.returncode == 1
    assert out.stderr.startswith("slurm_reconfigure error: SlurmctldPort changed"), out.stderr
    assert "restart" in out.stderr
    assert "MaxTime=01:00:00" in partition(cluster, "debug")  # nothing else was taken either


def test_a_user_is_refused_as_slurm_refuses_her(cluster: Cluster) -> None:
    edit(cluster, lambda t: t.replace("MaxTime=01:00:00", "MaxTime=04:00:00"))
    out = cluster.run("scontrol", "reconfigure", user=ALICE)
    assert (out.returncode, out.stdout, out.stderr) == (1, "", "slurm_reconfigure error: Invalid user id\n")
    assert "MaxTime=01:00:00" in partition(cluster, "debug")


def test_sighup_reconfigures_as_scontrol_does(cluster: Cluster) -> None:
    edit(cluster, lambda t: t.replace("MaxTime=01:00:00", "MaxTime=05:00:00"))
    pid = int((cluster.dir / "run" / "ctld.pid").read_text())
    os.kill(pid, signal.SIGHUP)
    wait_until("the new MaxTime", lambda: "MaxTime=05:00:00" in partition(cluster, "debug"), timeout=30)
    # a broken file on SIGHUP: logged with file:line, ctld runs on with what it had
    edit(cluster, lambda t: t.replace("MaxTime=05:00:00", "MaxTime=06:00:00") + "Bogus line\n")
    where = f"{cluster.conf}:{len(cluster.conf.read_text().splitlines())}: cannot parse 'Bogus'"
    before = cluster.log().count(where)
    os.kill(pid, signal.SIGHUP)
    wait_until("the refusal in the log", lambda: cluster.log().count(where) > before, timeout=30)
    assert "MaxTime=05:00:00" in partition(cluster, "debug")


def test_sighup_to_noded_rereads_its_files(cluster: Cluster) -> None:
    reloads = cluster.log("noded").count("reconfigure:")
    os.kill(int((cluster.dir / "run" / "noded.pid").read_text()), signal.SIGHUP)
    wait_until("noded's reload", lambda: cluster.log("noded").count("reconfigure:") > reloads, timeout=30)
    assert cluster.ok("sinfo", "-h", "-N", "-p", "batch", "-o", "%N %t").split() == [
        "node1",
        "idle",
        "node2",
        "idle",
    ]


def test_a_running_job_survives_a_reconfigure(cluster: Cluster, tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    out, go = tmp_path / "out", tmp_path / "go"
    job = cluster.submit(
        "-o", str(out), "--wrap", f"echo start; while [ ! -e {go} ]; do sleep 0.2; done; echo end"
    )
    cluster.wait_state(job, {"RUNNING"})
    reloads = cluster.log("noded").count("reconfigure:")
    edit(
        cluster,
        lambda t: t.replace("KillWait=2", "KillWait=3").replace(
            "PriorityWeightAge=1000", "PriorityWeightAge=999"
        ),
    )
    cluster.ok("scontrol", "reconfigure")
    assert cluster.state(job) == "RUNNING"
    wait_until(
        "noded's reconfigure", lambda: cluster.log("noded").count("reconfigure:") > reloads, timeout=30
    )
    assert cluster.state(job) == "RUNNING"
    go.touch()  # the job ends on its own, after the reconfigure
    assert cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"}) == "COMPLETED"
    assert out.read_text() == "start\nend\n"


def test_a_prolog_added_runs_on_the_nodes_for_the_next_job(cluster: Cluster, tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    prolog = tmp_path / "prolog.sh"
    prolog.write_text(f'#!/bin/sh\necho "$SLURM_JOB_ID $(id -u)" > {tmp_path}/ran-$SLURM_JOB_ID\n')
    prolog.chmod(0o755)
    reloads = cluster.log("noded").count("reconfigure:")
    edit(cluster, lambda t: t + f"Prolog={prolog}\n")
    cluster.ok("scontrol", "reconfigure")
    wait_until(
        "noded's reconfigure", lambda: cluster.log("noded").count("reconfigure:") > reloads, timeout=30
    )
    job = cluster.submit("-o", "/dev/null", "--wrap", "true")
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    assert (tmp_path / f"ran-{job}").read_text() == f"{job} 0\n"  # run by noded, as root


def test_a_configless_fetch_gets_the_new_file(cluster: Cluster, tmp_path: Path) -> None:
    text = cluster.conf.read_text()
    port = re.search(r"^SlurmctldPort=(\d+)$", text, re.M)
    key_file = re.search(r"^AuthKeyFile=(\S+)$", text, re.M)
    assert port is not None and key_file is not None
    key = load_key(key_file.group(1))
    edit(cluster, lambda t: t + "PartitionName=fetched Nodes=node2 State=UP\n")
    before = configless.fetch([f"127.0.0.1:{port.group(1)}"], key, tmp_path / "before")
    assert "PartitionName=fetched" not in Path(before.conf).read_text()  # served as loaded, not as edited
    cluster.ok("scontrol", "reconfigure")
    after = configless.fetch([f"127.0.0.1:{port.group(1)}"], key, tmp_path / "after")
    assert Path(after.conf).read_text() == cluster.conf.read_text()
