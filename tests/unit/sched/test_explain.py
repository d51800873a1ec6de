"""`shoal why`'s explainer (ctld/sched/explain.py) on hand-built snapshots, with a fixed clock."""

from __future__ import annotations

import dataclasses

import pytest

from ctld.sched.explain import Explanation, Holder, explain, start_of
from ctld.sched.model import (
    UNLIMITED,
    AccountingLimits,
    AssocLimits,
    Config,
    GpuRequest,
    JobRequest,
    NodeAllocation,
    NodeUsage,
    Partition,
    Phase,
    PriorityConfig,
    RunningJob,
    Snapshot,
)
from tests.unit.sched.builders import job, node, snapshot, status

NOW = 100_000
HOUR = 3600
BACKFILL = Config(def_mem_per_cpu_mb=100, scheduler="sched/backfill", bf_resolution_s=1)
MULTIFACTOR = dataclasses.replace(
    BACKFILL, priority=PriorityConfig(type="priority/multifactor", weight_age=1000, max_age_s=HOUR)
)


def _run(job_id: int, node_name: str, end: int, cpus: int = 0, gpus: int = 0, **kw: object) -> RunningJob:
    """A running job holding `cpus` CPUs and `gpus` GPUs of one node (ids from 0, or after `skip`)."""
    skip_cpu = int(kw.pop("skip_cpu", 0))  # type: ignore[call-overload]
    skip_gpu = int(kw.pop("skip_gpu", 0))  # type: ignore[call-overload]
    alloc = NodeAllocation(
        node_name,
        tuple(range(skip_cpu, skip_cpu + cpus)),
        cpus * 100,
        tuple(range(skip_gpu, skip_gpu + gpus)),
    )
    return dataclasses.replace(RunningJob(job_id, (node_name,), end, allocation=(alloc,)), **kw)  # type: ignore[arg-type]


def _with_usage(
    nodes: list[str], running: list[RunningJob], cpus: int = 16, gpus: int = 4
) -> tuple[object, ...]:
    """Nodes whose usage is what `running` holds on them."""
    out = []
    for name in nodes:
        allocs = [a for r in running for a in r.allocation if a.node == name]
        usage = NodeUsage(
            cpu_ids=frozenset(c for a in allocs for c in a.cpu_ids),
            mem_mb=sum(a.mem_mb for a in allocs),
            gpu_indices=frozenset(g for a in allocs for g in a.gpu_indices),
            jobs=len(allocs),
        )
        built = node(name).cpus(cpus).mem(64000).gpus(gpus, "h100").obj()
        out.append(dataclasses.replace(built, usage=usage))
    return tuple(out)


