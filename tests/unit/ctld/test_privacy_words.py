"""PrivateData's other words and account coordinators in the controller (the real one, no daemons).

As measured on the real 22.05: a coordinator of an account (sacctmgr add coordinator) holds,
releases, updates and cancels that account's users' jobs and sees them under PrivateData=jobs; a
plain user may not load nodes or partitions under PrivateData=nodes/partitions ("Access/permission
denied"), sees only the reservations that admit them under PrivateData=reservations, and only their
own sshare rows (with those of the accounts they coordinate) under PrivateData=usage.
"""

from __future__ import annotations

import pwd
from pathlib import Path

import pytest

from ctld.controller import Caller
from ctld.errors import SlurmError
from ctld.priority_report import _private_depths
from ctld.sched.fairshare import ShareRow
from shoal.v1 import accounting_pb2, controller_pb2
from tests.unit.ctld.harness import Harness, cluster, job

OWNER = Caller(uid=pwd.getpwnam("daemon").pw_uid, gid=1, host="login")  # owns the jobs, in "lab"
COORD = Caller(uid=pwd.getpwnam("bin").pw_uid, gid=2, host="login")  # the one made coordinator
_version = [0]


def _harness(tmp_path: Path, private: str = "jobs") -> Harness:
    keys = {"AccountingStorageType": "accounting_storage/slurmdbd", "PrivateData": private}
    return Harness.of(cluster().nodes(1).set(**keys), tmp_path)


def _push(h: Harness, coord: tuple[str, ...] = ()) -> None:
    """dbd's push after `sacctmgr add coordinator account=lab names=bin` (or its delete)."""
    _version[0] += 1
    users = [
        accounting_pb2.AcctUser(name="bin", default_account="other", coord_accounts=list(coord)),
        accounting_pb2.AcctUser(name="daemon", default_account="lab"),
    ]
    assocs = [
        accounting_pb2.Association(id=1, account="root"),
        accounting_pb2.Association(id=2, account="lab", parent="root"),
        accounting_pb2.Association(id=3, account="lab", user="daemon"),
        accounting_pb2.Association(id=4, account="other", parent="root"),
        accounting_pb2.Association(id=5, account="other", user="bin"),
    ]
    resp = accounting_pb2.GetLimitsResponse(
        version=_version[0], changed=True, users=users, associations=assocs
    )
    h.ctl.accounting.push(resp)


def _lab_job(h: Harness) -> int:
    builder = job().time(5).held()
    builder.spec.account = "lab"
    return h.submit(builder, caller=OWNER)


def _listed(h: Harness, caller: Caller) -> list[int]:
    return [j.job_id for j in h.ctl.get_jobs(controller_pb2.GetJobsRequest(), caller).jobs]


