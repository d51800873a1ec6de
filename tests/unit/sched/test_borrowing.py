"""Quota borrowing between sibling accounts and its reclaim (borrowing.py), through the whole cycle.

The cohort: account `lab` with children `teama` (alice) and `teamb` (bob), each with a GPU guarantee
(GrpTRES=gres/gpu=N) and, unless a case says otherwise, MaxBorrowTRES=gres/gpu=4. `now` is a fake
clock; running jobs carry their start times (reclaim takes the youngest borrowers first).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence

import pytest

from ctld.sched.cycle import run_cycle
from ctld.sched.model import (
    AccountingLimits,
    AssocLimits,
    JobRequest,
    Node,
    NodeAllocation,
    NodeUsage,
    QosPreempt,
    RunningJob,
)
from tests.unit.sched.builders import job, node, snapshot

NOW = 1000
LAB, TEAMA, TEAMB, TEAMC, ALICE, BOB = 1, 2, 3, 4, 5, 6
USERS = {"alice": ALICE, "bob": BOB, "lab": LAB}


def accounts(
    a: dict[str, int] | None = None, b: dict[str, int] | None = None, c: dict[str, int] | None = None
) -> AccountingLimits:
    """lab -> teama (alice), teamb (bob), teamc; both teams guarantee 4 GPUs and may borrow 4."""
    team = {"grp_gpus": 4, "max_borrow_gpus": 4}
    return AccountingLimits(
        assocs=(
            AssocLimits(id=LAB, account="lab"),
            AssocLimits(id=TEAMA, parent_id=LAB, account="teama", **{**team, **(a or {})}),
            AssocLimits(id=TEAMB, parent_id=LAB, account="teamb", **{**team, **(b or {})}),
            AssocLimits(id=TEAMC, parent_id=LAB, account="teamc", **(c or {})),
            AssocLimits(id=ALICE, parent_id=TEAMA, account="teama", user="alice"),
            AssocLimits(id=BOB, parent_id=TEAMB, account="teamb", user="bob"),
        )
    )


def pend(job_id: int, who: str, gpus: int, *nodes: str, held: bool = False) -> JobRequest:
    builder = job(job_id).gpus(gpus)
    if nodes:
        builder = builder.nodelist(*nodes)
    if held:
        builder = builder.hold()
    return dataclasses.replace(builder.obj(), assoc_id=USERS[who])


def run(job_id: int, who: str, gpus: int, node_name: str, start: int) -> tuple[RunningJob, int]:
    """A running job of `who` with `gpus` GPUs (and one CPU) on one node, started at `start`."""
    return RunningJob(job_id, (node_name,), 0, assoc_id=USERS[who], start_time=start), gpus


def cycle(
    acct: AccountingLimits,
    pending: Sequence[JobRequest],
    runs: Sequence[tuple[RunningJob, int]],
    gpus: dict[str, int] | None = None,
    qos: tuple[QosPreempt, ...] = (),
):  # type: ignore[no-untyped-def]
    """One cycle over nodes `gpus` (name -> GPU count; default one node of 8) busy with `runs`."""
    layout = gpus or {"node1": 8}
    taken: dict[str, list[NodeAllocation]] = defaultdict(list)
    placed: list[RunningJob] = []
    for rj, count in runs:
        name = rj.nodes[0]
        used = taken[name]
        first_gpu, first_cpu = sum(len(a.gpu_indices) for a in used), len(used)
        alloc = NodeAllocation(name, (first_cpu,), 1000, tuple(range(first_gpu, first_gpu + count)))
        used.append(alloc)
        placed.append(dataclasses.replace(rj, allocation=(alloc,)))
    nodes: list[Node] = []
    for name, count in layout.items():
        used = taken[name]
        usage = NodeUsage(
            cpu_ids=frozenset(c for a in used for c in a.cpu_ids),
            mem_mb=1000 * len(used),
            gpu_indices=frozenset(g for a in used for g in a.gpu_indices),
            jobs=len(used),
        )
        nodes.append(dataclasses.replace(node(name).gpus(count).obj(), usage=usage))
    snap = dataclasses.replace(snapshot(nodes, pending, running=placed), accounting=acct, qos_preempt=qos)
    return run_cycle(snap, NOW)


ADMISSION = [
    (
        "borrows the idle quota of a sibling",
        accounts(),
        [pend(1, "bob", 2)],
        [run(9, "bob", 4, "node1", 10)],
        {},
    ),
    (
        "no MaxBorrowTRES: no borrowing (Slurm's behaviour)",
        accounts(b={"max_borrow_gpus": -1}),
        [pend(1, "bob", 2)],
        [run(9, "bob", 4, "node1", 10)],
        {1: "AssocGrpGRES"},
    ),
    (
        "borrowing stays within MaxBorrowTRES",
        accounts(b={"max_borrow_gpus": 2}),
        [pend(1, "bob", 4), pend(2, "bob", 2)],
        [run(9, "bob", 4, "node1", 10)],
        {1: "AssocGrpGRES"},
    ),
    (
        "nothing idle in the cohort: no borrowing",
        accounts(),
        [pend(1, "bob", 2)],
        [run(9, "bob", 4, "node1", 10), run(8, "alice", 4, "node1", 11)],
        {1: "AssocGrpGRES"},
    ),
    (
        "a sibling without a guarantee lends nothing",
        accounts(a={"grp_gpus": -1}),
        [pend(1, "bob", 2)],
        [run(9, "bob", 4, "node1", 10)],
        {1: "AssocGrpGRES"},
    ),
    (
        "quota its owner's pending job waits for is not lent",
        accounts(),
        [pend(1, "bob", 4), pend(2, "alice", 4)],
        [run(9, "bob", 4, "node1", 10)],
        {1: "AssocGrpGRES"},
    ),
    (
        "a held owner job does not keep its quota from borrowers",
        accounts(),
        [pend(1, "bob", 4), pend(2, "alice", 4, held=True)],
        [run(9, "bob", 4, "node1", 10)],
        {2: "JobHeldUser"},
    ),
]


@pytest.mark.parametrize(
    "acct,pending,runs,reasons", [c[1:] for c in ADMISSION], ids=[c[0] for c in ADMISSION]
)
def test_borrowing_admission(
    acct: AccountingLimits,
    pending: list[JobRequest],
    runs: list[tuple[RunningJob, int]],
    reasons: dict[int, str],
) -> None:
    result = cycle(acct, pending, runs, {"node1": 8, "node2": 8})
    assert result.reasons == reasons
    assert {s.job_id for s in result.starts} == {j.job_id for j in pending} - set(reasons)
    assert result.preemptions == ()


BORROWED = [run(21, "bob", 4, "node1", 10), run(22, "bob", 2, "node1", 20), run(23, "bob", 2, "node1", 30)]
RECLAIM = [
    ("the youngest borrower goes first", accounts(), [pend(1, "alice", 2)], BORROWED, None, (23,)),
    ("only as many as needed, youngest first", accounts(), [pend(1, "alice", 4)], BORROWED, None, (23, 22)),
    (
        "a borrower that frees nothing the owner can use is left alone",
        accounts(a={"grp_gpus": 6}, b={}),
        [pend(1, "alice", 2, "node2")],
        [
            run(21, "bob", 4, "node1", 10),
            run(22, "bob", 2, "node2", 20),
            run(23, "bob", 2, "node3", 30),
            run(24, "alice", 2, "node3", 5),
        ],
        {"node1": 4, "node2": 2, "node3": 4},
        (22,),
    ),
    (
        "no reclaim for an owner over its own guarantee",
        accounts(a={"grp_gpus": 2}, b={"grp_gpus": 2}, c={"grp_gpus": 4}),
        [pend(1, "alice", 2)],
        [
            run(21, "bob", 2, "node1", 10),
            run(22, "bob", 2, "node1", 20),
            run(23, "alice", 2, "node1", 30),
            run(24, "lab", 2, "node1", 40),
        ],
        None,
        (),
    ),
    (
        "within its guarantee the same owner reclaims",
        accounts(a={"grp_gpus": 2}, b={"grp_gpus": 2}, c={"grp_gpus": 4}),
        [pend(1, "alice", 2)],
        [run(21, "bob", 2, "node1", 10), run(22, "bob", 2, "node1", 20), run(24, "lab", 4, "node1", 40)],
        None,
        (22,),
    ),
    (
        "no reclaim when even the borrowers' GPUs would not let it start",
        accounts(a={"grp_gpus": 8}),
        [pend(1, "alice", 8)],
        BORROWED,
        None,
        (),
    ),
    (
        "jobs within their owner's guarantee are never taken",
        accounts(),
        [pend(1, "alice", 4)],
        [run(21, "bob", 4, "node1", 10), run(22, "lab", 4, "node1", 20)],
        None,
        (),
    ),
]


@pytest.mark.parametrize(
    "acct,pending,runs,gpus,victims", [c[1:] for c in RECLAIM], ids=[c[0] for c in RECLAIM]
)
def test_reclaim(
    acct: AccountingLimits,
    pending: list[JobRequest],
    runs: list[tuple[RunningJob, int]],
    gpus: dict[str, int] | None,
    victims: tuple[int, ...],
) -> None:
    result = cycle(acct, pending, runs, gpus)
    assert tuple(p.job_id for p in result.preemptions) == victims
    assert {(p.mode, p.preemptor) for p in result.preemptions} <= {("REQUEUE", pending[0].job_id)}
    assert result.starts == ()  # the owner waits for the victims to leave
    assert set(result.reasons.values()) == {"Resources"}


def test_two_owner_jobs_take_back_two_borrowers_in_one_cycle() -> None:
    """The first owner job holds the room job 23 frees, so the second needs job 22's."""
    result = cycle(accounts(), [pend(1, "alice", 2), pend(2, "alice", 2)], BORROWED)
    assert [(p.job_id, p.preemptor) for p in result.preemptions] == [(23, 1), (22, 2)]
    assert result.reasons == {1: "Resources", 2: "Resources"}


