"""Advance reservations end to end: scontrol create/update/show/delete, sinfo -T, --reservation jobs."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import NOBODY, Cluster, start_cluster, stop_cluster
from tests.e2e.test_resilience import _pid, _restart, _wait_ping

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("resv"),
        nodes=2,
        extra=("SchedulerType=sched/backfill", "SchedulerParameters=bf_resolution=1"),
    )
    yield c
    stop_cluster(c)


@pytest.fixture(autouse=True)
def _clean(cluster: Cluster) -> Iterator[None]:
    yield
    cluster.run("scancel", "-u", "root")
    cluster.run("scancel", "-u", "nobody")
    deadline = time.monotonic() + 30
    while cluster.ok("squeue", "-h", "-o", "%i").strip() and time.monotonic() < deadline:
        time.sleep(0.2)
    for line in cluster.ok("sinfo", "-T", "-h").splitlines():
        if not line.startswith("No reservations"):
            cluster.run("scontrol", "delete", "reservation", line.split()[0])


def _create(cluster: Cluster, *words: str, user: int | None = None) -> tuple[int, str, str]:
    out = cluster.run("scontrol", "create", "reservation", *words, user=user)
    return out.returncode, out.stdout, out.stderr


def _show(cluster: Cluster, name: str) -> str:
    return cluster.ok("scontrol", "show", "reservation", name)


def test_create_show_update_delete_round_trip(cluster: Cluster) -> None:
    code, out, err = _create(
        cluster,
        "ReservationName=R1",
        "StartTime=now+1hour",
        "Duration=60",
        "Nodes=node2",
        "Users=nobody",
        "Flags=DAILY",
    )
    assert (code, out, err) == (0, "Reservation created: R1\n", "")
    show = _show(cluster, "R1")
    assert show.startswith("ReservationName=R1 StartTime=")
    assert (
        "Duration=01:00:00\n   Nodes=node2 NodeCnt=1 CoreCnt=4 Features=(null) PartitionName=(null)"
        " Flags=DAILY,SPEC_NODES\n   TRES=cpu=4\n" in show
    )
    assert (
        "   Users=nobody Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null)"
        " Watts=n/a\n   MaxStartDelay=(null)\n" in show
    )
    sinfo = cluster.ok("sinfo", "-T").splitlines()
    assert sinfo[0] == "RESV_NAME     STATE           START_TIME             END_TIME     DURATION  NODELIST"
    assert sinfo[1].startswith("R1         INACTIVE  ") and sinfo[1].endswith("     01:00:00  node2")

    assert (
        cluster.ok("scontrol", "update", "ReservationName=R1", "Users+=root", "Duration=1-00:00:00")
        == "Reservation updated.\n"
    )
    show = _show(cluster, "R1")
    assert "Users=nobody,root " in show and "Duration=1-00:00:00" in show
    cluster.ok("scontrol", "update", "ReservationName=R1", "Users-=nobody", "StartTime=now")
    show = _show(cluster, "R1")
    assert "Users=root " in show and "State=ACTIVE" in show
    lacking = cluster.run("scontrol", "update", "ReservationName=R1", "Users-=root")
    assert lacking.returncode == 1
    assert lacking.stderr == (
        "Error updating the reservation: Reservation request lacks users, groups or accounts\n"
        "slurm_update error: Reservation request lacks users, groups or accounts\n"
    )
    one_line = cluster.ok("scontrol", "-o", "show", "reservation")
    assert (
        one_line.count("\n") == 1
        and one_line.startswith("ReservationName=R1 ")
        and "MaxStartDelay" in one_line
    )

    assert cluster.run("scontrol", "delete", "reservation", "R1").returncode == 0
    gone = cluster.run("scontrol", "show", "reservation", "R1")
    assert (gone.returncode, gone.stderr) == (1, "Reservation R1 not found\n")
    assert cluster.ok("scontrol", "show", "reservation") == "No reservations in the system\n"
    assert cluster.ok("sinfo", "-T", "-h") == "No reservations in the system\n"
    again = cluster.run("scontrol", "delete", "reservation", "R1")
    assert (again.returncode, again.stderr) == (
        1,
        "delete_reservation reservation: Requested reservation is invalid\n",
    )
    other = cluster.run("scontrol", "delete", "ReservationName=R1")
    assert (other.returncode, other.stderr) == (
        1,
        "delete_reservation ReservationName=R1: Requested reservation is invalid\n",
    )
    bare = cluster.run("scontrol", "delete", "reservation")
    assert (
        bare.stderr == "scontrol: error: Proper format is 'delete <ENTITY>=<ID>' or 'delete <ENTITY> <ID>'\n"
    )


def test_only_operators_change_reservations(cluster: Cluster) -> None:
    code, _, err = _create(
        cluster,
        "ReservationName=R2",
        "StartTime=now",
        "Duration=5",
        "Nodes=node1",
        "Users=nobody",
        user=NOBODY,
    )
    assert (code, err) == (1, "Error creating the reservation: Invalid user id\n")
    assert (
        _create(cluster, "ReservationName=R2", "StartTime=now", "Duration=5", "Nodes=node1", "Users=nobody")[
            0
        ]
        == 0
    )
    denied = cluster.run("scontrol", "delete", "reservation", "R2", user=NOBODY)
    assert (denied.returncode, denied.stderr) == (1, "delete_reservation reservation: Invalid user id\n")
    upd = cluster.run("scontrol", "update", "ReservationName=R2", "Duration=9", user=NOBODY)
    assert upd.returncode == 1 and upd.stderr.startswith("Error updating the reservation: Invalid user id\n")


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (
            ("ReservationName=B", "Duration=10", "Nodes=node1", "Users=root"),
            "scontrol: error: A start time must be given.  No reservation created.\n",
        ),
        (
            ("ReservationName=B", "StartTime=now", "Nodes=node1", "Users=root"),
            "scontrol: error: An end time or duration must be given.  No reservation created.\n",
        ),
        (
            ("ReservationName=B", "StartTime=now", "Duration=10", "Nodes=node1"),
            "scontrol: error: Either Users/Groups and/or Accounts must be specified.  No reservation created.\n",
        ),
        (
            ("ReservationName=B", "StartTime=now", "Duration=10", "Users=root"),
            "scontrol: error: CoreCnt, Nodes, NodeCnt, BurstBuffer, Licenses or Watts must be specified."
            "  No reservation created.\n",
        ),
        (
            ("ReservationName=B", "StartTime=garbage", "Duration=10", "Nodes=node1", "Users=root"),
            "Invalid time specification (pos=0): garbage\n"
            "scontrol: error: Invalid start time StartTime=garbage.  No reservation created.\n",
        ),
        (
            ("ReservationName=B", "StartTime=now", "Duration=xx", "Nodes=node1", "Users=root"),
            "scontrol: error: Invalid duration Duration=xx.  No reservation created.\n",
        ),
        (
            ("ReservationName=B", "StartTime=now", "Duration=10", "Nodes=node1", "Users=root", "Flags=BOGUS"),
            "scontrol: error: Error parsing flags BOGUS.  No reservation created.\n",
        ),
        (
            ("ReservationName=B", "StartTime=now", "Duration=10", "Nodes=node1", "Users=nosuchuser"),
            "Error creating the reservation: Invalid user id\n",
        ),
        (
            ("ReservationName=B", "StartTime=now", "Duration=10", "Nodes=node9", "Users=root"),
            "Error creating the reservation: Invalid node name specified\n",
        ),
    ],
    ids=[
        "no-start",
        "no-duration",
        "no-users",
        "no-nodes",
        "bad-start",
        "bad-duration",
        "bad-flag",
        "unknown-user",
        "unknown-node",
    ],
)
def test_bad_input_gets_slurms_messages(cluster: Cluster, words: tuple[str, ...], message: str) -> None:
    code, out, err = _create(cluster, *words)
    assert (code, out, err) == (1, "", message)


def test_busy_nodes_and_overlaps_are_refused(cluster: Cluster, workdir: Path) -> None:
    job = cluster.submit("-w", "node1", "-o", "/dev/null", "--wrap", "sleep 600")
    cluster.wait_state(job, {"RUNNING"})
    code, _, err = _create(
        cluster, "ReservationName=B1", "StartTime=now", "Duration=10", "Nodes=node1", "Users=root"
    )
    assert (code, err) == (1, "Error creating the reservation: Requested nodes are busy\n")
    code, _, err = _create(
        cluster,
        "ReservationName=B1",
        "StartTime=now",
        "Duration=10",
        "Nodes=node1",
        "Users=root",
        "Flags=IGNORE_JOBS",
    )
    assert code == 0, err
    code, _, err = _create(
        cluster,
        "ReservationName=B2",
        "StartTime=now+5minutes",
        "Duration=10",
        "Nodes=node1",
        "Users=root",
        "Flags=IGNORE_JOBS",
    )
    assert (code, err) == (
        1,
        "Error creating the reservation: Requested reservation overlaps with another reservation\n",
    )
    code, _, err = _create(
        cluster, "ReservationName=B1", "StartTime=now+1day", "Duration=10", "NodeCnt=1", "Users=root"
    )
    assert (code, err) == (1, "Error creating the reservation: Duplicate reservation name\n")
    # NodeCnt: the free nodes of the default partition; fewer than asked give a smaller one (as Slurm 22.05)
    code, out, err = _create(
        cluster, "ReservationName=B3", "StartTime=now", "Duration=10", "NodeCnt=2", "Users=root"
    )
    assert code == 0, err
    assert "Nodes=node2 NodeCnt=1" in _show(cluster, "B3") and "PartitionName=batch" in _show(cluster, "B3")
    code, out, err = _create(
        cluster, "ReservationName=B4", "StartTime=now", "Duration=10", "NodeCnt=1", "Users=root"
    )
    assert (code, err) == (1, "Error creating the reservation: Requested nodes are busy\n")
    assert out.startswith(
        "Note, unless nodes are directly requested a reservation must exist in a single partition."
    )


def test_a_reservation_keeps_others_off_its_nodes_while_its_user_runs_there(
    cluster: Cluster, workdir: Path
) -> None:
    code, _, err = _create(
        cluster, "ReservationName=mine", "StartTime=now", "Duration=60", "Nodes=node2", "Users=nobody"
    )
    assert code == 0, err
    # root's jobs (each takes a whole node) stay off node2: one runs on node1, the other waits
    first = cluster.submit("--exclusive", "-o", "/dev/null", "--wrap", "sleep 600")
    second = cluster.submit("--exclusive", "-o", "/dev/null", "--wrap", "sleep 600")
    cluster.wait_state(first, {"RUNNING"})
    time.sleep(2)
    assert cluster.job_field(first, "%N") == "node1"
    assert cluster.job_field(second, "%T %r") == "PENDING Resources"
    # nobody's job in the reservation runs there
    mine = cluster.submit(
        "--reservation=mine", "-o", "/dev/null", "--wrap", "sleep 30", user=NOBODY, cwd=workdir
    )
    cluster.wait_state(mine, {"RUNNING"})
    assert cluster.job_field(mine, "%N %v") == "node2 mine"
    assert "Reservation=mine" in cluster.ok("scontrol", "show", "job", str(mine))
    assert cluster.ok("squeue", "-h", "-R", "mine", "-o", "%i").split() == [str(mine)]
    assert cluster.state(second) == "PENDING"
    moved = cluster.run("scontrol", "update", f"JobId={second}", "Reservation=mine")
    assert (moved.returncode, moved.stderr) == (
        1,
        f"Access denied to requested reservation for job {second}\n",
    )  # 22.05
    # root may not use it; an unknown name is invalid
    denied = cluster.run("sbatch", "--reservation=mine", "--wrap", "true")
    assert (denied.returncode, denied.stderr) == (
        1,
        "sbatch: error: Batch job submission failed: Access denied to requested reservation\n",
    )
    unknown = cluster.run("sbatch", "--reservation=nosuch", "--wrap", "true")
    assert unknown.stderr == "sbatch: error: Batch job submission failed: Requested reservation is invalid\n"
    busy = cluster.run("scontrol", "delete", "reservation", "mine")
    assert busy.stderr == "delete_reservation reservation: Requested reservation is in use\n"


def test_a_job_waits_for_its_reservation_to_start(cluster: Cluster, workdir: Path) -> None:
    code, _, err = _create(
        cluster, "ReservationName=later", "StartTime=now+1hour", "Duration=60", "Nodes=node2", "Users=root"
    )
    assert code == 0, err
    job = cluster.submit("--reservation=later", "-t", "10", "-o", "/dev/null", "--wrap", "true")
    time.sleep(2)
    assert cluster.job_field(job, "%T %r") == "PENDING Reservation"
    planned = cluster.ok("squeue", "--start", "-h", "-j", str(job), "-o", "%S %Y").split()
    assert planned == [_field(_show(cluster, "later"), "StartTime"), "node2"]
    # a job without it that would still run when it starts keeps off node2
    other = cluster.submit("-w", "node2", "-t", "90", "-o", "/dev/null", "--wrap", "true")
    time.sleep(2)
    assert cluster.job_field(other, "%r") == "ReqNodeNotAvail, May be reserved for other job"
    # the other job may join it (root is one of its users); moving the reservation to now lets both in
    cluster.ok("scontrol", "update", f"JobId={other}", "Reservation=later")
    cluster.ok("scontrol", "update", "ReservationName=later", "StartTime=now")
    assert cluster.wait_state(other, {"COMPLETED"}) == "COMPLETED"
    assert cluster.wait_state(job, {"COMPLETED"}) == "COMPLETED"
    assert cluster.job_field(job, "%N") == "node2"


def _field(record: str, key: str) -> str:
    return next(w.split("=", 1)[1] for w in record.split() if w.startswith(f"{key}="))


def test_backfill_plans_around_a_future_reservation(cluster: Cluster) -> None:
    code, _, err = _create(
        cluster, "ReservationName=soon", "StartTime=now+1hour", "Duration=30", "Nodes=ALL", "Users=nobody"
    )
    assert code == 0, err
    long = cluster.submit("-t", "90", "-o", "/dev/null", "--wrap", "true")
    short = cluster.submit("-t", "30", "-o", "/dev/null", "--wrap", "true")
    assert cluster.wait_state(short, {"COMPLETED"}) == "COMPLETED"
    assert cluster.job_field(long, "%T %r") == "PENDING ReqNodeNotAvail, Reserved for maintenance"
    planned = cluster.ok("squeue", "--start", "-h", "-j", str(long), "-o", "%S")
    assert planned.strip() == _field(_show(cluster, "soon"), "EndTime")


def test_maint_reservation_marks_nodes_and_holds_other_jobs(cluster: Cluster) -> None:
    code, _, err = _create(
        cluster,
        "ReservationName=fix",
        "StartTime=now",
        "Duration=UNLIMITED",
        "Nodes=ALL",
        "Users=root",
        "Flags=MAINT",
    )
    assert code == 0, err
    assert "Duration=365-00:00:00" in _show(cluster, "fix")
    assert "State=IDLE+MAINTENANCE+RESERVED " in cluster.ok("scontrol", "show", "node", "node1")
    assert cluster.ok("sinfo", "-h", "-p", "batch", "-o", "%t %D").split() == ["maint", "2"]
    job = cluster.submit("-o", "/dev/null", "--wrap", "true")
    time.sleep(2)
    assert cluster.job_field(job, "%r") == "ReqNodeNotAvail, Reserved for maintenance"
    cluster.ok("scontrol", "delete", "reservation", "fix")
    assert cluster.wait_state(job, {"COMPLETED"}) == "COMPLETED"


def test_reservations_survive_a_ctld_restart(cluster: Cluster) -> None:
    code, _, err = _create(
        cluster,
        "ReservationName=durable",
        "StartTime=now+1hour",
        "Duration=30",
        "Nodes=node1",
        "Accounts=physics",
    )
    assert code == 0, err
    before = _show(cluster, "durable")
    os.kill(_pid(cluster, "ctld"), signal.SIGKILL)
    time.sleep(0.5)
    _restart(cluster, "ctld.main")
    _wait_ping(cluster)
    assert _show(cluster, "durable") == before
