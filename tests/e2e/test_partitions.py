"""Partition access and state end to end: one cluster, several partitions, Slurm's words."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster

PARTITIONS = (
    "PartitionName=acct Nodes=node1 AllowAccounts=physics",
    "PartitionName=grp Nodes=node1 AllowGroups=root",
    "PartitionName=fast Nodes=node1 AllowQos=high",
    "PartitionName=closed Nodes=node1 State=DOWN",
    "PartitionName=drained Nodes=node1 State=DRAIN",
    "PartitionName=secret Nodes=node1 Hidden=YES",
    "PartitionName=solo Nodes=node2 ExclusiveUser=YES",
)


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("parts"), nodes=2, extra=PARTITIONS)
    yield c
    stop_cluster(c)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-p", "acct"), "Invalid account or account/partition combination specified"),
        (("-p", "fast"), "Invalid qos specification"),
        (("-p", "drained"), "Required partition not available (inactive or drain)"),
    ],
    ids=["allow-accounts", "allow-qos", "drain"],
)
def test_submit_refused(parts: Cluster, workdir: Path, args: tuple[str, ...], message: str) -> None:
    out = parts.run("sbatch", *args, "--wrap", "true", cwd=workdir)
    assert (out.returncode, out.stderr) == (1, f"sbatch: error: Batch job submission failed: {message}\n")


def test_allow_accounts_admits_its_account(parts: Cluster, workdir: Path) -> None:
    job = parts.submit("-p", "acct", "-A", "physics", "--wrap", "true", cwd=workdir)
    assert parts.wait_state(job, {"COMPLETED"}) == "COMPLETED"


def test_allow_groups(parts: Cluster, workdir: Path) -> None:
    out = parts.run("sbatch", "-p", "grp", "--wrap", "true", user=NOBODY, cwd=workdir)
    assert (
        out.stderr
        == "sbatch: error: Batch job submission failed: User's group not permitted to use this partition\n"
    )
    assert parts.wait_state(parts.submit("-p", "grp", "--wrap", "true", cwd=workdir), {"COMPLETED"})


def test_down_partition_queues_with_partition_down(parts: Cluster, workdir: Path) -> None:
    job = parts.submit("-p", "closed", "--wrap", "true", cwd=workdir)
    parts.wait_state(job, {"PENDING"})
    assert parts.job_field(job, "%r") == "PartitionDown"
    parts.ok("scancel", str(job))


def test_hidden_partition_needs_all(parts: Cluster, workdir: Path) -> None:
    assert "secret" not in parts.ok("sinfo", "-h", "-o", "%P")
    assert "secret" in parts.ok("sinfo", "-a", "-h", "-o", "%P")
    assert parts.run("scontrol", "show", "partition", "secret").stderr == "Partition secret not found\n"
    assert parts.ok("scontrol", "-a", "show", "partition", "secret").startswith("PartitionName=secret\n")
    job = parts.submit("-p", "secret", "-H", "--wrap", "true", cwd=workdir)
    assert str(job) not in parts.ok("squeue", "-h", "-o", "%i")
    assert parts.ok("squeue", "-a", "-h", "-o", "%i %P").split() == [str(job), "secret"]
    parts.ok("scancel", str(job))


def test_exclusive_user_keeps_other_users_off(parts: Cluster, workdir: Path) -> None:
    mine = parts.submit("-p", "solo", "-n1", "--wrap", "sleep 20", cwd=workdir)
    parts.wait_state(mine, {"RUNNING"})
    again = parts.submit("-p", "solo", "-n1", "--wrap", "true", cwd=workdir)
    assert parts.wait_state(again, {"COMPLETED"}, timeout=15) == "COMPLETED"  # the same user shares the node
    theirs = parts.submit("-p", "solo", "-n1", "--wrap", "true", user=NOBODY, cwd=workdir)
    parts.wait_state(theirs, {"PENDING"})
    time.sleep(1)  # a scheduling pass or two
    assert parts.job_field(theirs, "%T %r") == "PENDING Resources"
    parts.ok("scancel", str(mine))
    assert parts.wait_state(theirs, {"COMPLETED"}) == "COMPLETED"


def test_a_partition_the_users_group_may_not_use_is_hidden_from_them(parts: Cluster, workdir: Path) -> None:
    job = parts.submit("-p", "grp", "-H", "--wrap", "true", cwd=workdir)

    def as_nobody(*argv: str) -> list[str]:
        return parts.ok(*argv, user=NOBODY, cwd=workdir).split()

    assert "grp" in parts.ok("sinfo", "-h", "-o", "%P").split()  # root passes every AllowGroups
    assert str(job) in parts.ok("squeue", "-h", "-o", "%i").split()
    assert "grp" not in as_nobody("sinfo", "-h", "-o", "%P")
    assert "grp" in as_nobody("sinfo", "-a", "-h", "-o", "%P")
    assert as_nobody("sinfo", "-p", "grp", "-h", "-o", "%P") == ["grp"]
    assert str(job) not in as_nobody("squeue", "-h", "-o", "%i")
    assert str(job) in as_nobody("squeue", "-a", "-h", "-o", "%i")
    assert str(job) in as_nobody("squeue", "-j", str(job), "-h", "-o", "%i")
    hidden = parts.run("scontrol", "show", "partition", "grp", user=NOBODY, cwd=workdir)
    assert (hidden.returncode, hidden.stderr) == (1, "Partition grp not found\n")
    assert as_nobody("scontrol", "-a", "show", "partition", "grp")[0] == "PartitionName=grp"
    parts.ok("scancel", str(job))


def test_partition_tres_counts_its_nodes_memory(parts: Cluster) -> None:
    """22.05: TRES=cpu=..,mem=..,node=..,billing=.. (and gres/gpu= with GPUs): memory is the nodes' RealMemory."""
    text = parts.ok("scontrol", "show", "partition", "batch")
    assert text.splitlines()[-2] == "   TRES=cpu=8,mem=16000M,node=2,billing=8"
