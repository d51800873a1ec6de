"""The accounting store's contract, run on SQLite and on MariaDB alike."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import inspect
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from dbd import admin, ingest, queries, schema
from dbd.purge import purge_jobs
from shoal.acct_records import AcctEntry, decode
from shoal.v1 import accounting_pb2 as pb

TABLES = {
    "accounts",
    "coordinators",
    "associations",
    "clusters",
    "jobs",
    "steps",
    "node_events",
    "qos",
    "users",
    "usage_hourly",
    "received",
    "meta",
}


def job(job_id: int, state: str = "COMPLETED", **kw: object) -> pb.AcctRecord:
    fields: dict[str, object] = dict(
        job_id=job_id,
        name="wrap",
        user="alice",
        uid=1000,
        account="physics",
        partition="batch",
        state=state,
        submit_time=1000,
        eligible_time=1000,
        start_time=1010,
        end_time=1020 if state not in ("PENDING", "RUNNING") else 0,
        alloc_cpus=2,
        nodelist="node1",
        array_task_id=-1,
        cancelled_by=-1,
    )
    fields.update(kw)
    return pb.AcctRecord(job=pb.JobRecord(**fields))  # type: ignore[arg-type]


def step(job_id: int, step_id: int = -4, state: str = "COMPLETED", **kw: object) -> pb.AcctRecord:
    fields: dict[str, object] = dict(
        job_id=job_id, step_id=step_id, name="batch", state=state, nodelist="node1", submit_time=1000
    )
    fields.update(kw)
    return pb.AcctRecord(step=pb.StepRecord(**fields))  # type: ignore[arg-type]


def send(
    sessions: sessionmaker[Session],
    records: list[pb.AcctRecord],
    start: int = 1,
    epoch: str = "e1",
    cluster: str = "c1",
) -> tuple[int, int]:
    for seq, rec in enumerate(records, start=start):
        rec.seq = seq
    with sessions.begin() as session:
        return ingest.apply_records(
            session, pb.SendRecordsRequest(cluster=cluster, epoch=epoch, records=records)
        )


def find(sessions: sessionmaker[Session], **kw: object) -> list[AcctEntry]:
    """What sacct gets: the GetJobs answer, serialized and decoded."""
    with sessions() as session:
        data = queries.find_jobs(session, pb.JobQuery(**kw)).SerializeToString()  # type: ignore[arg-type]
    return decode(pb.AcctJobsResponse.FromString(data))


def test_migrations_upgrade_downgrade_upgrade(engine: Engine) -> None:
    schema.upgrade(engine)
    assert TABLES <= set(inspect(engine).get_table_names())
    schema.downgrade(engine)
    assert not TABLES & set(inspect(engine).get_table_names())
    schema.upgrade(engine)
    assert TABLES <= set(inspect(engine).get_table_names())


def test_records_apply_exactly_once(sessions: sessionmaker[Session]) -> None:
    batch = [job(1, "PENDING"), job(1, "RUNNING"), job(1), step(1)]
    assert send(sessions, batch) == (4, 4)
    assert send(sessions, [job(1, "PENDING"), job(1, "RUNNING"), job(1), step(1)]) == (4, 0)  # replayed
    assert send(sessions, [job(1, "RUNNING")], start=3) == (4, 0)  # an old record never goes back
    found = find(sessions)
    assert [(j.job.job_id, j.job.state, [s.step_id for s in j.steps]) for j in found] == [
        (1, "COMPLETED", [-4])
    ]


def test_a_new_queue_epoch_starts_its_own_sequence(sessions: sessionmaker[Session]) -> None:
    send(sessions, [job(1)])
    assert send(sessions, [job(2)], epoch="e2") == (1, 1)
    assert [j.job.job_id for j in find(sessions)] == [1, 2]


def test_finished_job_adds_hourly_usage_once(sessions: sessionmaker[Session]) -> None:
    send(sessions, [job(1, start_time=3500, end_time=3700, submit_time=3400)])
    send(sessions, [job(1, start_time=3500, end_time=3700, submit_time=3400)], start=2)  # same job again
    with sessions() as session:
        rows = queries.report(session, pb.ReportRequest(start=0, end=7200, cluster="c1")).rows
    assert [dict(r.fields) for r in rows] == [
        {
            "cluster": "c1",
            "account": "physics",
            "user": "alice",
            "cpu_seconds": str(200 * 2),
            "gpu_seconds": "0",
        }
    ]


def test_decayed_usage_per_association_for_a_ctld_without_its_ledger(sessions: sessionmaker[Session]) -> None:
    # hour 0: 800 CPU-s (alice), hour 2: 3600 CPU-s and GPU-s (bob); decayed from each hour's middle
    send(
        sessions,
        [
            job(1, start_time=100, end_time=500, submit_time=0),
            job(
                2,
                user="bob",
                start_time=7200,
                end_time=10800,
                submit_time=0,
                alloc_cpus=1,
                tres_alloc="cpu=1,gres/gpu=1",
            ),
        ],
    )
    with sessions() as session:
        got = queries.decayed_usage(session, pb.GetUsageRequest(cluster="c1", now=16200, half_life_s=7200))
        assert [(u.user, round(u.cpu_seconds), round(u.gpu_seconds)) for u in got.usage] == [
            ("alice", 800 // 4, 0),
            ("bob", 3600 // 2, 3600 // 2),
        ]  # two half-lives old, one
        after_reset = queries.decayed_usage(session, pb.GetUsageRequest(cluster="c1", now=9000, since=3600))
        assert [(u.user, u.cpu_seconds) for u in after_reset.usage] == [("bob", 3600.0)]


QUERIES = [
    ("all", {}, [1, 2, 3, 4, 5, 6, 7, 8]),
    ("job id", {"job_ids": ["2"]}, [2]),
    ("array parent id", {"job_ids": ["3"]}, [3, 4]),
    ("array task", {"job_ids": ["3_1"]}, [4]),
    ("user", {"users": ["bob"]}, [5]),
    ("account", {"accounts": ["research"]}, [5]),
    ("state", {"states": ["FAILED"]}, [2]),
    ("name", {"names": ["train"]}, [5]),
    ("node", {"nodes": ["node2"]}, [5]),
    ("ended before start", {"start": 5000}, [5]),
    ("never eligible in a window", {"start": 500}, [1, 2, 3, 4, 5, 8]),  # 6 and 7 only by id
    ("never eligible by id", {"job_ids": ["6", "7"]}, [6, 7]),
    # whole seconds: a window until the second the jobs were submitted in holds them (sacct -E now at once)
    ("until their own second", {"start": 500, "end": 1000}, [1, 2, 3, 4, 5]),
    ("until the second before", {"start": 500, "end": 999}, []),
]


@pytest.mark.parametrize("query,expected", [q[1:] for q in QUERIES], ids=[q[0] for q in QUERIES])
def test_job_queries(sessions: sessionmaker[Session], query: dict[str, object], expected: list[int]) -> None:
    send(
        sessions,
        [
            job(1),
            job(2, "FAILED", exit_code=1),
            job(3, array_job_id=3, array_task_id=0),
            job(4, array_job_id=3, array_task_id=1),
            job(5, user="bob", account="research", name="train", nodelist="node[1-2]", end_time=6000),
            # cancelled while held (eligible never), before its --begin time (eligible later), and after it
            job(6, "CANCELLED", eligible_time=0, start_time=0, nodelist=""),
            job(7, "CANCELLED", eligible_time=int(time.time()) + 3600, start_time=0, nodelist=""),
            job(8, "CANCELLED", eligible_time=1005, start_time=0, nodelist=""),
        ],
    )
    assert [j.job.job_id for j in find(sessions, **query)] == expected


def test_requeued_id_shows_latest_unless_duplicates(sessions: sessionmaker[Session]) -> None:
    send(sessions, [job(7, "NODE_FAIL", submit_time=100), job(7, submit_time=200)])
    assert [j.job.state for j in find(sessions)] == ["COMPLETED"]
    assert [j.job.state for j in find(sessions, duplicates=True)] == ["NODE_FAIL", "COMPLETED"]


def test_a_run_that_never_reached_its_node_keeps_no_batch_step(sessions: sessionmaker[Session]) -> None:
    # ctld records .batch RUNNING at the start; stopped before the launch, the restarted ctld requeues the
    # job and records that run NODE_FAIL without a start: its .batch goes (in the same batch or later)
    send(sessions, [job(7, "RUNNING", submit_time=100), step(7, state="RUNNING", submit_time=100)])
    lost = job(7, "NODE_FAIL", submit_time=100, start_time=0, end_time=1020)
    rerun = [job(7, "RUNNING", submit_time=200), step(7, state="RUNNING", submit_time=200)]
    send(sessions, [lost, *rerun], start=3)
    runs = find(sessions, duplicates=True)
    assert [(j.job.state, [(s.step_id, s.state) for s in j.steps]) for j in runs] == [
        ("NODE_FAIL", []),
        ("RUNNING", [(-4, "RUNNING")]),
    ]
    send(sessions, [job(8, "RUNNING"), step(8, state="RUNNING"), job(8, "NODE_FAIL", start_time=0)], start=6)
    assert [s.step_id for s in find(sessions, job_ids=["8"])[0].steps] == []


def test_node_events_open_and_close(sessions: sessionmaker[Session]) -> None:
    send(
        sessions,
        [
            pb.AcctRecord(
                node_event=pb.NodeEventRecord(node="n1", state="DRAIN", reason="fan", start_time=10)
            ),
            pb.AcctRecord(node_event=pb.NodeEventRecord(node="n1", start_time=20)),
        ],
    )
    from sqlalchemy import select

    from dbd.models import NodeEvent

    with sessions() as session:
        events = [(e.state, e.reason, e.start_time, e.end_time) for e in session.scalars(select(NodeEvent))]
    assert events == [("DRAIN", "fan", 10, 20)]


def modify(
    sessions: sessionmaker[Session],
    action: str,
    kind: str,
    names: list[str] | None = None,
    commit: bool = True,
    where: dict[str, str] | None = None,
    **values: str,
) -> list[str]:
    req = pb.ModifyRequest(
        action=action, kind=kind, names=names or [], set=values, where=where or {}, commit=commit
    )
    with sessions() as session:
        changes = admin.modify(session, req)
        if commit:
            session.commit()
    return changes


def show(sessions: sessionmaker[Session], kind: str, **where: str) -> list[dict[str, str]]:
    with sessions() as session:
        return admin.show(session, pb.ShowRequest(kind=kind, where=where))


def build_tree(sessions: sessionmaker[Session]) -> None:
    modify(sessions, "add", "cluster", ["c1"])
    modify(sessions, "add", "account", ["physics"], fairshare="40")
    modify(sessions, "add", "account", ["research"], fairshare="60")
    modify(sessions, "add", "user", ["alice"], account="physics,research")
    modify(sessions, "add", "user", ["bob"], account="physics", maxjobs="1")


def test_association_tree_in_sacctmgr_order(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    rows = [(r["account"], r["user"], r["share"], r["maxjobs"]) for r in show(sessions, "association")]
    assert rows == [
        ("root", "", "1", ""),
        ("root", "root", "1", ""),
        ("physics", "", "40", ""),
        ("physics", "alice", "1", ""),
        ("physics", "bob", "1", "1"),
        ("research", "", "60", ""),
        ("research", "alice", "1", ""),
    ]


@pytest.mark.parametrize(
    "names,where,values,want",
    [
        (
            ["alice"],
            {},
            {"maxjobs": "5"},
            [
                " Modified user associations...",
                "  C = c1         A = research             U = alice    ",
                "  C = c1         A = physics              U = alice    ",
            ],
        ),
        (["alice"], {}, {"defaultaccount": "physics"}, [" Modified users...", "  alice"]),
        (["alice"], {}, {"adminlevel": "Operator"}, [" Modified users...", "  alice"]),
        (
            ["alice"],
            {"account": "physics"},
            {"defaultaccount": "physics", "maxjobs": "4"},
            [
                " Modified users...",
                "  alice",
                " Modified user associations...",
                "  C = c1         A = physics              U = alice    ",
            ],
        ),
        (
            ["alice", "bob"],
            {},
            {"maxjobs": "-1"},
            [
                " Modified user associations...",
                "  C = c1         A = research             U = alice    ",
                "  C = c1         A = physics              U = bob      ",
                "  C = c1         A = physics              U = alice    ",
            ],
        ),
        (["nosuch"], {}, {"maxjobs": "5"}, []),
    ],
    ids=["limit", "default account", "admin level", "both", "two users", "no such user"],
)
def test_modify_user_words_as_2205(
    sessions: sessionmaker[Session],
    names: list[str],
    where: dict[str, str],
    values: dict[str, str],
    want: list[str],
) -> None:
    """22.05 (captured 2026-12-01): a user's own properties under ` Modified users...`, association
    limits under ` Modified user associations...`, down the tree with the newest sibling first
    (research, added after physics here, comes first)."""
    build_tree(sessions)
    req = pb.ModifyRequest(action="modify", kind="user", names=names, where=where, set=values, commit=True)
    with sessions() as session:
        assert admin.modify(session, req) == want


def test_modify_account_words_as_2205(sessions: sessionmaker[Session]) -> None:
    """The account's own association names its parent; below it come the users' associations that
    take the limit from it (22.05, captured 2026-12-01: bob, with MaxJobs of his own, is not listed)."""
    build_tree(sessions)
    assert modify(sessions, "modify", "account", ["physics"], maxjobs="5") == [
        " Modified account associations...",
        "  C = c1         A = physics of root",
        "  C = c1         A = physics              U = alice    ",
    ]
    assert modify(sessions, "modify", "account", ["physics"], description="physics group") == [
        " Modified accounts...",
        "  physics",
    ]
    assert modify(sessions, "modify", "qos", ["normal"], maxwall="-1") == [" Modified qos...", "  normal"]


def _set_account(sessions: sessionmaker[Session], key: str, value: str) -> list[str]:
    """`modify account physics set KEY=VALUE`, committed: the answer's lines."""
    req = pb.ModifyRequest(action="modify", kind="account", names=["physics"], set={key: value}, commit=True)
    with sessions() as session:
        changes = admin.modify(session, req)
        session.commit()
    return changes


