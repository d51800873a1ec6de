"""PrivateData's other words, slurmdbd.conf PrivateData and account coordinators on a real cluster
(one for the module, accounting on).

What alice sees and may do is 22.05's, measured on the real one: under PrivateData=nodes,partitions
she may not load nodes or partitions, under reservations she sees only those that admit her, under
usage sshare shows her own rows; once she coordinates physics (sacctmgr add coordinator) she sees,
holds, releases and cancels bob's physics jobs, and under slurmdbd.conf PrivateData=jobs,users,accounts
sacct shows her their records while `sacctmgr show user` still lists only herself.
"""

from __future__ import annotations

import os
import pwd
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import cli.sshare  # noqa: F401  (run_as forks: sshare's getopt must be loaded before it becomes alice)
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

ALICE = pwd.getpwnam("alice").pw_uid
BOB = pwd.getpwnam("bob").pw_uid


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    top = tmp_path_factory.mktemp("privacy_words")
    c = start_cluster(
        top / "c", nodes=2, accounting=True, extra=("PrivateData=jobs,nodes,partitions,reservations,usage",)
    )
    c.ok("sacctmgr", "-i", "add", "account", "physics,research")
    c.ok("sacctmgr", "-i", "add", "user", "alice,bob", "account=physics")
    c.ok("sacctmgr", "-i", "add", "user", "alice", "account=research")
    # slurmdbd.conf PrivateData, taken at SIGHUP as slurmdbd's reconfigure
    conf = c.dir / "slurmdbd.conf"
    conf.write_text(conf.read_text() + "PrivateData=jobs,users,accounts\n")
    os.kill(int((c.dir / "run" / "dbd.pid").read_text()), signal.SIGHUP)
    wait_until("dbd to take PrivateData", lambda: _users(c, ALICE) == ["alice"], 30)
    out = top / "out"
    out.mkdir(mode=0o1777)
    out.chmod(0o1777)
    yield c
    stop_cluster(c)


def _users(c: Cluster, user: int) -> list[str]:
    return c.ok("sacctmgr", "-n", "show", "user", "format=user", user=user).split()


def _out(c: Cluster) -> Path:
    return c.dir.parent / "out"


def _sacct(c: Cluster, user: int) -> list[list[str]]:
    return [
        line.split() for line in c.ok("sacct", "-a", "-X", "-n", "-o", "jobid,user", user=user).splitlines()
    ]


def _coordinate(c: Cluster, add: bool) -> str:
    verb = (
        ("add", "coordinator", "account=physics")
        if add
        else ("delete", "coordinator", "where", "account=physics")
    )
    return c.ok("sacctmgr", "-i", *verb, "names=alice")


def test_nodes_and_partitions_are_for_operators(cluster: Cluster) -> None:
    c = cluster
    listing = c.run("sinfo", user=ALICE)
    assert (listing.returncode, listing.stderr) == (1, "slurm_load_partitions: Access/permission denied\n")
    node = c.run("scontrol", "show", "node", "node1", user=ALICE)
    assert (node.returncode, node.stderr) == (1, "slurm_load_node error: Access/permission denied\n")
    part = c.run("scontrol", "show", "partition", user=ALICE)
    assert (part.returncode, part.stderr) == (1, "slurm_load_partitions error: Access/permission denied\n")
    assert "node1" in c.ok("sinfo", "-h", "-N", "-o", "%N")  # root loads them
    # 22.05's squeue loads the partitions after the jobs: it says it may not, and lists them all the same
    mine = c.submit("--hold", "-o", "/dev/null", "--wrap", "true", user=ALICE, cwd=_out(c))
    try:
        queue = c.run("squeue", "-h", "-o", "%i", user=ALICE)
        assert (queue.returncode, queue.stdout) == (0, f"{mine}\n")
        assert queue.stderr == "slurm_load_partitions: Access/permission denied\n"
        steps = c.run("squeue", "-s", user=ALICE)  # -s loads no partitions
        assert (steps.returncode, steps.stderr) == (0, "")
        assert c.run("squeue", "-h", "-o", "%i").stderr == ""  # root may load them
    finally:
        c.ok("scancel", str(mine))


def test_sinfo_names_the_load_refused_under_private_nodes_alone(cluster: Cluster) -> None:
    """22.05's sinfo loads the partitions first: with only the nodes private its error is the node load's."""
    c = cluster
    full = c.conf.read_text()
    c.conf.write_text(full.replace("PrivateData=jobs,nodes,partitions,", "PrivateData=jobs,nodes,"))
    try:
        c.ok("scontrol", "reconfigure")
        listing = c.run("sinfo", user=ALICE)
        assert (listing.returncode, listing.stderr) == (1, "slurm_load_node: Access/permission denied\n")
    finally:
        c.conf.write_text(full)
        c.ok("scontrol", "reconfigure")
    assert c.run("sinfo", user=ALICE).stderr == "slurm_load_partitions: Access/permission denied\n"


