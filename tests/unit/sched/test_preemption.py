"""Preemption in the scheduling cycle: which running jobs a waiting job ends, how, and what it holds."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctld.sched.cycle import run_cycle
from ctld.sched.model import (
    UNLIMITED,
    Config,
    JobRequest,
    Node,
    NodeAllocation,
    NodeUsage,
    Partition,
    PreemptConfig,
    Preemption,
    QosPreempt,
    RunningJob,
    Snapshot,
    Start,
)
from ctld.sched.placement import Overlay, place
from tests.unit.sched.builders import cluster, job, partition

NOW = 10_000  # the fake clock: every cycle here runs at this time


def gpu_job(job_id: int, node: str, gpus: range, **changes: object) -> RunningJob:
    """A running job holding `gpus` (and as many CPUs) of `node`, started 1000 s before NOW."""
    alloc = NodeAllocation(node=node, cpu_ids=tuple(gpus), mem_mb=1000, gpu_indices=tuple(gpus))
    base = RunningJob(
        job_id=job_id,
        nodes=(node,),
        end_time=0,
        partition="batch",
        allocation=(alloc,),
        qos="low",
        start_time=NOW - 1000,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def with_usage(nodes: Iterable[Node], running: Iterable[RunningJob]) -> tuple[Node, ...]:
    """The nodes with the usage the running jobs' allocations make."""
    usage: dict[str, NodeUsage] = {}
    for run in running:
        for a in run.allocation:
            u = usage.get(a.node, NodeUsage())
            usage[a.node] = NodeUsage(
                u.cpu_ids | frozenset(a.cpu_ids),
                u.mem_mb + a.mem_mb,
                u.gpu_indices | frozenset(a.gpu_indices),
                False,
                u.jobs + 1,
            )
    return tuple(dataclasses.replace(n, usage=usage.get(n.name, NodeUsage())) for n in nodes)


QOS_TABLE = (
    QosPreempt("high", preempt=frozenset({"low"})),
    QosPreempt("low", mode="REQUEUE", grace_time_s=10),
    QosPreempt("normal"),
    QosPreempt("frozen", mode="OFF"),
    QosPreempt("top", preempt=frozenset({"low", "frozen", "normal"})),
    QosPreempt("paused", mode="SUSPEND"),
    QosPreempt("urgent", preempt=frozenset({"paused", "low"})),
)


@dataclass
class Case:
    name: str
    pending: list[JobRequest]
    running: list[RunningJob]
    want: list[Preemption]  # the decisions, in order
    started: list[int] = field(default_factory=list)
    type: str = "preempt/qos"
    mode: str = "CANCEL"  # the cluster's PreemptMode
    exempt: int = 0
    nodes: int = 1
    partitions: list[Partition] | None = None
    gang: bool = False  # GANG in the cluster's PreemptMode


def high(job_id: int, gpus: int = 8, qos: str = "high") -> JobRequest:
    return dataclasses.replace(job(job_id).gpus_per_node(gpus).obj(), qos=qos)


def by(victim: int, preemptor: int, mode: str = "REQUEUE", grace: int = 10) -> Preemption:
    return Preemption(victim, mode, grace, f"preempted by job {preemptor}", preemptor)