def _limits_of(sessions: sessionmaker[Session], column: str) -> dict[tuple[str, str], str]:
    return {(r["account"], r["user"]): r[column] for r in show(sessions, "association")}


@pytest.mark.parametrize(
    "key,value,column,shown",
    [
        ("maxjobs", "5", "maxjobs", "5"),
        ("maxsubmitjobs", "7", "maxsubmit", "7"),
        ("maxwall", "1:00:00", "maxwall", "01:00:00"),
        ("maxtresperjob", "cpu=4", "maxtres", "cpu=4"),
        ("maxtresmins", "cpu=100,mem=200", "maxtresmins", "cpu=100,mem=200M"),
    ],
    ids=["MaxJobs", "MaxSubmitJobs", "MaxWall", "MaxTRESPerJob", "MaxTRESMins"],
)
def test_account_limit_is_inherited_by_its_users(
    sessions: sessionmaker[Session], key: str, value: str, column: str, shown: str
) -> None:
    """22.05 (captured 2026-12-01): an account's per-user limit shows on, and holds for, every user
    association under it without its own value; -1 on the account takes it off them again."""
    modify(sessions, "add", "cluster", ["c1"])
    modify(sessions, "add", "account", ["physics"])
    modify(sessions, "add", "account", ["research"])
    modify(sessions, "add", "user", ["alice"], account="physics,research")
    modify(sessions, "add", "user", ["bob"], account="physics")
    assert _set_account(sessions, key, value) == [
        " Modified account associations...",
        "  C = c1         A = physics of root",
        "  C = c1         A = physics              U = bob      ",
        "  C = c1         A = physics              U = alice    ",
    ]
    got = _limits_of(sessions, column)
    assert (got[("physics", "")], got[("physics", "alice")], got[("physics", "bob")]) == (shown,) * 3
    assert got[("research", "alice")] == got[("research", "")] == ""
    with sessions() as session:
        sent = {(a.account, a.user): a for a in admin.limits(session, "c1", 0).associations}
    assert admin.assoc_fields(sent[("physics", "bob")])[column] == shown
    unset = {"maxtresperjob": "cpu=-1", "maxtresmins": "cpu=-1,mem=-1"}.get(key, "-1")
    assert len(_set_account(sessions, key, unset)) == 4
    assert set(_limits_of(sessions, column).values()) == {""}


