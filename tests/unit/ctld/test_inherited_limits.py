"""An account's MaxJobs holds for its users' jobs: dbd sends each user association the limit it
inherits (22.05: `sacctmgr modify account a set MaxJobs=1` shows MaxJobs=1 on a's users too), and
ctld, which counts MaxJobs on a job's own association, keeps the user's second job pending."""

from __future__ import annotations

from pathlib import Path

from dbd import admin
from dbd.db import open_database
from shoal.v1 import accounting_pb2 as pb
from tests.unit.ctld.harness import Harness, cluster, job


def _limits(
    tmp_path: Path, user_sets: dict[str, str] | None = None, **account_sets: str
) -> pb.GetLimitsResponse:
    """dbd's answer to ctld for cluster c1: account a (user root under it) with `account_sets`, and
    root's own association with `user_sets`."""
    sessions = open_database(f"sqlite:///{tmp_path / 'acct.sqlite'}")
    steps = [
        ("add", "cluster", ["c1"], {}),
        ("add", "account", ["a"], {}),
        ("add", "user", ["root"], {"account": "a"}),
        ("modify", "user", ["root"], {"defaultaccount": "a"}),
        ("modify", "account", ["a"], account_sets),
        ("modify", "user", ["root"], user_sets or {}),
    ]
    with sessions() as session:
        for action, kind, names, values in steps:
            if values or action == "add":
                admin.modify(session, pb.ModifyRequest(action=action, kind=kind, names=names, set=values))
        session.commit()
        out = admin.limits(session, "c1", 0)
    sessions.kw["bind"].dispose()
    return out


def _harness(tmp_path: Path) -> Harness:
    builder = (
        cluster()
        .nodes(2, cpus=4)
        .set(
            AccountingStorageType="accounting_storage/slurmdbd",
            AccountingStorageEnforce="associations,limits",
        )
    )
    return Harness.of(builder, tmp_path)


def test_an_accounts_max_jobs_keeps_its_users_second_job_pending(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    h.ctl.accounting.push(_limits(tmp_path, maxjobs="1"))
    first = h.submit(job().tasks(4).time(10))
    second = h.submit(job().tasks(4).time(10))
    h.schedule()
    assert (h.state(first), h.state(second), h.reason(second)) == ("RUNNING", "PENDING", "AssocMaxJobsLimit")


def test_without_the_accounts_limit_both_run(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    h.ctl.accounting.push(_limits(tmp_path))
    jobs = [h.submit(job().tasks(4).time(10)) for _ in range(2)]
    h.schedule()
    assert [h.state(j) for j in jobs] == ["RUNNING", "RUNNING"]


def test_an_accounts_max_wall_holds_for_a_user_without_one_of_its_own(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    h.ctl.accounting.push(_limits(tmp_path, maxwall="30"))
    long = h.submit(job().tasks(1).time(60))
    short = h.submit(job().tasks(1).time(20))
    h.schedule()
    assert (h.state(long), h.reason(long)) == ("PENDING", "AssocMaxWallDurationPerJobLimit")
    assert h.state(short) == "RUNNING"


def test_a_users_own_max_wall_and_max_tres_outrank_its_accounts(tmp_path: Path) -> None:
    """Max* limits are the job's own association's (22.05 checks them there: dbd has pushed the
    account's values down to users without their own), so a user's larger MaxWall and MaxTRESPerJob
    let a job run that its account's smaller ones would hold."""
    h = _harness(tmp_path)
    h.ctl.accounting.push(
        _limits(tmp_path, {"maxwall": "120", "maxtresperjob": "cpu=4"}, maxwall="30", maxtresperjob="cpu=1")
    )
    wide = h.submit(job().tasks(4).time(60))
    h.schedule()
    assert h.state(wide) == "RUNNING"
