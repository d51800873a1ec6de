"""PreemptMode=SUSPEND,GANG in the core: the victim lends its CPUs/GPUs (not its memory) to the
preemptor, which starts in the same cycle, and is resumed once nothing running holds them again."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctld.sched.cycle import run_cycle
from ctld.sched.model import UNLIMITED, NodeAllocation, Preemption, RunningJob, Snapshot
from tests.unit.sched.builders import cluster, job, partition
from tests.unit.sched.test_preemption import NOW, Case, by, gpu_job, high, snap_of

TIERS = [
    partition("low", ["node1", "node2"], max_time_min=UNLIMITED, priority_tier=1),
    partition(
        "requeued", ["node1", "node2"], max_time_min=UNLIMITED, priority_tier=1, preempt_mode="REQUEUE"
    ),
    partition("high", ["node1", "node2"], max_time_min=UNLIMITED, priority_tier=2),
]


def urgent(job_id: int, gpus: int = 8, mem: int = 0) -> object:
    built = job(job_id).gpus_per_node(gpus)
    if mem:
        built = built.mem(mem)
    return dataclasses.replace(built.obj(), partitions=("high",))


def low(job_id: int, node: str, gpus: range, mem: int = 1000, **changes: object) -> RunningJob:
    alloc = NodeAllocation(node=node, cpu_ids=tuple(gpus), mem_mb=mem, gpu_indices=tuple(gpus))
    return gpu_job(job_id, node, gpus, **{"partition": "low", "allocation": (alloc,), **changes})


def suspended(victim: int, preemptor: int) -> Preemption:
    return by(victim, preemptor, "SUSPEND", 0)


def tiers(
    name: str, pending: list[object], running: list[RunningJob], want: list[Preemption], **kw: object
) -> Case:
    options: dict[str, object] = {
        "type": "preempt/partition_prio",
        "mode": "SUSPEND",
        "gang": True,
        "partitions": TIERS,
        **kw,
    }
    return Case(name, pending, running, want, **options)  # type: ignore[arg-type]


PREEMPTOR = RunningJob(9, ("node1",), 0, "high", (NodeAllocation("node1", (0, 1), 1000, (0, 1)),))


CASES = [
    tiers(
        "a higher tier suspends the lower job and starts at once in its place",
        [urgent(9)],
        [low(1, "node1", range(8))],
        [suspended(1, 9)],
        started=[9],
    ),
    tiers(
        "its memory is not lent: 40000 of 64000 MB stay held, the preemptor's 30000 MB do not fit",
        [urgent(9, mem=30000)],
        [low(1, "node1", range(8), mem=40000)],
        [],
        nodes=1,
    ),
    tiers(
        "the same with requeue: the memory is freed, so it is preempted",
        [urgent(9, mem=30000)],
        [low(1, "node1", range(8), mem=40000, partition="requeued")],
        [by(1, 9, "REQUEUE", 0)],
        nodes=1,
    ),
    tiers(
        "what the suspended job lends is the preemptor's alone: a lower job does not start on the rest",
        [urgent(9, gpus=4), dataclasses.replace(job(10).gpus_per_node(4).obj(), partitions=("low",))],
        [low(1, "node1", range(8))],
        [suspended(1, 9)],
        started=[9],
        nodes=1,
    ),
    tiers(
        "a suspended and a requeued victim together: the preemptor waits for the requeued one to end",
        [urgent(9)],
        [low(1, "node1", range(4)), low(2, "node1", range(4, 8), partition="requeued")],
        [by(2, 9, "REQUEUE", 0), suspended(1, 9)],
        nodes=1,
    ),
    tiers(
        "without GANG nothing would resume it: nobody is suspended",
        [urgent(9)],
        [low(1, "node1", range(8))],
        [],
        gang=False,
        nodes=1,
    ),
    tiers(
        "a job already suspended by preemption is not chosen again",
        [urgent(8)],
        [low(1, "node1", range(8), suspended=True, gang_suspended=True), PREEMPTOR],
        [],
        nodes=1,
    ),
    Case(
        "preempt/qos: a QOS whose PreemptMode is SUSPEND is suspended, its preemptor starts",
        [high(9, qos="urgent")],
        [gpu_job(1, "node1", range(8), qos="paused")],
        [suspended(1, 9)],
        started=[9],
        mode="REQUEUE",
        gang=True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_suspend_decisions(case: Case) -> None:
    result = run_cycle(snap_of(case), NOW)
    assert list(result.preemptions) == case.want
    assert [s.job_id for s in result.starts] == case.started
    assert result.resumes == ()


def test_the_preemptor_gets_the_suspended_jobs_gpus() -> None:
    result = run_cycle(snap_of(CASES[3]), NOW)
    assert result.starts[0].allocation[0].gpu_indices == (0, 1, 2, 3)
    assert result.reasons[10] == "Resources"


RESUMES = [
    (
        "its preemptor still runs on its GPUs: it stays suspended",
        [low(1, "node1", range(8), suspended=True, gang_suspended=True), PREEMPTOR],
        [],
    ),
    (
        "its preemptor has ended: resumed",
        [low(1, "node1", range(8), suspended=True, gang_suspended=True)],
        [1],
    ),
    (
        "an operator's scontrol suspend is never resumed by the scheduler",
        [low(1, "node1", range(8), suspended=True)],
        [],
    ),
    (
        "two suspended on the same GPUs: the higher priority one resumes, the other waits for it",
        [
            low(1, "node1", range(8), suspended=True, gang_suspended=True, priority=1),
            low(2, "node1", range(4), suspended=True, gang_suspended=True, priority=7),
            low(3, "node2", range(4), suspended=True, gang_suspended=True, priority=0),
        ],
        [2, 3],
    ),
]


@pytest.mark.parametrize(("name", "running", "want"), RESUMES, ids=[r[0] for r in RESUMES])
def test_resumes(name: str, running: list[RunningJob], want: list[int]) -> None:
    result = run_cycle(snap_of(tiers(name, [], running, [])), NOW)
    assert list(result.resumes) == want


@st.composite
def suspend_cases(draw: st.DrawFn) -> Snapshot:
    """1-2 nodes of 8 CPUs, 4 GPUs and 16000 MB, held by random 1-node jobs (QOS paused, which is
    suspended, or normal, which is not), and one waiting urgent-QOS job with a random memory need."""
    nodes = cluster(draw(st.integers(1, 2)), cpus=8, gpus=4, mem=16000)
    running: list[RunningJob] = []
    job_id = 100
    for n in nodes:
        cpu = gpu = 0
        while gpu < 4 and draw(st.booleans()):
            gpus = min(draw(st.integers(1, 2)), 4 - gpu)
            alloc = NodeAllocation(
                n.name, (cpu, cpu + 1), draw(st.sampled_from([1000, 6000])), tuple(range(gpu, gpu + gpus))
            )
            qos = draw(st.sampled_from(["paused", "normal"]))
            running.append(
                RunningJob(
                    job_id, (n.name,), 0, "batch", (alloc,), qos=qos, start_time=draw(st.integers(0, 100))
                )
            )
            cpu, gpu, job_id = cpu + 2, gpu + gpus, job_id + 1
    waiting = dataclasses.replace(
        job(1).gpus_per_node(draw(st.integers(1, 4))).mem(draw(st.sampled_from([1000, 8000]))).obj(),
        qos="urgent",
    )
    case = Case("", [waiting], running, [], mode="REQUEUE", gang=True)
    return snap_of(case, nodes)


@settings(max_examples=200, deadline=None)
@given(suspend_cases())
def test_a_preemptor_only_gets_what_suspended_jobs_lend_and_their_memory_stays_held(snap: Snapshot) -> None:
    result = run_cycle(snap, NOW)
    victims = {p.job_id for p in result.preemptions}
    assert {p.mode for p in result.preemptions} <= {"SUSPEND"}
    assert victims <= {r.job_id for r in snap.running if r.qos == "paused"}
    for start in result.starts:
        for alloc in start.allocation:
            others = [r for r in snap.running if r.job_id not in victims]
            held = [a for r in others for a in r.allocation if a.node == alloc.node]
            assert not {c for a in held for c in a.cpu_ids} & set(alloc.cpu_ids)
            assert not {g for a in held for g in a.gpu_indices} & set(alloc.gpu_indices)
            every = [a for r in snap.running for a in r.allocation if a.node == alloc.node]  # victims' too
            assert sum(a.mem_mb for a in every) + alloc.mem_mb <= 16000
    if victims:
        assert [s.job_id for s in result.starts] == [1]  # suspended victims: it starts at once