def test_tres_limits_change_item_by_item_and_grp_ones_stay_the_accounts(
    sessions: sessionmaker[Session],
) -> None:
    """22.05 (scenarios 247, 248): `GrpTRES=cpu=8,mem=2048` on top of gres/gpu=2 keeps the GPUs and shows
    the memory in its largest exact unit; `cpu=-1` drops cpu alone; TRES are listed by name; Grp limits
    stay on the account (its users show none), while a user's own MaxTRESMins item wins over the
    account's, the others inherited."""
    build_tree(sessions)
    modify(sessions, "modify", "account", ["physics"], grptres="gres/gpu=2")
    modify(sessions, "modify", "account", ["physics"], grptres="cpu=8,mem=2048", grpjobs="3")
    got = _limits_of(sessions, "grptres")
    assert (got[("physics", "")], got[("physics", "alice")]) == ("cpu=8,gres/gpu=2,mem=2G", "")
    assert _limits_of(sessions, "grpjobs")[("physics", "alice")] == ""
    modify(sessions, "modify", "account", ["physics"], grptres="cpu=-1")
    assert _limits_of(sessions, "grptres")[("physics", "")] == "gres/gpu=2,mem=2G"
    for given, shown in (("1536", "1.50G"), ("64000", "62.50G")):  # measured on 22.05
        modify(sessions, "modify", "account", ["physics"], grptres=f"mem={given}")
        assert _limits_of(sessions, "grptres")[("physics", "")] == f"gres/gpu=2,mem={shown}"
    modify(sessions, "modify", "user", ["alice"], where={"account": "physics"}, maxtresmins="cpu=50")
    modify(sessions, "modify", "account", ["physics"], maxtresmins="cpu=100,mem=10G")
    got = _limits_of(sessions, "maxtresmins")
    assert (got[("physics", "")], got[("physics", "alice")]) == ("cpu=100,mem=10G", "cpu=50,mem=10G")
    with sessions() as session:
        sent = {(a.account, a.user): a for a in admin.limits(session, "c1", 0).associations}
    assert sent[("physics", "alice")].max_tres_mins_per_job == "cpu=50,mem=10G"