CASES = [
    Case(
        "high QOS preempts the low job holding its GPUs; its QOS says requeue after 10 s",
        [high(9)],
        [gpu_job(1, "node1", range(8))],
        [by(1, 9)],
    ),
    Case(
        "a QOS not in the Preempt list is left alone",
        [high(9)],
        [gpu_job(1, "node1", range(8), qos="normal")],
        [],
    ),
    Case("a job without a QOS preempts nothing", [high(9, qos="")], [gpu_job(1, "node1", range(8))], []),
    Case(
        "a QOS without its own PreemptMode takes the cluster's",
        [high(9, qos="top")],
        [gpu_job(1, "node1", range(8), qos="normal")],
        [by(1, 9, "CANCEL", 0)],
    ),
    Case(
        "PreemptMode=OFF on the victim's QOS protects it",
        [high(9, qos="top")],
        [gpu_job(1, "node1", range(8), qos="frozen")],
        [],
    ),
    Case(
        "cluster PreemptMode=OFF and no QOS mode: nobody is preempted",
        [high(9, qos="top")],
        [gpu_job(1, "node1", range(8), qos="normal")],
        [],
        mode="OFF",
    ),
    Case(
        "lowest priority goes first",
        [high(9, gpus=4)],
        [gpu_job(1, "node1", range(4), priority=50), gpu_job(2, "node1", range(4, 8), priority=10)],
        [by(2, 9)],
    ),
    Case(
        "equal priority: the youngest goes first",
        [high(9, gpus=4)],
        [
            gpu_job(1, "node1", range(4), start_time=NOW - 500),
            gpu_job(2, "node1", range(4, 8), start_time=NOW - 900),
        ],
        [by(1, 9)],
    ),
    Case(
        "only as many as needed: two of four 2-GPU jobs make room for 4 GPUs",
        [high(9, gpus=4)],
        [gpu_job(i, "node1", range(2 * i - 2, 2 * i), priority=i) for i in (1, 2, 3, 4)],
        [by(1, 9), by(2, 9)],
    ),
    Case(
        "a victim the fit does not need is dropped again",
        # job 1 (lowest) and job 3 (not preemptable) share node1, job 2 holds node2: only node2 can be freed
        [high(9)],
        [
            gpu_job(1, "node1", range(2), priority=1),
            gpu_job(3, "node1", range(2, 4), qos="normal"),
            gpu_job(2, "node2", range(8), priority=5),
        ],
        [by(2, 9)],
        nodes=2,
    ),
    Case(
        "free GPUs count: 2 free + 6 preempted make 8", [high(9)], [gpu_job(1, "node1", range(6))], [by(1, 9)]
    ),
    Case(
        "nothing is preempted when even all candidates would not make room",
        [high(9)],
        [gpu_job(1, "node1", range(4)), gpu_job(2, "node1", range(4, 8), qos="normal")],
        [],
    ),
    Case(
        "a job already ending is not chosen twice, and no other is chosen while it ends",
        [high(9)],
        [gpu_job(1, "node1", range(8), releasing=True)],
        [],
    ),
    Case(
        "PreemptExemptTime keeps a young job running",
        [high(9)],
        [gpu_job(1, "node1", range(8), start_time=NOW - 30)],
        [],
        exempt=60,
    ),
    Case(
        "PreemptExemptTime passed: preempted",
        [high(9)],
        [gpu_job(1, "node1", range(8), start_time=NOW - 90)],
        [by(1, 9)],
        exempt=60,
    ),
    Case(
        "two waiting jobs never pick the same victim",
        [high(8), high(9)],
        [gpu_job(1, "node1", range(8)), gpu_job(2, "node2", range(8))],
        [by(2, 8), by(1, 9)],
        nodes=2,
    ),
    Case(
        "a job that fits starts; nothing is preempted",
        [high(9, gpus=2)],
        [gpu_job(1, "node1", range(6))],
        [],
        started=[9],
    ),
    Case(
        "preempt/none: nothing is preempted",
        [high(9)],
        [gpu_job(1, "node1", range(8))],
        [],
        type="preempt/none",
    ),
]

TIERS = [
    partition(
        "low", ["node1"], max_time_min=UNLIMITED, priority_tier=1, preempt_mode="REQUEUE", grace_time_s=5
    ),
    partition("mid", ["node1"], max_time_min=UNLIMITED, priority_tier=1),
    partition("high", ["node1"], max_time_min=UNLIMITED, priority_tier=2),
]

