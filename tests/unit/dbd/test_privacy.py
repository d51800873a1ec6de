"""Account coordinators and slurmdbd.conf PrivateData in dbd, on SQLite and on MariaDB alike.

What a plain user sees is 22.05's, measured on the real one: with PrivateData=jobs sacct lists their
own jobs and those of the accounts they coordinate; with users, `show user` lists only themselves and
`show assoc` their own associations, the accounts above them and all of a coordinated account's; with
accounts, `show account` lists only the coordinated ones.
"""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from dbd import admin, privacy, queries
from shoal.acct_records import decode
from shoal.v1 import accounting_pb2 as pb
from tests.unit.dbd.test_contract import build_tree, job, modify, send, show

WORDS = frozenset({"jobs", "users", "accounts"})


def _coord(sessions: sessionmaker[Session], action: str = "add") -> list[str]:
    where = {"account": "physics"} if action == "delete" else {}
    values = {"account": "physics"} if action == "add" else {}
    return modify(sessions, action, "coordinator", ["alice"], where=where, **values)


def test_add_show_push_and_delete_a_coordinator(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    modify(sessions, "add", "account", ["theory"], parent="physics")
    assert _coord(sessions) == [
        " Adding Coordinator User(s)",
        "  alice",
        " To Account(s) and all sub-accounts",
        "  physics",
    ]
    assert _coord(sessions) == []  # already one: nothing new added
    rows = {r["user"]: r["coordinatoraccounts"] for r in show(sessions, "user")}
    assert rows == {"alice": "physics", "bob": "", "root": ""}
    with sessions() as session:
        pushed = {u.name: list(u.coord_accounts) for u in admin.limits(session, "c1", 0).users}
    assert sorted(pushed["alice"]) == ["physics", "theory"]  # sub-accounts too, as 22.05
    assert _coord(sessions, "delete")[-1] == "  U = alice     A = physics   "
    with sessions() as session:
        assert all(not u.coord_accounts for u in admin.limits(session, "c1", 0).users)


def _viewer(sessions: sessionmaker[Session], user: str) -> privacy.Viewer | None:
    with sessions() as session:
        return privacy.viewer(session, WORDS, user, privileged=False)


def _sacct(sessions: sessionmaker[Session], user: str) -> list[tuple[int, str]]:
    who = _viewer(sessions, user)
    only = (who.user, who.accounts) if who is not None else None
    with sessions() as session:
        data = queries.find_jobs(session, pb.JobQuery(), only).SerializeToString()
    return [(j.job.job_id, j.job.user) for j in decode(pb.AcctJobsResponse.FromString(data))]


def test_sacct_under_private_jobs(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    send(sessions, [job(1), job(2, user="bob"), job(3, user="bob", account="research")])
    assert _sacct(sessions, "alice") == [(1, "alice")]
    _coord(sessions)
    assert _sacct(sessions, "alice") == [(1, "alice"), (2, "bob")]  # physics' jobs, not research's
    modify(sessions, "modify", "user", ["bob"], adminlevel="Operator")
    assert _viewer(sessions, "bob") is None  # an operator sees everything
    with sessions() as session:
        assert privacy.viewer(session, WORDS, "alice", privileged=True) is None  # root, SlurmUser


def _shown(
    sessions: sessionmaker[Session], kind: str, user: str, keys: tuple[str, ...]
) -> list[tuple[str, ...]]:
    who = _viewer(sessions, user)
    assert who is not None
    with sessions() as session:
        rows = privacy.filter_rows(session, kind, show(sessions, kind), who)
    return [tuple(r.get(k, "") for k in keys) for r in rows]


def test_sacctmgr_show_under_private_users_and_accounts(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    assert _shown(sessions, "user", "bob", ("user",)) == [("bob",)]
    # bob: his association, the account above it and root, not alice's
    assert _shown(sessions, "association", "bob", ("account", "user")) == [
        ("root", ""),
        ("physics", ""),
        ("physics", "bob"),
    ]
    assert _shown(sessions, "account", "bob", ("account",)) == []
    _coord(sessions)
    assert ("physics", "bob") in _shown(sessions, "association", "alice", ("account", "user"))
    assert _shown(sessions, "account", "alice", ("account",)) == [("physics",)]
    assert _shown(sessions, "user", "alice", ("user",)) == [("alice",)]  # a coordinator: itself only


def _may(sessions: sessionmaker[Session], **req: object) -> bool:
    with sessions() as session:
        return admin.coordinator_may(session, "alice", pb.ModifyRequest(**req))  # type: ignore[arg-type]


def test_what_a_coordinator_may_change_in_sacctmgr(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    add_bob = {"action": "add", "kind": "coordinator", "names": ["bob"], "set": {"account": "physics"}}
    limit = {"action": "modify", "kind": "user", "names": ["bob"], "where": {"account": "physics"}}
    assert not _may(sessions, **add_bob)  # not a coordinator yet
    _coord(sessions)
    assert _may(sessions, **add_bob)  # measured: a coordinator adds another to its account
    assert _may(sessions, **limit, set={"maxjobs": "5"})  # and sets its users' association limits
    assert not _may(sessions, **limit, set={"adminlevel": "Administrator"})  # never a level
    assert not _may(sessions, action="modify", kind="user", names=["bob"], set={"maxjobs": "5"})  # no account
    assert not _may(sessions, **{**add_bob, "set": {"account": "research"}})  # not its account
    assert not _may(sessions, action="delete", kind="user", names=["bob"], where={"account": "physics"})
