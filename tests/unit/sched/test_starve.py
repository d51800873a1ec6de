"""shoal_short_first and starvation reservations (starve.py): the order and the reservations users see."""

from __future__ import annotations

import dataclasses

import pytest

from ctld.sched import starve
from ctld.sched.cycle import run_cycle
from ctld.sched.limits import FOREVER
from ctld.sched.model import UNLIMITED, Config, CycleResult, JobRequest, NodeAllocation, RunningJob
from tests.unit.sched.builders import job, node, partition, snapshot

NOW = 1_000_000  # after two days of waiting: a submit time is never negative
BACKFILL = Config(def_mem_per_cpu_mb=100, scheduler="sched/backfill", bf_resolution_s=1, bf_reservations=1)
PARTS = {"batch": partition("batch", nodes=["n1", "n2"], default_time_min=30)}


@pytest.mark.parametrize(
    ("limit", "short_first", "rank"),
    [
        (5, 10, 5),
        (10, 10, 10),  # at most M minutes counts
        (11, 10, starve.LONG),
        (UNLIMITED, 10, starve.LONG),
        (-1, 30, 30),  # no --time: the partition's DefaultTime
        (5, 0, starve.LONG),  # off
    ],
)
def test_short_rank(limit: int, short_first: int, rank: int) -> None:
    config = Config(short_first_min=short_first)
    assert starve.short_rank(job(1).time(limit).obj(), PARTS, config) == rank


@pytest.mark.parametrize(
    ("submit", "begin", "limit", "wait_min", "xfactor", "moment"),
    [
        (1000, 0, 60, 1440, 0, 1000 + 86400),
        (1000, 5000, 60, 1440, 0, 5000 + 86400),  # waiting counts from --begin
        (1000, 0, 60, 0, 10, 1000 + 9 * 3600),  # (wait + 60 min) / 60 min >= 10
        (1000, 0, 600, 1440, 10, 1000 + 86400),  # the earlier of the two
        (1000, 0, UNLIMITED, 0, 10, FOREVER),  # no limit: no expansion factor
        (1000, 0, 60, 0, 0, FOREVER),  # off
    ],
)
def test_starves_at(submit: int, begin: int, limit: int, wait_min: int, xfactor: int, moment: int) -> None:
    config = Config(starve_wait_min=wait_min, starve_xfactor=xfactor)
    request = job(1).submitted(submit).begin(begin).time(limit).obj()
    assert starve.starves_at(request, PARTS, config) == moment


def test_short_first_orders_the_queue() -> None:
    """Short jobs (limit <= 10 min) first, shortest first; the others keep submit order."""
    nodes = [node("n1").cpus(1).used(cpus=[0], mem=100).obj()]
    run = RunningJob(99, ("n1",), NOW + 60, allocation=(NodeAllocation("n1", (0,), 100, tasks=1),))
    pending = [job(1).time(60).obj(), job(2).time(10).obj(), job(3).time(5).obj(), job(4).time(20).obj()]
    config = dataclasses.replace(BACKFILL, short_first_min=10, bf_reservations=0)
    result = run_cycle(snapshot(nodes, pending=pending, running=[run], config=config), NOW)
    planned = sorted(result.planned, key=lambda j: result.planned[j].start_time)
    assert planned == [3, 2, 1, 4]


def _cycle(pending: list[JobRequest], config: Config) -> CycleResult:
    """n1 (4 CPUs) busy until NOW+600; n2 (4 CPUs) has 2 CPUs busy until NOW+3600, 2 free."""
    nodes = [
        node("n1").cpus(4).used(cpus=range(4), mem=400).obj(),
        node("n2").cpus(4).used(cpus=[0, 1], mem=200).obj(),
    ]
    runs = [
        RunningJob(98, ("n1",), NOW + 600, allocation=(NodeAllocation("n1", (0, 1, 2, 3), 400, tasks=4),)),
        RunningJob(99, ("n2",), NOW + 3600, allocation=(NodeAllocation("n2", (0, 1), 200, tasks=2),)),
    ]
    return run_cycle(snapshot(nodes, pending=pending, running=runs, config=config), NOW)


# Short jobs first: the head (4 CPUs for 5 minutes) holds EASY's one reservation on n1 at NOW+600.
# The wide job has waited two days for both nodes; a later long 2-CPU job fits on n2 now. Under
# EASY it starts there and the wide job waits until it ends (10 h); once the wide job starves, it
# gets a reservation of its own (both nodes at NOW+3600) and the long job must wait.
SHORT_HEAD = job(1).submitted(NOW - 10).nodes(1).tasks(4).time(5).obj()
OLD_WIDE = job(2).submitted(NOW - 2 * 86400).nodes(2).tasks(8).time(120).obj()
LATE_LONG = job(3).submitted(NOW - 5).nodes(1).tasks(2).time(600).obj()


