"""Association/QOS limits in the scheduling cycle and at submit, with Slurm's reasons."""

from __future__ import annotations

import dataclasses

import pytest

from ctld.sched.assoc_limits import SUBMIT_REFUSED, submit_refusal
from ctld.sched.cycle import run_cycle
from ctld.sched.model import (
    UNLIMITED,
    AccountingLimits,
    AssocLimits,
    Config,
    NodeAllocation,
    NodeUsage,
    QosLimits,
    UsageLimits,
    UsedMinutes,
)
from tests.unit.sched.builders import cluster, job, running, snapshot

ACCOUNT = AssocLimits(id=1, account="physics")
USER = AssocLimits(id=2, parent_id=1, account="physics", user="alice")


def limits(
    account: dict[str, int] | None = None,
    user: dict[str, int] | None = None,
    qos: dict[str, int] | None = None,
) -> AccountingLimits:
    return AccountingLimits(
        assocs=(dataclasses.replace(ACCOUNT, **(account or {})), dataclasses.replace(USER, **(user or {}))),
        qos=(dataclasses.replace(QosLimits(name="normal"), **(qos or {})),),
        enforce_qos=True,
    )


def mine(job_id: int, cpus: int = 1, gpus: int = 0, minutes: int = 10):  # type: ignore[no-untyped-def]
    builder = job(job_id).tasks(cpus).time(minutes)
    if gpus:
        builder = builder.gpus(gpus)
    return dataclasses.replace(builder.obj(), assoc_id=2, qos="normal")


def bobs(job_id: int, cpus: int = 1, gpus: int = 0):  # type: ignore[no-untyped-def]
    """A job of another user (uid 1001) in the same association and QOS."""
    return dataclasses.replace(mine(job_id, cpus, gpus), user_id=1001)


CASES = [
    ("max jobs: second waits", limits(user={"max_jobs": 1}), [mine(1), mine(2)], {2: "AssocMaxJobsLimit"}),
    (
        "grp jobs on the account",
        limits(account={"grp_jobs": 1}),
        [mine(1), mine(2)],
        {2: "AssocGrpJobsLimit"},
    ),
    (
        "grp cpus",
        limits(account={"grp_cpus": 4}),
        [mine(1, cpus=3), mine(2, cpus=2)],
        {2: "AssocGrpCpuLimit"},
    ),
    ("grp gpus", limits(account={"grp_gpus": 2}), [mine(1, gpus=2), mine(2, gpus=1)], {2: "AssocGrpGRES"}),
    (
        "qos max wall",
        limits(qos={"max_wall_min": 5}),
        [mine(1, minutes=10)],
        {1: "QOSMaxWallDurationPerJobLimit"},
    ),
    (
        "assoc max wall",
        limits(user={"max_wall_min": 5}),
        [mine(1, minutes=10)],
        {1: "AssocMaxWallDurationPerJobLimit"},
    ),
    (
        "qos max jobs per user",
        limits(qos={"max_jobs_per_user": 1}),
        [mine(1), mine(2)],
        {2: "QOSMaxJobsPerUserLimit"},
    ),
    ("within limits", limits(user={"max_jobs": 2}, account={"grp_cpus": 8}), [mine(1), mine(2)], {}),
    ("qos grp jobs", limits(qos={"grp_jobs": 1}), [mine(1), bobs(2)], {2: "QOSGrpJobsLimit"}),
    (
        "qos grp cpus: all users' jobs",
        limits(qos={"grp_cpus": 4}),
        [mine(1, cpus=3), bobs(2, cpus=2)],
        {2: "QOSGrpCpuLimit"},
    ),
    (
        "qos grp gpus",
        limits(qos={"grp_gpus": 2}),
        [mine(1, gpus=2), bobs(2, gpus=1), bobs(3)],
        {2: "QOSGrpGRES"},
    ),
    ("qos grp gpus fit exactly", limits(qos={"grp_gpus": 3}), [mine(1, gpus=2), bobs(2, gpus=1)], {}),
    (
        "qos max cpus per user: another user's jobs do not count",
        limits(qos={"max_cpus_per_user": 4}),
        [mine(1, cpus=3), bobs(2, cpus=4), mine(3, cpus=2)],
        {3: "QOSMaxCpuPerUserLimit"},
    ),
    (
        "qos max gpus per user",
        limits(qos={"max_gpus_per_user": 2}),
        [mine(1, gpus=2), bobs(2, gpus=2), mine(3, gpus=1), mine(4)],
        {3: "QOSMaxGRESPerUser"},
    ),
]