def test_a_user_sees_only_the_reservations_that_admit_them(cluster: Cluster) -> None:
    c = cluster
    c.ok(
        "scontrol",
        "create",
        "reservation",
        "reservationname=bobs",
        "users=bob",
        "nodes=node2",
        "starttime=now+1hour",
        "duration=10",
    )
    try:
        assert c.ok("scontrol", "show", "res", user=ALICE) == "No reservations in the system\n"
        named = c.run("scontrol", "show", "res", "bobs", user=ALICE)
        assert "Reservation bobs not found" in named.stdout + named.stderr
        assert "ReservationName=bobs" in c.ok("scontrol", "show", "res", user=BOB)
    finally:
        c.ok("scontrol", "delete", "reservationname=bobs")


def test_a_coordinator_sees_and_manages_the_accounts_jobs(cluster: Cluster) -> None:
    c = cluster
    held = c.submit("-A", "physics", "--hold", "-o", "/dev/null", "--wrap", "true", user=BOB, cwd=_out(c))
    try:
        assert c.ok("squeue", "-h", "-o", "%i", user=ALICE) == ""
        plain = c.run("scontrol", "release", str(held), user=ALICE)
        assert plain.returncode == 1 and "Invalid" in plain.stderr
        assert _coordinate(c, add=True) == (
            " Adding Coordinator User(s)\n  alice\n To Account(s) and all sub-accounts\n  physics\n"
        )
        shown = c.ok("sacctmgr", "show", "user", "alice", "withcoord").splitlines()
        assert shown[0].endswith("Coord Accounts ") and shown[2].endswith(" physics ")
        assert c.ok("squeue", "-h", "-o", "%i %u", user=ALICE) == f"{held} bob\n"
        c.ok("scontrol", "release", str(held), user=ALICE)
        c.wait_state(held, {"COMPLETED"})
        # sacct of bob's physics job: the coordinator's, not a plain user's (slurmdbd.conf PrivateData)
        wait_until("bob's job in alice's sacct", lambda: [str(held), "bob"] in _sacct(c, ALICE), 30)
        assert c.ok("sacctmgr", "-n", "show", "account", "format=account", user=ALICE).split() == ["physics"]
        assert _users(c, ALICE) == ["alice"]  # a coordinator still lists only itself
        # and may set limits on its account's users (measured on 22.05), which a plain user may not
        limit = ("sacctmgr", "-i", "modify", "user", "bob", "where", "account=physics", "set")
        assert c.run(*limit, "maxjobs=5", user=BOB).returncode == 1
        c.ok(*limit, "maxjobs=5", user=ALICE)
        shown = c.ok(
            "sacctmgr", "-n", "show", "assoc", "where", "user=bob", "account=physics", "format=maxjobs"
        )
        assert shown.split() == ["5"]
        c.ok(*limit, "maxjobs=-1")
        second = c.submit(
            "-A", "physics", "--begin=now+1hour", "-o", "/dev/null", "--wrap", "true", user=BOB, cwd=_out(c)
        )
        c.ok("scontrol", "hold", str(second), user=ALICE)
        # a coordinator's hold is a user hold, which bob may release (22.05: JobHeldUser)
        assert c.ok("squeue", "-h", "-j", str(second), "-o", "%r") == "JobHeldUser\n"
        c.ok("scontrol", "release", str(second), user=BOB)
        c.ok("scancel", str(second), user=ALICE)
        c.wait_state(second, {"CANCELLED"})
    finally:
        _coordinate(c, add=False)
        c.run("scancel", str(held))
    assert [str(held), "bob"] not in _sacct(c, ALICE)
    denied = c.run("sacctmgr", "show", "account", user=ALICE)
    assert (denied.returncode, denied.stderr) == (
        1,
        "sacctmgr: error: Access/permission denied\n Problem with query.\n",
    )
    assert "bob" in c.ok("sacct", "-a", "-X", "-n", "-o", "user")  # root sees every record


def test_sshare_shows_a_user_their_own_rows(cluster: Cluster) -> None:
    c = cluster
    rows = [line.split()[:2] for line in c.ok("sshare", "-a", "-n", user=ALICE).splitlines()]
    assert rows == [["physics", "alice"], ["research", "alice"]]
    assert ["bob"] in [line.split()[1:2] for line in c.ok("sshare", "-a", "-n").splitlines()]
