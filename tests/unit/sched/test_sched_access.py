"""Partition access (AllowAccounts, DenyAccounts, AllowGroups, AllowQos, DenyQos, RootOnly) and ExclusiveUser."""

from __future__ import annotations

import dataclasses

import pytest

from ctld.sched.cycle import run_cycle
from ctld.sched.model import UNLIMITED, JobRequest, Partition
from ctld.sched.submit import check_submission
from tests.unit.sched.builders import cluster, job, node, partition, snapshot

NODES = cluster(2, gpus=0)
NAMES = tuple(n.name for n in NODES)


def submitted(part: Partition, request: JobRequest) -> str | None:
    refusal = check_submission(request, snapshot(NODES, partitions=[part]))
    return refusal.message if refusal else None


ACCOUNT = "Invalid account or account/partition combination specified"
GROUP = "User's group not permitted to use this partition"
QOS = "Invalid qos specification"


@pytest.mark.parametrize(
    ("limits", "changes", "want"),
    [
        ({"allow_accounts": frozenset({"physics"})}, {"account": "physics"}, None),
        ({"allow_accounts": frozenset({"physics"})}, {"account": "Physics"}, None),
        ({"allow_accounts": frozenset({"physics"})}, {"account": "bio"}, ACCOUNT),
        ({"allow_accounts": frozenset({"physics"})}, {"account": ""}, ACCOUNT),
        ({"deny_accounts": frozenset({"bio"})}, {"account": "bio"}, ACCOUNT),
        ({"deny_accounts": frozenset({"bio"})}, {"account": "physics"}, None),
        ({"allow_uids": frozenset({0, 1001})}, {"user_id": 1001}, None),
        ({"allow_uids": frozenset({0, 1001})}, {"user_id": 1000}, GROUP),
        ({"allow_qos": frozenset({"high"})}, {"qos": "normal"}, QOS),
        ({"allow_qos": frozenset({"high"})}, {"qos": "high"}, None),
        ({"deny_qos": frozenset({"low"})}, {"qos": "low"}, QOS),
        ({"root_only": True}, {"user_id": 1000}, "Access/permission denied"),
        ({"root_only": True}, {"user_id": 0}, None),
    ],
    ids=[
        "allowed-account", "account-any-case", "other-account", "no-account", "denied-account",
        "not-denied-account", "group-member", "not-a-member", "qos-not-allowed", "allowed-qos",
        "denied-qos", "root-only-user", "root-only-root",
    ],
)  # fmt: skip
def test_submit_access(limits: dict[str, object], changes: dict[str, object], want: str | None) -> None:
    part = dataclasses.replace(partition("p", NAMES, max_time_min=UNLIMITED), **limits)  # type: ignore[arg-type]
    request = dataclasses.replace(job(1).partition("p").obj(), **changes)  # type: ignore[arg-type]
    assert submitted(part, request) == want


def test_a_job_naming_several_partitions_runs_only_where_admitted() -> None:
    """-p closed,open: accepted, and started in `open` even though `closed` comes first."""
    closed = partition("closed", NAMES, max_time_min=UNLIMITED, allow_accounts=frozenset({"physics"}))
    opened = partition("open", NAMES, max_time_min=UNLIMITED)
    request = job(1).partition("closed", "open").obj()
    snap = snapshot(NODES, pending=[request], partitions=[closed, opened])
    assert check_submission(request, snap) is None
    assert [s.partition for s in run_cycle(snap, 0).starts] == ["open"]


def _exclusive_user_snapshot(*pending: JobRequest, user_exclusive_busy: bool) -> list[int]:
    """node1 has a job of user 1000 on 4 of its 16 CPUs; node2 is busy; who else may join node1?"""
    n1 = node("node1").used(cpus=range(4)).obj()
    n1 = dataclasses.replace(
        n1, usage=dataclasses.replace(n1.usage, users=frozenset({1000}), user_exclusive=user_exclusive_busy)
    )
    n2 = node("node2").used(cpus=range(16)).obj()
    parts = [
        partition("batch", NAMES, max_time_min=UNLIMITED),
        partition("solo", NAMES, max_time_min=UNLIMITED, exclusive_user=True),
    ]
    snap = snapshot([n1, n2], pending=pending, partitions=parts)
    return [s.job_id for s in run_cycle(snap, 0).starts]


@pytest.mark.parametrize(
    ("user_exclusive_busy", "part", "uid", "starts"),
    [
        (True, "batch", 1001, False),  # node1 is held by an ExclusiveUser job of user 1000
        (True, "batch", 1000, True),  # ... whose own jobs may still join
        (False, "solo", 1001, False),  # an ExclusiveUser job does not join another user's node
        (False, "solo", 1000, True),
        (False, "batch", 1001, True),  # without ExclusiveUser, nodes are shared
    ],
    ids=[
        "other-user-kept-off",
        "same-user-joins",
        "exclusive-job-avoids-others",
        "exclusive-job-own-node",
        "shared",
    ],
)
def test_exclusive_user(user_exclusive_busy: bool, part: str, uid: int, starts: bool) -> None:
    request = job(1).tasks(4).partition(part).user(uid).obj()
    assert _exclusive_user_snapshot(request, user_exclusive_busy=user_exclusive_busy) == (
        [1] if starts else []
    )


def test_exclusive_user_within_one_cycle() -> None:
    """Two users' jobs in one cycle: the ExclusiveUser job's node is not shared with the second."""
    parts = [partition("solo", NAMES[:1], max_time_min=UNLIMITED, exclusive_user=True)]
    first = job(1).tasks(4).partition("solo").user(1000).obj()
    second = job(2).tasks(4).partition("solo").user(1001).obj()
    third = job(3).tasks(4).partition("solo").user(1000).obj()
    result = run_cycle(snapshot(NODES, pending=[first, second, third], partitions=parts), 0)
    assert [s.job_id for s in result.starts] == [1]
    assert result.reasons == {2: "Resources", 3: "Priority"}