@pytest.mark.parametrize("acct,pending,reasons", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cycle_reasons(acct: AccountingLimits, pending: list, reasons: dict[int, str]) -> None:  # type: ignore[type-arg]
    snap = dataclasses.replace(snapshot(cluster(2), pending), accounting=acct)
    result = run_cycle(snap, now=100)
    assert result.reasons == reasons
    assert {s.job_id for s in result.starts} == {j.job_id for j in pending} - set(reasons)


def test_running_jobs_count_against_the_limit() -> None:
    run = running(9, ["node1"], 0, assoc_id=2, allocation=(NodeAllocation("node1", (0, 1), 100),))
    snap = dataclasses.replace(
        snapshot(cluster(2), [mine(1)], running=[run]), accounting=limits(account={"grp_cpus": 2})
    )
    assert run_cycle(snap, now=100).reasons == {1: "AssocGrpCpuLimit"}


QOS_RUNNING = [
    ("grp gpus", {"grp_gpus": 2}, 1001, "QOSGrpGRES"),
    ("grp jobs", {"grp_jobs": 1}, 1001, "QOSGrpJobsLimit"),
    ("max gpus per user: the user's own", {"max_gpus_per_user": 2}, 1000, "QOSMaxGRESPerUser"),
    ("max gpus per user: another user's", {"max_gpus_per_user": 2}, 1001, None),
    ("max jobs per user", {"max_jobs_per_user": 1}, 1000, "QOSMaxJobsPerUserLimit"),
]


@pytest.mark.parametrize("qos,uid,reason", [c[1:] for c in QOS_RUNNING], ids=[c[0] for c in QOS_RUNNING])
def test_running_jobs_count_against_the_qos(qos: dict[str, int], uid: int, reason: str | None) -> None:
    """A running 2-GPU job of user `uid` in the QOS; alice's 1-GPU job waits, or starts."""
    run = running(
        9,
        ["node1"],
        0,
        assoc_id=2,
        qos="normal",
        user_id=uid,
        allocation=(NodeAllocation("node1", (0,), 100, (0, 1)),),
    )
    snap = dataclasses.replace(
        snapshot(cluster(2), [mine(1, gpus=1)], running=[run]), accounting=limits(qos=qos)
    )
    assert run_cycle(snap, now=100).reasons == ({1: reason} if reason else {})


def test_a_qos_limit_is_not_enforced_without_qos_enforcement() -> None:
    acct = dataclasses.replace(limits(qos={"grp_gpus": 2}), enforce_qos=False)
    snap = dataclasses.replace(snapshot(cluster(2), [mine(1, gpus=2), mine(2, gpus=2)]), accounting=acct)
    assert run_cycle(snap, now=100).reasons == {}


def test_backfill_counts_the_qos_limits_of_the_jobs_it_starts() -> None:
    """As below, with GrpTRES=gres/gpu=2 on the QOS: backfill starts one of the two 2-GPU jobs."""
    nodes = list(cluster(2))
    nodes[0] = dataclasses.replace(
        nodes[0], usage=NodeUsage(frozenset(range(16)), 1000, frozenset(range(8)), False, 1)
    )
    busy = running(
        9, ["node1"], 5000, allocation=(NodeAllocation("node1", tuple(range(16)), 1000, tuple(range(8))),)
    )
    big = job(1).nodes(2).gpus_per_node(8).time(10).obj()
    config = Config(def_mem_per_cpu_mb=1000, scheduler="sched/backfill")
    snap = dataclasses.replace(
        snapshot(nodes, [big, mine(2, gpus=2, minutes=1), bobs(3, gpus=2)], running=[busy], config=config),
        accounting=limits(qos={"grp_gpus": 2}),
    )
    result = run_cycle(snap, now=100)
    assert [s.job_id for s in result.starts] == [2]
    assert result.reasons == {1: "Resources", 3: "QOSGrpGRES"}


def test_backfill_counts_the_limits_of_the_jobs_it_starts() -> None:
    """node1 is busy until t=5000 and a 2-node job holds the reservation; two short 2-GPU jobs of an
    association with GrpTRES=gres/gpu=2 could both backfill on node2, but only one may run."""
    nodes = list(cluster(2))
    nodes[0] = dataclasses.replace(
        nodes[0], usage=NodeUsage(frozenset(range(16)), 1000, frozenset(range(8)), False, 1)
    )
    busy = running(
        9, ["node1"], 5000, allocation=(NodeAllocation("node1", tuple(range(16)), 1000, tuple(range(8))),)
    )
    big = job(1).nodes(2).gpus_per_node(8).time(10).obj()
    config = Config(def_mem_per_cpu_mb=1000, scheduler="sched/backfill")
    snap = dataclasses.replace(
        snapshot(
            nodes,
            [big, mine(2, gpus=2, minutes=1), mine(3, gpus=2, minutes=1)],
            running=[busy],
            config=config,
        ),
        accounting=limits(account={"grp_gpus": 2}),
    )
    result = run_cycle(snap, now=100)
    assert [s.job_id for s in result.starts] == [2]
    assert result.reasons == {1: "Resources", 3: "AssocGrpGRES"}


def test_no_accounting_no_limits() -> None:
    assert run_cycle(snapshot(cluster(2), [mine(1), mine(2)]), now=100).reasons == {}


SUBMITS = [
    ("under max submit", limits(user={"max_submit_jobs": 2}), 1, None),
    ("at max submit", limits(user={"max_submit_jobs": 1}), 1, SUBMIT_REFUSED),
    ("array over max submit", limits(user={"max_submit_jobs": 3}), 3, SUBMIT_REFUSED),
    ("grp submit on account", limits(account={"grp_submit_jobs": 1}), 1, SUBMIT_REFUSED),
    ("qos max submit per user", limits(qos={"max_submit_per_user": 1}), 1, SUBMIT_REFUSED),
]


@pytest.mark.parametrize("acct,count,expected", [c[1:] for c in SUBMITS], ids=[c[0] for c in SUBMITS])
def test_submit_limits(acct: AccountingLimits, count: int, expected: str | None) -> None:
    queued = {(2, "normal", 1000): 1}  # one job of alice already queued
    assert submit_refusal(acct, 2, "normal", 1000, count, queued) == expected


def usage(
    account: dict[str, int] | None = None,
    user: dict[str, int] | None = None,
    qos: dict[str, int] | None = None,
    used: UsedMinutes | None = None,
    qos_used: UsedMinutes | None = None,
    safe: bool = False,
) -> AccountingLimits:
    """Usage limits (GrpTRESMins ...) on the account, the user or the QOS, with alice's decayed usage."""
    return AccountingLimits(
        assocs=(
            dataclasses.replace(ACCOUNT, usage=UsageLimits(**(account or {}))),
            dataclasses.replace(USER, usage=UsageLimits(**(user or {}))),
        ),
        qos=(QosLimits(name="normal", usage=UsageLimits(**(qos or {}))),),
        enforce_qos=True,
        safe=safe,
        assoc_used={2: used} if used else {},
        qos_used={"normal": qos_used} if qos_used else {},
    )


USAGE_CASES = [
    (
        "grp cpu mins reached on the account",
        usage(account={"grp_cpu_mins": 100}, used=UsedMinutes(cpu=100)),
        [mine(1)],
        {1: "AssocGrpCPUMinutesLimit"},
    ),
    (
        "grp cpu mins not reached",
        usage(account={"grp_cpu_mins": 100}, used=UsedMinutes(cpu=99)),
        [mine(1)],
        {},
    ),
    (
        "safe: the job must fit in what is left",
        usage(account={"grp_cpu_mins": 100}, used=UsedMinutes(cpu=95), safe=True),
        [mine(1, cpus=1, minutes=10)],
        {1: "AssocGrpCPUMinutesLimit"},
    ),
    (
        "safe: a job that fits starts",
        usage(account={"grp_cpu_mins": 100}, used=UsedMinutes(cpu=80), safe=True),
        [mine(1, cpus=2, minutes=10)],
        {},
    ),
    (
        "grp gres mins stop only gpu jobs",
        usage(user={"grp_gpu_mins": 600}, used=UsedMinutes(gpu=600)),
        [mine(1, gpus=1), mine(2)],
        {1: "AssocGrpGRESMinutes"},
    ),
    (
        "qos grp cpu mins",
        usage(qos={"grp_cpu_mins": 10}, qos_used=UsedMinutes(cpu=10)),
        [mine(1)],
        {1: "QOSGrpCPUMinutesLimit"},
    ),
    (
        "qos grp gres mins",
        usage(qos={"grp_gpu_mins": 10}, qos_used=UsedMinutes(gpu=12)),
        [mine(1, gpus=2)],
        {1: "QOSGrpGRESMinutes"},
    ),
    (
        "grp wall",
        usage(account={"grp_wall_min": 60}, used=UsedMinutes(wall=61)),
        [mine(1)],
        {1: "AssocGrpWallLimit"},
    ),
    (
        "qos grp wall",
        usage(qos={"grp_wall_min": 60}, qos_used=UsedMinutes(wall=60)),
        [mine(1)],
        {1: "QOSGrpWallLimit"},
    ),
    (
        "max cpu mins per job: cpus x time limit",
        usage(user={"max_cpu_mins_per_job": 40}),
        [mine(1, cpus=4, minutes=10), mine(2, cpus=5, minutes=10)],
        {2: "AssocMaxCpuMinutesPerJobLimit"},
    ),
    (
        "max gres mins per job",
        usage(account={"max_gpu_mins_per_job": 60}),
        [mine(1, gpus=2, minutes=31)],
        {1: "AssocMaxGRESMinutesPerJob"},
    ),
    (
        "qos max cpu mins per job",
        usage(qos={"max_cpu_mins_per_job": 5}),
        [mine(1, cpus=1, minutes=6)],
        {1: "QOSMaxCpuMinutesPerJobLimit"},
    ),
    (
        "grp cpu run mins: the second job's minutes do not fit",
        usage(account={"grp_cpu_run_mins": 100}),
        [mine(1, cpus=4, minutes=20), mine(2, cpus=2, minutes=20)],
        {2: "AssocGrpCPURunMinutesLimit"},
    ),
    (
        "grp gres run mins",
        usage(user={"grp_gpu_run_mins": 60}),
        [mine(1, gpus=1, minutes=60), mine(2, gpus=1, minutes=1)],
        {2: "AssocGrpGRESRunMinutes"},
    ),
    (
        "qos grp cpu run mins",
        usage(qos={"grp_cpu_run_mins": 10}),
        [mine(1, cpus=1, minutes=11)],
        {1: "QOSGrpCPURunMinutesLimit"},
    ),
]


@pytest.mark.parametrize(
    "acct,pending,reasons", [c[1:] for c in USAGE_CASES], ids=[c[0] for c in USAGE_CASES]
)
def test_usage_limits(acct: AccountingLimits, pending: list, reasons: dict[int, str]) -> None:  # type: ignore[type-arg]
    snap = dataclasses.replace(snapshot(cluster(2), pending), accounting=acct)
    result = run_cycle(snap, now=100)
    assert result.reasons == reasons
    assert {s.job_id for s in result.starts} == {j.job_id for j in pending} - set(reasons)


def test_run_minutes_count_what_running_jobs_have_left() -> None:
    # 2 CPUs until t=100+30*60: 60 CPU-minutes left of a 100 limit; a 2-CPU 20-minute job needs 40 more
    run = running(
        9,
        ["node1"],
        100 + 30 * 60,
        assoc_id=2,
        qos="normal",
        allocation=(NodeAllocation("node1", (0, 1), 100),),
    )
    acct = usage(account={"grp_cpu_run_mins": 100})
    fits = dataclasses.replace(
        snapshot(cluster(2), [mine(1, cpus=2, minutes=20)], running=[run]), accounting=acct
    )
    assert run_cycle(fits, now=100).reasons == {}
    later = dataclasses.replace(fits, pending=(mine(1, cpus=2, minutes=21),))
    assert run_cycle(later, now=100).reasons == {1: "AssocGrpCPURunMinutesLimit"}
    assert run_cycle(later, now=100 + 60).reasons == {}  # a minute on, the running job has 2 CPU-minutes less


def test_unlimited_job_never_fits_a_minutes_limit() -> None:
    unlimited = dataclasses.replace(mine(1), time_limit_min=UNLIMITED)
    snap = dataclasses.replace(
        snapshot(cluster(2), [unlimited]), accounting=usage(user={"max_cpu_mins_per_job": 10**6})
    )
    assert run_cycle(snap, now=100).reasons == {1: "AssocMaxCpuMinutesPerJobLimit"}