def test_a_coordinator_sees_and_manages_the_accounts_jobs(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    mine = _lab_job(h)
    _push(h)
    assert _listed(h, COORD) == []
    assert h.update(mine, "release", caller=COORD) == ["Invalid user id"]
    _push(h, coord=("lab",))
    assert _listed(h, COORD) == [mine]
    assert h.ctl.why(controller_pb2.WhyRequest(job_id=str(mine)), COORD).job_id == mine  # shoal why
    assert h.update(mine, "release", caller=COORD) == []
    assert h.update(mine, "hold", caller=COORD) == []
    assert h.update(mine, "release", caller=OWNER) == []  # a coordinator's hold is a user hold (22.05)
    assert h.update(mine, "hold", caller=COORD) == []
    assert h.update(mine, "update", caller=COORD, TimeLimit="3") == []
    assert [r.code for r in h.cancel(mine, caller=COORD).results if r.code] == []
    _push(h)  # sacctmgr delete coordinator: the next push takes it back
    assert _listed(h, COORD) == []


def test_a_coordinator_of_another_account_may_not(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    mine = _lab_job(h)
    _push(h, coord=("other",))
    assert _listed(h, COORD) == []
    assert h.update(mine, "hold", caller=COORD) == ["Invalid user id"]
    assert [r.message for r in h.cancel(mine, caller=COORD).results if r.code] == ["Access/permission denied"]


@pytest.mark.parametrize(
    ("private", "nodes", "partitions"),
    [
        ("nodes", False, True),
        ("partitions", True, False),
        ("nodes,partitions", False, False),
        ("jobs", True, True),
    ],
)
def test_nodes_and_partitions_are_operators_only(
    tmp_path: Path, private: str, nodes: bool, partitions: bool
) -> None:
    h = _harness(tmp_path, private)
    _push(h)

    def loads(fn: object, req: object, caller: Caller) -> bool:
        try:
            fn(req, caller)  # type: ignore[operator]
        except SlurmError as exc:
            assert exc.message == "Access/permission denied"
            return False
        return True

    assert loads(h.ctl.get_nodes, controller_pb2.GetNodesRequest(), COORD) == nodes
    assert loads(h.ctl.get_partitions, controller_pb2.GetPartitionsRequest(), COORD) == partitions
    assert loads(h.ctl.get_nodes, controller_pb2.GetNodesRequest(with_partitions=True), COORD) == (
        nodes and partitions
    )
    root = Caller(uid=0, gid=0)
    assert loads(h.ctl.get_nodes, controller_pb2.GetNodesRequest(with_partitions=True), root)


def _reserve(h: Harness, name: str, hours: int, users: str = "", accounts: str = "") -> None:
    start = int(h.clock()) + 3600 * hours
    req = controller_pb2.ReservationRequest(name=name, nodes="n1", start_time=start, duration_min=10)
    if users:
        req.users.values.append(users)
        req.users.given = True
    if accounts:
        req.accounts.values.append(accounts)
        req.accounts.given = True
    h.ctl.create_reservation(req, Caller(uid=0, gid=0))


def test_a_user_sees_only_the_reservations_they_may_use(tmp_path: Path) -> None:
    h = _harness(tmp_path, "reservations")
    _push(h)
    _reserve(h, "r_daemon", 1, users="daemon")
    _reserve(h, "r_other", 2, accounts="other")

    def names(caller: Caller) -> list[str]:
        return [
            r.name
            for r in h.ctl.get_reservations(controller_pb2.GetReservationsRequest(), caller).reservations
        ]

    assert names(COORD) == ["r_other"]  # bin has an association in "other"
    assert names(OWNER) == ["r_daemon"]
    assert names(Caller(uid=0, gid=0)) == ["r_daemon", "r_other"]


def _row(account: str, user: str, depth: int) -> ShareRow:
    return ShareRow(0, account, user, depth, 1, 0.5, 0.0, 0.0, 0.0, 1.0, 1.0)


def test_sshare_rows_under_private_usage() -> None:
    # the tree sshare -a prints: root, physics (alice, bob), research (alice)
    rows = [
        _row("root", "", 0),
        _row("physics", "", 1),
        _row("physics", "alice", 2),
        _row("physics", "bob", 2),
        _row("research", "", 1),
        _row("research", "alice", 2),
    ]

    def shown(accounts: frozenset[str]) -> list[tuple[str, str, int]]:
        depths = _private_depths(rows, "alice", accounts)
        return [(r.account, r.user, depths[id(r)]) for r in rows if id(r) in depths]

    # 22.05 measured: a user's own rows at the left; a coordinator's account with its users under it
    assert shown(frozenset()) == [("physics", "alice", 0), ("research", "alice", 0)]
    assert shown(frozenset({"physics"})) == [
        ("physics", "", 0),
        ("physics", "alice", 1),
        ("physics", "bob", 1),
        ("research", "alice", 0),
    ]


@pytest.mark.parametrize(
    ("private", "user_told"), [("partitions", True), ("nodes", False), ("jobs", False)], ids=str
)
def test_the_job_listing_says_when_partitions_are_kept_from_the_caller(
    tmp_path: Path, private: str, user_told: bool
) -> None:
    """22.05's squeue under PrivateData=partitions lists a user's jobs all the same, with a
    slurm_load_partitions error: GetJobs answers with the jobs and says so (operators are never told)."""
    h = _harness(tmp_path, private)
    _push(h)
    mine = _lab_job(h)
    for caller, told in ((COORD, user_told), (OWNER, user_told), (Caller(uid=0, gid=0), False)):
        resp = h.ctl.get_jobs(controller_pb2.GetJobsRequest(), caller)
        assert resp.partitions_private == told
        assert [j.job_id for j in resp.jobs] == ([] if private == "jobs" and caller == COORD else [mine])