@pytest.mark.parametrize(
    ("options", "started", "planned"),
    [
        ({}, [3], {1: NOW + 600}),
        ({"starve_wait_min": 1440}, [], {2: NOW + 3600, 1: NOW + 600}),
        ({"starve_xfactor": 10}, [], {2: NOW + 3600, 1: NOW + 600}),  # waited 48 h >= 9 x 2 h
        ({"starve_wait_min": 3 * 1440, "starve_xfactor": 30}, [3], {1: NOW + 600}),  # not starving yet
    ],
    ids=["easy", "starving-by-wait", "starving-by-xfactor", "not-yet"],
)
def test_a_starving_job_gets_a_reservation_of_its_own(
    options: dict[str, int], started: list[int], planned: dict[int, int]
) -> None:
    config = dataclasses.replace(BACKFILL, short_first_min=10, **options)
    result = _cycle([LATE_LONG, OLD_WIDE, SHORT_HEAD], config)
    assert [s.job_id for s in result.starts] == started
    assert {j: p.start_time for j, p in result.planned.items()} == planned


@pytest.mark.parametrize(("cap", "first"), [(0, [3, 2, 1]), (2, [3, 2]), (1, [3])])
def test_starve_max_keeps_the_oldest_starving_jobs(cap: int, first: list[int]) -> None:
    """shoal_starve_max=N: only the N oldest starving jobs move to the front (and get a reservation)."""
    config = Config(starve_wait_min=60, starve_max=cap)
    queue = [job(i).submitted(NOW - 7200 - 100 * i).obj() for i in (1, 2, 3)] + [job(4).submitted(NOW).obj()]
    ordered, starving = starve.starving_first(queue, PARTS, config, NOW)
    assert [j.job_id for j in ordered[: len(first)]] == first
    assert starving == frozenset(first)
    assert sorted(j.job_id for j in ordered) == [1, 2, 3, 4]


# shoal_wait_target: the old wide job (waited two days) is planned by count at NOW+3600, when n2's
# job ends. With a target it would miss, it gets its reservation (and the late long job waits); with
# one its plan meets, nothing is held for it and the cycle decides as EASY.
@pytest.mark.parametrize(
    ("target_min", "started", "planned"),
    [
        (2 * 1440, [], {2: NOW + 3600, 1: NOW + 600}),  # planned wait 2 d + 1 h > 2 d: urgent
        (3 * 1440, [3], {1: NOW + 600}),  # 2 d + 1 h <= 3 d: no reservation
    ],
    ids=["misses-target", "meets-target"],
)
def test_wait_target_reserves_only_for_a_job_that_would_miss_it(
    target_min: int, started: list[int], planned: dict[int, int]
) -> None:
    config = dataclasses.replace(
        BACKFILL, short_first_min=10, starve_wait_min=1440, wait_target_min=target_min
    )
    result = _cycle([LATE_LONG, OLD_WIDE, SHORT_HEAD], config)
    assert [s.job_id for s in result.starts] == started
    assert {j: p.start_time for j, p in result.planned.items()} == planned


# A convoy: two wide jobs that cannot run side by side. The older one's own plan (NOW+3600, a wait of
# 2 d + 1 h) meets a target of 2 d + 2 h; the younger one, planned after it (NOW+10800, 2 d + 2 h
# 58 min), does not. Both get a reservation, since the younger one's plan needs the older one's.
OLD_WIDE_2 = job(4).submitted(NOW - 2 * 86400 + 100).nodes(2).tasks(8).time(60).obj()


@pytest.mark.parametrize(
    ("target_min", "started", "planned"),
    [
        (2 * 1440 + 120, [], {2: NOW + 3600, 4: NOW + 3600 + 7200, 1: NOW + 600}),
        (2 * 1440 + 180, [3], {1: NOW + 600}),  # the younger one's plan meets it too: none held
    ],
    ids=["younger-misses", "both-meet"],
)
def test_wait_target_reserves_for_the_older_jobs_a_late_one_waits_for(
    target_min: int, started: list[int], planned: dict[int, int]
) -> None:
    config = dataclasses.replace(
        BACKFILL, short_first_min=10, starve_wait_min=1440, wait_target_min=target_min
    )
    result = _cycle([LATE_LONG, OLD_WIDE, OLD_WIDE_2, SHORT_HEAD], config)
    assert [s.job_id for s in result.starts] == started
    assert {j: p.start_time for j, p in result.planned.items()} == planned
