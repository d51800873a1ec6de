"""sacctmgr AdminLevel in the controller, and PrivateData=jobs (the real controller, no daemons).

What each level may do is 22.05's, measured on the real one: an Operator holds, releases and cancels
another user's jobs and sees them under PrivateData=jobs, but may not change a node; an Administrator
may; a plain user gets slurmctld's "Invalid user id". AdminLevel reaches ctld in dbd's push of the
association set (the users with their levels), so the level is taken the moment sacctmgr changes it.
"""

from __future__ import annotations

import pwd
from pathlib import Path

import pytest

from ctld.controller import Caller
from ctld.errors import SlurmError
from shoal.v1 import accounting_pb2, common_pb2, controller_pb2
from tests.unit.ctld.harness import Harness, cluster, job

OWNER = Caller(uid=pwd.getpwnam("daemon").pw_uid, gid=1, host="login")  # owns the job
OTHER = Caller(uid=pwd.getpwnam("bin").pw_uid, gid=2, host="login")  # the user given a level
_version = [0]


def _harness(tmp_path: Path, private: bool = True) -> Harness:
    keys = {"AccountingStorageType": "accounting_storage/slurmdbd"}
    if private:
        keys["PrivateData"] = "jobs"
    return Harness.of(cluster().nodes(1).set(**keys), tmp_path)


def _level(h: Harness, level: str) -> None:
    """dbd's push after `sacctmgr modify user bin set AdminLevel=level`."""
    _version[0] += 1
    users = [accounting_pb2.AcctUser(name="bin", default_account="lab", admin_level=level)]
    h.ctl.accounting.push(accounting_pb2.GetLimitsResponse(version=_version[0], changed=True, users=users))


def _listed(h: Harness, caller: Caller) -> list[int]:
    return [j.job_id for j in h.ctl.get_jobs(controller_pb2.GetJobsRequest(), caller).jobs]


def _drain(h: Harness, caller: Caller) -> None:
    fields = [common_pb2.KeyValue(key="State", value="DRAIN"), common_pb2.KeyValue(key="Reason", value="x")]
    h.ctl.update_node(controller_pb2.UpdateNodeRequest(nodes="n1", fields=fields), caller)


@pytest.mark.parametrize(
    ("level", "sees", "holds", "drains"),
    [
        ("None", False, False, False),
        ("Operator", True, True, False),
        ("Administrator", True, True, True),
    ],
    ids=["user", "operator", "administrator"],
)
def test_what_each_admin_level_may_do(
    tmp_path: Path, level: str, sees: bool, holds: bool, drains: bool
) -> None:
    h = _harness(tmp_path)
    mine = h.submit(job().time(5).held(), caller=OWNER)
    _level(h, level)
    assert _listed(h, OTHER) == ([mine] if sees else [])
    assert _listed(h, OWNER) == [mine]  # PrivateData leaves a user their own jobs
    errors = h.update(mine, "release", caller=OTHER)
    assert errors == ([] if holds else ["Invalid user id"])
    if drains:
        _drain(h, OTHER)
        assert "drain" in h.node_state("n1").lower()
    else:
        with pytest.raises(SlurmError, match="Invalid user id"):
            _drain(h, OTHER)


def test_a_lowered_level_takes_effect_at_the_next_push(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    mine = h.submit(job().time(5).held(), caller=OWNER)
    _level(h, "Operator")
    assert h.update(mine, "release", caller=OTHER) == []
    _level(h, "None")
    assert h.update(mine, "hold", caller=OTHER) == ["Invalid user id"]
    assert not h.ctl.is_slurm_user(OTHER)  # no level makes a user one of the daemons


def test_without_private_data_every_user_sees_every_job(tmp_path: Path) -> None:
    h = _harness(tmp_path, private=False)
    mine = h.submit(job().time(5).held(), caller=OWNER)
    assert _listed(h, OTHER) == [mine]


def test_sprio_lists_only_the_callers_jobs_under_private_data(tmp_path: Path) -> None:
    h = Harness.of(
        cluster()
        .nodes(1)
        .set(
            PrivateData="jobs",
            PriorityType="priority/multifactor",
            AccountingStorageType="accounting_storage/slurmdbd",
        ),
        tmp_path,
    )
    h.submit(job().time(5), caller=OWNER)  # pending: no scheduling pass has run

    def rows(caller: Caller) -> int:
        return len(h.ctl.get_priorities(controller_pb2.GetPrioritiesRequest(), caller).jobs)

    assert (rows(OWNER), rows(OTHER)) == (1, 0)
    _level(h, "Operator")
    assert rows(OTHER) == 1