def test_own_limit_wins_and_minus_one_inherits_again(sessions: sessionmaker[Session]) -> None:
    """22.05 (captured 2026-12-01): a user's own MaxJobs stays through the account's changes (and the
    account's answer leaves that user out); -1 on the user makes it take the account's again; a user
    added later starts with the account's; MaxTRESPerJob is inherited TRES by TRES."""
    build_tree(sessions)  # bob: MaxJobs=1 of his own
    modify(sessions, "modify", "account", ["physics"], maxjobs="5", maxtresperjob="cpu=4")
    modify(sessions, "modify", "user", ["alice"], where={"account": "physics"}, maxtresperjob="gres/gpu=1")
    got = _limits_of(sessions, "maxjobs")
    assert (got[("physics", "alice")], got[("physics", "bob")]) == ("5", "1")
    assert _limits_of(sessions, "maxtres")[("physics", "alice")] == "cpu=4,gres/gpu=1"
    modify(sessions, "modify", "user", ["bob"], where={"account": "physics"}, maxjobs="-1")
    assert _limits_of(sessions, "maxjobs")[("physics", "bob")] == "5"
    modify(sessions, "add", "user", ["carol"], account="physics")
    assert _limits_of(sessions, "maxjobs")[("physics", "carol")] == "5"
    modify(sessions, "modify", "account", ["physics"], maxtresperjob="cpu=-1")
    assert _limits_of(sessions, "maxtres")[("physics", "alice")] == "gres/gpu=1"
    assert _limits_of(sessions, "maxtres")[("physics", "")] == ""