def test_a_victim_in_its_grace_time_is_not_taken_twice() -> None:
    """The next cycle: job 23 is still ending (releasing); nothing more is preempted, the owner waits."""
    leaving = [*BORROWED[:2], (dataclasses.replace(BORROWED[2][0], releasing=True), 2)]
    result = cycle(accounts(), [pend(1, "alice", 2)], leaving)
    assert result.preemptions == () and result.starts == () and result.reasons == {1: "Resources"}


def test_the_victims_qos_grace_time_goes_with_the_decision() -> None:
    acct = accounts()
    qos = (QosPreempt("normal", grace_time_s=30),)
    runs = [(dataclasses.replace(r, qos="normal"), n) for r, n in BORROWED]
    result = cycle(acct, [pend(1, "alice", 2)], runs, qos=qos)
    assert [(p.job_id, p.mode, p.grace_time_s) for p in result.preemptions] == [(23, "REQUEUE", 30)]


def test_after_the_victims_left_the_owner_starts_and_the_requeued_borrower_waits() -> None:
    requeued = pend(23, "bob", 2)
    result = cycle(accounts(), [requeued, pend(1, "alice", 2)], BORROWED[:2])
    assert [s.job_id for s in result.starts] == [1]
    assert result.reasons == {23: "AssocGrpGRES"} and result.preemptions == ()