CASES += [
    Case(
        "partition_prio: a higher PriorityTier preempts a lower one, with that partition's mode and grace",
        [dataclasses.replace(high(9), partitions=("high",))],
        [gpu_job(1, "node1", range(8), partition="low")],
        [by(1, 9, "REQUEUE", 5)],
        type="preempt/partition_prio",
        partitions=TIERS,
    ),
    Case(
        "partition_prio: the lower partition without a mode takes the cluster's",
        [dataclasses.replace(high(9), partitions=("high",))],
        [gpu_job(1, "node1", range(8), partition="mid")],
        [by(1, 9, "CANCEL", 0)],
        type="preempt/partition_prio",
        partitions=TIERS,
    ),
    Case(
        "partition_prio: the same tier is left alone",
        [dataclasses.replace(high(9), partitions=("mid",))],
        [gpu_job(1, "node1", range(8), partition="low")],
        [],
        type="preempt/partition_prio",
        partitions=TIERS,
    ),
]


def snap_of(case: Case, machines: tuple[Node, ...] | None = None) -> Snapshot:
    nodes = with_usage(machines or cluster(case.nodes), case.running)
    parts = case.partitions or [partition("batch", [n.name for n in nodes], max_time_min=UNLIMITED)]
    config = Config(
        def_mem_per_cpu_mb=1000,
        scheduler="sched/backfill",
        preempt=PreemptConfig(case.type, case.mode, case.exempt, case.gang),
    )
    return Snapshot(
        nodes=nodes,
        partitions=tuple(parts),
        pending=tuple(case.pending),
        running=tuple(case.running),
        jobs=(),
        config=config,
        qos_preempt=QOS_TABLE,
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_preemption_decisions(case: Case) -> None:
    result = run_cycle(snap_of(case), NOW)
    assert list(result.preemptions) == case.want
    assert [s.job_id for s in result.starts] == case.started
    for preemptor in {p.preemptor for p in case.want}:
        assert result.reasons[preemptor] == "Resources"  # it waits until the victims are gone


def test_freed_resources_are_held_for_the_preemptor() -> None:
    """2 GPUs are free, the low job holds 6: the high job preempts it, and a lower 2-GPU job may not
    take the 2 free GPUs (main pass or backfill), or the high job would not fit once the low one ends."""
    low = dataclasses.replace(job(10).gpus_per_node(2).time(5).obj(), qos="low", submit_time=99_999)
    case = Case("", [high(9), low], [gpu_job(1, "node1", range(6), end_time=NOW + 3600)], [by(1, 9)])
    result = run_cycle(snap_of(case), NOW)
    assert list(result.preemptions) == [by(1, 9)]
    assert result.starts == ()


def test_an_ending_victim_keeps_the_room_held() -> None:
    """The cycle after the preemption: the victim is still ending; nothing new is preempted and the
    lower job still may not take the free GPUs."""
    low = dataclasses.replace(job(10).gpus_per_node(2).time(5).obj(), qos="low", submit_time=99_999)
    case = Case("", [high(9), low], [gpu_job(1, "node1", range(6), releasing=True, end_time=NOW + 10)], [])
    result = run_cycle(snap_of(case), NOW)
    assert result.preemptions == ()
    assert result.starts == ()
    assert result.reasons[9] == "Resources"


def test_a_suspended_job_is_not_preempted() -> None:
    """scontrol suspend keeps the job's allocation; preemption takes the running job beside it."""
    case = Case(
        "",
        [high(9, gpus=4)],
        [
            gpu_job(1, "node1", range(4), suspended=True, priority=1),
            gpu_job(2, "node1", range(4, 8), priority=5),
        ],
        [],
    )
    result = run_cycle(snap_of(case), NOW)
    assert [p.job_id for p in result.preemptions] == [2]
    assert result.reasons[9] == "Resources"


def test_once_the_victim_is_gone_the_preemptor_starts() -> None:
    case = Case("", [high(9)], [], [])
    result = run_cycle(snap_of(case), NOW)
    assert [s.job_id for s in result.starts] == [9]
    assert result.starts[0].allocation[0].gpu_indices == tuple(range(8))


def test_quota_reclaim_goes_through_preemption() -> None:
    """Borrowing jobs reclaimed for their owner (borrowing.py) come out as REQUEUE preemptions (grace:
    their QOS's GraceTime, none in this snapshot), applied by the controller like any other."""
    from tests.unit.sched.test_borrowing import BORROWED, accounts, cycle, pend

    result = cycle(accounts(), [pend(1, "alice", 4)], BORROWED)
    reason = "quota reclaimed by job 1"
    assert list(result.preemptions) == [
        Preemption(23, "REQUEUE", 0, reason, 1),
        Preemption(22, "REQUEUE", 0, reason, 1),
    ]


@st.composite
def preemption_cases(draw: st.DrawFn) -> tuple[Snapshot, JobRequest]:
    """1-3 nodes of 8 CPUs and 4 GPUs, their GPUs (all but 0-2) held by random 1-node jobs (QOS low or
    normal, some already ending), and one waiting high-QOS GPU job."""
    nodes = cluster(draw(st.integers(1, 3)), cpus=8, gpus=4)
    running: list[RunningJob] = []
    job_id = 100
    for n in nodes:
        cpu = gpu = 0
        keep_free = draw(st.integers(0, 2))  # GPUs left idle on this node
        while gpu < 4 - keep_free:
            cpus, gpus = draw(st.integers(1, 2)), min(draw(st.integers(1, 2)), 4 - keep_free - gpu)
            alloc = NodeAllocation(n.name, tuple(range(cpu, cpu + cpus)), 1000, tuple(range(gpu, gpu + gpus)))
            running.append(
                RunningJob(
                    job_id,
                    (n.name,),
                    0,
                    "batch",
                    (alloc,),
                    qos=draw(st.sampled_from(["low", "normal"])),
                    priority=draw(st.integers(0, 3)),
                    start_time=draw(st.integers(0, 100)),
                    releasing=draw(st.integers(0, 9)) == 0,
                )
            )
            cpu, gpu, job_id = cpu + cpus, gpu + gpus, job_id + 1
    waiting = dataclasses.replace(
        job(1).gpus_per_node(draw(st.integers(2, 4))).nodes(draw(st.integers(1, min(2, len(nodes))))).obj(),
        qos="high",
    )
    return snap_of(Case("", [waiting], running, []), nodes), waiting


def _fits_once_gone(snap: Snapshot, waiting: JobRequest, gone: set[int]) -> bool:
    """Independently of preemption.py: does the job fit once the jobs in `gone` have left?"""
    left = [r for r in snap.running if r.job_id not in gone]
    nodes = with_usage((dataclasses.replace(n, usage=NodeUsage()) for n in snap.nodes), left)
    later = dataclasses.replace(snap, nodes=nodes, running=tuple(left))
    return isinstance(place(waiting, snap.partitions[0], later, Overlay()), Start)


@settings(max_examples=200, deadline=None)
@given(preemption_cases())
def test_victims_are_allowed_sufficient_and_each_needed(case: tuple[Snapshot, JobRequest]) -> None:
    snap, waiting = case
    result = run_cycle(snap, NOW)
    victims = {p.job_id for p in result.preemptions}
    ending = {r.job_id for r in snap.running if r.releasing}
    allowed = {r.job_id for r in snap.running if r.qos == "low" and not r.releasing}
    assert victims <= allowed
    if result.starts:
        assert not victims
        return
    if victims:
        assert _fits_once_gone(snap, waiting, ending | victims)
        for victim in victims:  # only as many as needed
            assert not _fits_once_gone(snap, waiting, ending | victims - {victim})
    elif _fits_once_gone(snap, waiting, ending | allowed):
        assert _fits_once_gone(snap, waiting, ending)  # nothing preempted only when the ending jobs suffice