def test_sub_account_and_its_users_inherit(sessions: sessionmaker[Session]) -> None:
    """22.05 (captured 2026-12-01): the limit goes down the whole tree to the nearest association with
    a value of its own; the answer lists the sub-account's users (newest sibling first) but not the
    sub-account's own association."""
    build_tree(sessions)  # bob: MaxJobs=1 of his own under physics
    modify(sessions, "add", "account", ["optics"], parent="physics")
    modify(sessions, "add", "user", ["bob"], account="optics")
    assert modify(sessions, "modify", "account", ["physics"], maxjobs="5") == [
        " Modified account associations...",
        "  C = c1         A = physics of root",
        "  C = c1         A = optics               U = bob      ",
        "  C = c1         A = physics              U = alice    ",
    ]
    got = _limits_of(sessions, "maxjobs")
    assert (got[("optics", "")], got[("optics", "bob")], got[("physics", "bob")]) == ("5", "5", "1")
    assert modify(sessions, "modify", "account", ["optics"], maxjobs="3") == [
        " Modified account associations...",
        "  C = c1         A = optics of physics",
        "  C = c1         A = optics               U = bob      ",
    ]
    assert len(modify(sessions, "modify", "account", ["physics"], maxjobs="6")) == 3
    assert _limits_of(sessions, "maxjobs")[("optics", "bob")] == "3"