def _snap(running: list[RunningJob], pending: list[JobRequest], **kw: object) -> Snapshot:
    nodes = kw.pop("nodes", ["n1", "n2"])
    cpus = int(kw.pop("cpus", 16))  # type: ignore[call-overload]
    base = snapshot(
        _with_usage(nodes, running, cpus=cpus),  # type: ignore[arg-type]
        pending=pending,
        running=running,
        config=kw.pop("config", BACKFILL),  # type: ignore[arg-type]
        jobs=kw.pop("jobs", ()),  # type: ignore[arg-type]
        partitions=kw.pop("partitions", None),  # type: ignore[arg-type]
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


# a GPU job waits behind job 12 (all of n1's GPUs, one hour) and job 13 (two of n2's, two hours)
GPU_WAIT = _snap(
    [
        _run(12, "n1", NOW + HOUR, cpus=4, gpus=4, user_id=1001),
        _run(13, "n2", NOW + 2 * HOUR, cpus=2, gpus=2),
    ],
    [job(20).gpus_per_node(4).time(60).obj()],
)
# GrpTRES=gres/gpu=8 for account research, its jobs 12 and 15 use 8
RESEARCH = 7
LIMITED = _snap(
    [
        _run(12, "n1", NOW + HOUR, cpus=1, gpus=4, assoc_id=RESEARCH),
        _run(15, "n2", NOW + HOUR, cpus=1, gpus=4, assoc_id=RESEARCH),
    ],
    [dataclasses.replace(job(21).gpus_per_node(2).time(60).obj(), assoc_id=RESEARCH)],
    nodes=["n1", "n2", "n3"],
    accounting=AccountingLimits(assocs=(AssocLimits(id=RESEARCH, account="research", grp_gpus=8),)),
)
DEPENDENT = _snap(
    [_run(12, "n1", NOW + HOUR, cpus=1)],
    [job(22).depends("afterok:12").time(10).obj()],
    jobs=[status(12, Phase.ACTIVE), status(22, Phase.PENDING)],
)
TOO_BIG = _snap(
    [],
    [job(23).nodes(3).time(10).obj()],
    partitions=[
        Partition(name="batch", nodes=("n1", "n2"), max_time_min=UNLIMITED),
    ],
)
# backfill hole: job 1 (first in line) needs both 4-CPU nodes when job 9 ends in an hour; job 2
# (2 hours) cannot go before it, an hour would
HOLE = _snap(
    [_run(9, "n1", NOW + HOUR, cpus=4)],
    [
        job(1).nodes(2).tasks(8).time(60).submitted(NOW - 600).obj(),
        job(2).tasks(4).time(120).submitted(NOW).obj(),
    ],
    cpus=4,
    config=MULTIFACTOR,
)
HELD = _snap([], [job(24).hold().time(10).obj()])
IDLE = _snap([], [job(25).gpus_per_node(1).time(10).obj()])


def _check_suggestions(snap: Snapshot, found: Explanation, changed: dict[str, JobRequest]) -> None:
    """Each suggestion starts earlier than the plan, and the cycle with the job so changed agrees."""
    for s in found.suggestions:
        assert found.planned_start is None or s.start < found.planned_start
        again = start_of(snap, changed[s.change], NOW)
        assert again is not None and again[0] == s.start, s


CASES = [
    # id, snapshot, job id, what the explanation says (a subset of its fields)
    (
        "resources held by named jobs, a smaller request starts now",
        GPU_WAIT,
        20,
        {
            "reason": "Resources",
            "planned_start": NOW + HOUR,
            "planned_nodes": ("n1",),
            "suggestions": [("--gres=gpu:2", NOW, ("n2",))],
            "shortage": ("gpu", 4, 2, ("n1", "n2"), (12, 13)),
        },
    ),
    (
        "association limit at its usage",
        LIMITED,
        21,
        {
            "reason": "AssocGrpGRES",
            "limit": ("account research", "GrpTRES=gres/gpu=8", 8, 2, (12, 15)),
            "suggestions": [],
            "planned_start": None,
        },
    ),
    (
        "dependency on a running job",
        DEPENDENT,
        22,
        {"reason": "Dependency", "dependencies": [("afterok", 12, Phase.ACTIVE)], "suggestions": []},
    ),
    (
        "more nodes than the partition has: unresolvable, fewer nodes start now",
        TOO_BIG,
        23,
        {
            "reason": "PartitionNodeLimit",
            "unresolvable": True,
            "problem": "it asks for 3 nodes; partition batch can give at most 2",
            "suggestions": [("--nodes=2", NOW, ("n1", "n2"))],
        },
    ),
    (
        "a shorter time limit fits the backfill hole",
        HOLE,
        2,
        {
            "reason": "Priority",
            "planned_start": NOW + 2 * HOUR,
            "ahead": (1,),
            "suggestions": [("--time=60", NOW, ("n2",))],
        },
    ),
    (
        "a -w node that is down",
        dataclasses.replace(
            IDLE,
            nodes=(IDLE.nodes[0], dataclasses.replace(IDLE.nodes[1], available=False)),
            pending=(job(26).nodelist("n2").time(10).obj(),),
        ),
        26,
        {"reason": "ReqNodeNotAvail", "required_unavailable": ("n2",), "planned_start": None},
    ),
    ("held by its user", HELD, 24, {"reason": "JobHeldUser", "unresolvable": True, "suggestions": []}),
    ("idle cluster: starts at the next pass", IDLE, 25, {"starts_now": True, "planned_start": NOW}),
]


@pytest.mark.parametrize(("snap", "job_id", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_explain(snap: Snapshot, job_id: int, want: dict[str, object]) -> None:
    found = explain(snap, job_id, NOW)
    assert found is not None
    for key, value in want.items():
        if key == "suggestions":
            assert [(s.change, s.start, s.nodes) for s in found.suggestions] == value
        elif key == "shortage":
            resource, needed, free, nodes, holders = value  # type: ignore[misc]
            short = next(s for s in found.shortages if s.resource == resource)
            assert (short.needed, short.free, short.nodes) == (needed, free, nodes)
            assert tuple(h.job_id for h in short.holders) == holders
        elif key == "limit":
            assert found.limit is not None
            lim = found.limit
            assert (lim.scope, lim.limit, lim.in_use, lim.asks, lim.job_ids) == value
        elif key == "dependencies":
            assert [(d.kind, d.job_id, d.phase) for d in found.dependencies] == value
        elif key == "problem":
            assert found.partition_problem == value
        elif key == "ahead":
            assert found.ahead is not None and found.ahead.job_ids == value
        else:
            assert getattr(found, key) == value, key


def test_holders_carry_their_end_and_user() -> None:
    found = explain(GPU_WAIT, 20, NOW)
    assert found is not None
    short = next(s for s in found.shortages if s.resource == "gpu")
    assert short.holders[0] == Holder(12, 1001, ("n1",), NOW + HOUR)


def test_the_job_ahead_outranks_it_by_age() -> None:
    found = explain(HOLE, 2, NOW)
    assert found is not None and found.ahead is not None
    assert found.ahead.top_job_id == 1
    assert [name for name, _, _ in found.ahead.factors] == ["age"]
    assert found.ahead.top_priority > found.ahead.priority


def test_each_suggestion_is_what_the_cycle_does_with_the_change() -> None:
    for snap, job_id, changed in (
        (GPU_WAIT, 20, {"--gres=gpu:2": job(20).gpus_per_node(2).time(60).obj()}),
        (HOLE, 2, {"--time=60": job(2).tasks(4).time(60).submitted(NOW).obj()}),
        (TOO_BIG, 23, {"--nodes=2": job(23).nodes(2).time(10).obj()}),
    ):
        found = explain(snap, job_id, NOW)
        assert found is not None and found.suggestions
        _check_suggestions(snap, found, changed)


def test_no_suggestion_when_nothing_starts_it_sooner() -> None:
    # the GPU job alone on a full cluster: every smaller shape still waits for the same end
    full = _snap(
        [_run(12, "n1", NOW + HOUR, cpus=16, gpus=4), _run(13, "n2", NOW + HOUR, cpus=16, gpus=4)],
        [job(20).gpus_per_node(4).time(60).obj()],
    )
    found = explain(full, 20, NOW)
    assert found is not None and found.planned_start == NOW + HOUR
    assert found.suggestions == ()


def test_an_unknown_or_running_job_has_no_explanation() -> None:
    assert explain(GPU_WAIT, 12, NOW) is None
    assert explain(GPU_WAIT, 99, NOW) is None


def test_gpu_type_is_kept_in_the_suggestion() -> None:
    typed = dataclasses.replace(
        GPU_WAIT,
        pending=(dataclasses.replace(job(20).time(60).obj(), gpus=GpuRequest(per_node=4, type="h100")),),
    )
    found = explain(typed, 20, NOW)
    assert found is not None
    assert [s.change for s in found.suggestions] == ["--gres=gpu:h100:2"]


def test_a_job_waiting_for_its_dependency_has_nobody_ahead_of_it() -> None:
    crowded = dataclasses.replace(DEPENDENT, pending=(job(3).time(10).obj(), *DEPENDENT.pending))
    found = explain(crowded, 22, NOW)
    assert found is not None and found.reason == "Dependency" and found.ahead is None


def test_under_a_limit_a_smaller_request_that_fits_is_suggested() -> None:
    # GrpTRES=gres/gpu=8 with 6 in use: 4 more wait for the limit, 2 start now
    snap = _snap(
        [
            _run(12, "n1", NOW + HOUR, cpus=1, gpus=4, assoc_id=RESEARCH),
            _run(15, "n2", NOW + HOUR, cpus=1, gpus=2, assoc_id=RESEARCH),
        ],
        [dataclasses.replace(job(21).gpus_per_node(4).time(60).obj(), assoc_id=RESEARCH)],
        nodes=["n1", "n2", "n3"],
        accounting=AccountingLimits(assocs=(AssocLimits(id=RESEARCH, account="research", grp_gpus=8),)),
    )
    found = explain(snap, 21, NOW)
    assert found is not None and found.reason == "AssocGrpGRES"
    assert found.limit is not None and (found.limit.in_use, found.limit.asks) == (6, 4)
    assert [(s.change, s.start) for s in found.suggestions] == [("--gres=gpu:2", NOW)]