def test_modify_bumps_the_version_ctld_polls(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    with sessions() as session:
        before = admin.limits(session, "c1", 0)
        assert not admin.limits(session, "c1", before.version).changed
    modify(sessions, "modify", "user", ["alice"], where={"account": "physics"}, maxjobs="3")
    with sessions() as session:
        after = admin.limits(session, "c1", before.version)
    assert after.changed and after.version > before.version
    limits = {(a.account, a.user): a.max_jobs for a in after.associations}
    assert limits[("physics", "alice")] == 3 and limits[("research", "alice")] == -1
    assert {u.name: u.default_account for u in after.users}["alice"] == "physics"


def test_usage_limits_set_show_and_reach_ctld(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    modify(
        sessions,
        "modify",
        "account",
        ["physics"],
        grptresmins="cpu=6000,gres/gpu=600",
        grpwall="10:00:00",
        grptresrunmins="cpu=100",
        maxtresminsperjob="cpu=50",
    )
    modify(sessions, "add", "qos", ["short"], grptresmins="cpu=60", maxtresmins="gres/gpu=5", grpwall="30")
    row = next(r for r in show(sessions, "association") if (r["account"], r["user"]) == ("physics", ""))
    assert (row["grptresmins"], row["grpwall"], row["grptresrunmin"], row["maxtresmins"]) == (
        "cpu=6000,gres/gpu=600",
        "10:00:00",
        "cpu=100",
        "cpu=50",
    )
    qos = {r["name"]: r for r in show(sessions, "qos")}["short"]
    assert (qos["grptresmins"], qos["maxtresmins"], qos["grpwall"]) == ("cpu=60", "gres/gpu=5", "00:30:00")
    with sessions() as session:
        sent = admin.limits(session, "c1", 0)
    physics = next(a for a in sent.associations if (a.account, a.user) == ("physics", ""))
    assert (
        physics.grp_tres_mins,
        physics.grp_wall_min,
        physics.grp_tres_run_mins,
        physics.max_tres_mins_per_job,
    ) == ("cpu=6000,gres/gpu=600", 600, "cpu=100", "cpu=50")
    assert {q.name: q.grp_wall_min for q in sent.qos}["short"] == 30


def test_without_commit_nothing_changes(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    assert modify(sessions, "delete", "user", ["bob"], commit=False)
    assert any(r["user"] == "bob" for r in show(sessions, "association"))


def test_delete_user_and_account(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    modify(sessions, "delete", "user", ["alice"], where={"account": "research"})
    modify(sessions, "delete", "account", ["research"])
    rows = [(r["account"], r["user"]) for r in show(sessions, "association")]
    assert ("research", "") not in rows and ("physics", "alice") in rows
    assert [u["user"] for u in show(sessions, "user")] == ["alice", "bob", "root"]


REFUSALS = [
    ("duplicate cluster", ("add", "cluster", ["c1"]), {}, "already exists"),
    ("user without account", ("add", "user", ["carol"]), {}, "specify an account"),
    ("unknown account", ("add", "user", ["carol"]), {"account": "nope"}, "There is no account nope"),
    ("bad limit", ("modify", "user", ["bob"]), {"maxjobs": "many"}, "Invalid value for maxjobs"),
    (
        "memory cannot be borrowed",
        ("modify", "account", ["physics"]),
        {"maxborrowtres": "mem=4G"},
        "Invalid value for maxborrowtres",
    ),
    # TRES limits, in the words of 22.05's sacctmgr (checked on the real one)
    ("unknown TRES", ("modify", "account", ["physics"]), {"grptres": "foo=1"}, "no TRES known by type foo"),
    ("TRES without a count", ("modify", "user", ["bob"]), {"maxtres": "cpu"}, "no TRES id found for cpu"),
    (
        "TRES count not a number",
        ("modify", "account", ["physics"]),
        {"grptresmins": "cpu=abc"},
        r"Invalid unit type 'a'\. Possible options are 'KMGTP'",
    ),
]


@pytest.mark.parametrize("call,values,message", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusals(
    sessions: sessionmaker[Session], call: tuple[str, str, list[str]], values: dict[str, str], message: str
) -> None:
    build_tree(sessions)
    with pytest.raises(admin.AdminError, match=message):
        modify(sessions, *call, **values)


def test_user_withassoc_rows_by_account_name(sessions: sessionmaker[Session]) -> None:
    # 22.05 (164_sacctmgr_user_withassoc): a user's associations by account name, not by when they were
    # added (alice's default account research was added first)
    build_tree(sessions)
    modify(sessions, "add", "account", ["aardvark"])
    modify(sessions, "add", "user", ["alice"], account="aardvark")
    with sessions() as session:
        rows = admin.show(session, pb.ShowRequest(kind="user", with_assoc=True))
    assert [(r["user"], r["account"]) for r in rows if r["user"] != "root"] == [
        ("alice", "aardvark"),
        ("alice", "physics"),
        ("alice", "research"),
        ("bob", "physics"),
    ]


def test_qos_descr_column(sessions: sessionmaker[Session]) -> None:
    modify(sessions, "add", "qos", ["high"], description="urgent work")
    assert {r["name"]: r["descr"] for r in show(sessions, "qos")}["high"] == "urgent work"


def test_qos_add_modify_show(sessions: sessionmaker[Session]) -> None:
    modify(sessions, "add", "qos", ["high"], priority="10", maxwall="1:00:00")
    modify(sessions, "modify", "qos", ["high"], maxjobsperuser="2")
    rows = {r["name"]: r for r in show(sessions, "qos")}
    assert set(rows) == {"high", "normal"}
    assert (rows["high"]["priority"], rows["high"]["maxwall"], rows["high"]["maxjobspu"]) == (
        "10",
        "01:00:00",
        "2",
    )


def test_purge_forgets_old_finished_jobs(sessions: sessionmaker[Session]) -> None:
    send(sessions, [job(1, end_time=100), step(1), job(2, end_time=5000), job(3, "RUNNING")])
    with sessions.begin() as session:
        assert purge_jobs(session, 1000) == 1
    assert [j.job.job_id for j in find(sessions)] == [2, 3]


def test_one_batch_with_a_jobs_whole_life_and_its_steps(sessions: sessionmaker[Session]) -> None:
    # ctld sends a job's states and steps together when dbd was away: the last record of each wins,
    # usage counts once, and a step finds the job sent earlier in the same batch.
    records = []
    for i in range(1, 301):
        records += [
            job(i, "PENDING", start_time=0),
            job(i, "RUNNING", end_time=0),
            job(i, start_time=3600, end_time=3660),
            step(i, state="RUNNING"),
            step(i),
        ]
    assert send(sessions, records) == (1500, 1500)
    found = find(sessions)
    assert len(found) == 300
    assert {(j.job.state, tuple((s.step_id, s.state) for s in j.steps)) for j in found} == {
        ("COMPLETED", ((-4, "COMPLETED"),))
    }
    with sessions() as session:
        rows = queries.report(session, pb.ReportRequest(start=0, end=7200, cluster="c1")).rows
    assert [r.fields["cpu_seconds"] for r in rows] == [str(300 * 60 * 2)]


def test_batches_larger_than_one_statement_see_every_job_they_hold(sessions: sessionmaker[Session]) -> None:
    # 700 jobs: more than one statement's IN list (ROWS_PER_STATEMENT), the rest padded to a compiled
    # shape. A job finished in the first batch is known as finished in the second, whatever its chunk:
    # usage counts once; every job's step finds its job.
    jobs = range(1, 701)
    assert send(sessions, [job(i, start_time=3600, end_time=3660) for i in jobs]) == (700, 700)
    again = [job(i, start_time=3600, end_time=3660, reason="again") for i in jobs] + [step(i) for i in jobs]
    assert send(sessions, again, start=701) == (2100, 1400)
    found = find(sessions)
    assert len(found) == 700 and {len(j.steps) for j in found} == {1}
    with sessions() as session:
        rows = queries.report(session, pb.ReportRequest(start=0, end=7200, cluster="c1")).rows
    assert [r.fields["cpu_seconds"] for r in rows] == [str(700 * 60 * 2)]


def test_report_says_since_when_the_cluster_is_known(sessions: sessionmaker[Session]) -> None:
    # sreport prints no row for a period before it (22.05 has no rolled-up hours for it)
    with sessions() as session:
        assert queries.report(session, pb.ReportRequest(start=0, end=7200, cluster="c1")).cluster_since == 0
    send(sessions, [job(1, start_time=3600, end_time=3700)])  # usage from the 3600 hour, registered now
    with sessions() as session:
        assert (
            queries.report(session, pb.ReportRequest(start=0, end=7200, cluster="c1")).cluster_since == 3600
        )
    before = int(time.time())
    with sessions.begin() as session:
        ingest.apply_records(session, pb.SendRecordsRequest(cluster="c2", epoch="e1", cluster_cpus=4))
    with sessions() as session:
        assert (
            queries.report(session, pb.ReportRequest(start=0, end=7200, cluster="c2")).cluster_since >= before
        )


def test_usage_accumulates_across_batches(sessions: sessionmaker[Session]) -> None:
    send(sessions, [job(1, start_time=3600, end_time=3700)])
    send(sessions, [job(2, start_time=3650, end_time=3700)], start=2)
    with sessions() as session:
        rows = queries.report(session, pb.ReportRequest(start=0, end=7200, cluster="c1")).rows
    assert [r.fields["cpu_seconds"] for r in rows] == [str((100 + 50) * 2)]


def test_a_step_of_an_unknown_job_is_dropped_but_counted(sessions: sessionmaker[Session]) -> None:
    assert send(sessions, [step(99), job(1)]) == (2, 2)
    assert [(j.job.job_id, len(j.steps)) for j in find(sessions)] == [(1, 0)]


def test_only_the_asked_fields_come_back(sessions: sessionmaker[Session]) -> None:
    send(sessions, [job(1, name="train", nodelist="node1"), step(1, num_tasks=3)])
    (found,) = find(sessions, fields=["name", "num_tasks"])
    assert (found.job.job_id, found.job.submit_time, found.job.name, found.job.nodelist) == (
        1,
        1000,
        "train",
        "",
    )
    assert [(s.step_id, s.num_tasks, s.nodelist) for s in found.steps] == [(-4, 3, "")]
    (full,) = find(sessions)
    assert (full.job.nodelist, full.steps[0].nodelist) == ("node1", "node1")


def test_utilization_counts_down_nodes_and_waiting_jobs(sessions: sessionmaker[Session]) -> None:
    def event(state: str, start: int) -> pb.AcctRecord:
        return pb.AcctRecord(
            node_event=pb.NodeEventRecord(node="n1", state=state, start_time=start, cpus=4, gpus=2)
        )

    send(
        sessions,
        [
            event("DOWN", 3600),
            event("", 3900),  # down 300 s of the period
            event("DRAIN", 7000),  # still drained at the end: 200 s
            job(
                1,
                submit_time=3000,
                eligible_time=3000,
                start_time=4000,
                end_time=4100,
                tres_req="cpu=2,gres/gpu=1",
                req_cpus=2,
            ),  # waited 400 s inside the period
            job(
                2, "PENDING", submit_time=7100, eligible_time=7100, start_time=0, req_cpus=1
            ),  # still waiting: 100 s
        ],
    )
    with sessions() as session:
        resp = queries.report(
            session, pb.ReportRequest(report="cluster_utilization", start=3600, end=7200, cluster="c1")
        )
    assert dict(resp.totals) == {
        "down_cpu": 500 * 4,
        "down_gpu": 500 * 2,
        "plnd_down_cpu": 0,
        "plnd_down_gpu": 0,
        "planned_cpu": 400 * 2 + 100 * 1,
        "planned_gpu": 400 * 1,
    }


QOS_LIST_CHANGES = [
    ("add one", {"qos+": "high"}, "normal,high"),
    ("add known and new", {"qos+": "normal,low"}, "normal,low"),
    ("remove", {"qos-": "normal"}, ""),
    ("set replaces", {"qos": "high,low"}, "high,low"),
]


@pytest.mark.parametrize(
    "values,expected", [c[1:] for c in QOS_LIST_CHANGES], ids=[c[0] for c in QOS_LIST_CHANGES]
)
def test_modify_qos_list_item_by_item(
    sessions: sessionmaker[Session], values: dict[str, str], expected: str
) -> None:
    build_tree(sessions)
    modify(sessions, "add", "qos", ["high"])
    modify(sessions, "add", "qos", ["low"])
    modify(sessions, "modify", "user", ["bob"], **values)
    rows = {(r["account"], r["user"]): r["qos"] for r in show(sessions, "association")}
    assert rows[("physics", "bob")] == expected
    assert rows[("physics", "alice")] == "normal"


def _assoc_columns(engine: Engine) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns("associations")}


def test_borrow_migration_adds_and_drops_its_column(engine: Engine) -> None:
    schema.upgrade(engine, "0003")
    assert "max_borrow_tres" not in _assoc_columns(engine)
    schema.upgrade(engine)
    assert "max_borrow_tres" in _assoc_columns(engine)
    schema.downgrade(engine, "0003")
    assert "max_borrow_tres" not in _assoc_columns(engine) and "grp_tres" in _assoc_columns(engine)


def test_max_borrow_tres_add_modify_show_and_reaches_ctld(sessions: sessionmaker[Session]) -> None:
    build_tree(sessions)
    modify(
        sessions,
        "add",
        "account",
        ["chem"],
        parent="research",
        grptres="gres/gpu=4",
        maxborrowtres="gres/gpu=2",
    )
    modify(sessions, "modify", "account", ["physics"], grptres="gres/gpu=4", MaxBorrowTRES="gres/gpu=4,cpu=8")
    rows = {(r["account"], r["user"]): r for r in show(sessions, "association")}
    assert rows[("chem", "")]["maxborrowtres"] == "gres/gpu=2"
    assert rows[("physics", "")]["maxborrowtres"] == "gres/gpu=4,cpu=8"
    assert rows[("physics", "alice")]["maxborrowtres"] == ""  # users keep their own (none)
    with sessions() as session:
        sent = {(a.account, a.user): a.max_borrow_tres for a in admin.limits(session, "c1", 0).associations}
    assert sent[("physics", "")] == "gres/gpu=4,cpu=8" and sent[("research", "")] == ""
    modify(sessions, "modify", "account", ["physics"], maxborrowtres="-1")  # -1 clears it: no borrowing
    assert {r["account"]: r["maxborrowtres"] for r in show(sessions, "association") if not r["user"]}[
        "physics"
    ] == ""


def test_qos_preemption_settings_round_trip(sessions: sessionmaker[Session]) -> None:
    modify(sessions, "add", "qos", ["low"])
    modify(sessions, "add", "qos", ["high"], preempt="low", preemptmode="Requeue", gracetime="10")
    modify(sessions, "modify", "qos", ["low"], preemptmode="off")
    rows = {r["name"]: r for r in show(sessions, "qos")}
    assert [rows["high"][k] for k in ("preempt", "preemptmode", "gracetime")] == [
        "low",
        "requeue",
        "00:00:10",
    ]
    assert rows["low"]["preemptmode"] == "cluster"  # OFF on a QOS means the cluster's PreemptMode, as Slurm


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"preemptmode": "sometimes"}, "Bad Preempt Mode given: PreemptMode=sometimes"),
        ({"preempt": "nosuch"}, "You gave a bad qos 'nosuch'. Valid QOS's are"),
    ],
    ids=["bad mode", "unknown qos"],
)
def test_qos_preemption_settings_are_checked(
    sessions: sessionmaker[Session], values: dict[str, str], message: str
) -> None:
    with pytest.raises(admin.AdminError, match=message):
        modify(sessions, "add", "qos", ["high"], **values)


def _qos_columns(engine: Engine) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns("qos")}


def test_max_tres_per_user_migration_adds_and_drops_its_column(engine: Engine) -> None:
    schema.upgrade(engine, "0006")
    assert "max_tres_per_user" not in _qos_columns(engine)
    schema.upgrade(engine)
    assert "max_tres_per_user" in _qos_columns(engine)
    schema.downgrade(engine, "0006")
    assert "max_tres_per_user" not in _qos_columns(engine) and "grp_tres" in _qos_columns(engine)


def test_qos_group_and_per_user_tres_set_show_and_reach_ctld(sessions: sessionmaker[Session]) -> None:
    modify(
        sessions,
        "add",
        "qos",
        ["gpu"],
        grptres="cpu=16,gres/gpu=2",
        grpjobs="3",
        maxtresperuser="cpu=4,gres/gpu=2",
    )
    modify(sessions, "add", "qos", ["short"], maxtrespu="gres/gpu=1")
    # 22.05 (measured): a TRES limit changes item by item, and -1 drops one
    modify(sessions, "modify", "qos", ["gpu"], maxtrespu="cpu=8")
    rows = {r["name"]: r for r in show(sessions, "qos")}
    assert rows["gpu"]["maxtrespu"] == "cpu=8,gres/gpu=2"
    modify(sessions, "modify", "qos", ["gpu"], maxtrespu="gres/gpu=-1")
    rows = {r["name"]: r for r in show(sessions, "qos")}
    assert (rows["gpu"]["grptres"], rows["gpu"]["grpjobs"], rows["gpu"]["maxtrespu"]) == (
        "cpu=16,gres/gpu=2",
        "3",
        "cpu=8",
    )
    assert (rows["short"]["maxtrespu"], rows["normal"]["maxtrespu"]) == ("gres/gpu=1", "")
    with sessions() as session:
        sent = {q.name: q for q in admin.limits(session, "c1", 0).qos}
    assert (sent["gpu"].grp_tres, sent["gpu"].grp_jobs, sent["gpu"].max_tres_per_user) == (
        "cpu=16,gres/gpu=2",
        3,
        "cpu=8",
    )
    assert sent["short"].max_tres_per_user == "gres/gpu=1"


def test_delete_user_words_as_2205(sessions: sessionmaker[Session]) -> None:
    """22.05 (captured 2026-12-01): ` Deleting users...` over the names when users go whole,
    ` Deleting user associations...` over the associations when accounts are named."""
    build_tree(sessions)
    modify(sessions, "add", "user", ["carol"], account="physics,research")
    assert modify(sessions, "delete", "user", ["carol"], where={"account": "physics"}) == [
        " Deleting user associations...",
        "  C = c1         A = physics    U = carol    ",
    ]
    modify(sessions, "add", "user", ["dave"], account="physics")
    assert modify(sessions, "delete", "user", ["carol", "dave"]) == [
        " Deleting users...",
        "  carol",
        "  dave",
    ]
    assert [u["user"] for u in show(sessions, "user")] == ["alice", "bob", "root"]
    assert modify(sessions, "delete", "user", ["nosuch"]) == []
