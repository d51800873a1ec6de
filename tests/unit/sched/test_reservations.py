"""Advance reservations in the core: reserved nodes, --reservation jobs, backfill around future ones."""

from __future__ import annotations

import dataclasses

import pytest

from ctld.sched.cycle import run_cycle
from ctld.sched.model import Config, JobRequest, Reservation, RunningJob, Snapshot
from ctld.sched.placement import earliest_start
from ctld.sched.reservations import DAY, is_active, overlaps, roll
from tests.unit.sched.builders import job, node, running, snapshot

NOW = 100_000
HOUR = 3600
WEEK = 7 * DAY
BACKFILL = Config(def_mem_per_cpu_mb=100, scheduler="sched/backfill", bf_resolution_s=1)


def resv(
    name: str = "R",
    start: int = NOW - 60,
    end: int = NOW + HOUR,
    nodes: tuple[str, ...] = ("n1",),
    *flags: str,
) -> Reservation:
    return Reservation(
        name=name, start_time=start, end_time=end, nodes=frozenset(nodes), flags=frozenset(flags)
    )


def in_resv(builder_job: JobRequest, name: str = "R") -> JobRequest:
    return dataclasses.replace(builder_job, reservation=name)


def _snap(
    pending: list[JobRequest],
    reservations: tuple[Reservation, ...],
    busy: tuple[str, ...] = (),
    config: Config = BACKFILL,
) -> Snapshot:
    """Two 4-CPU nodes; `busy` ones are held whole by job 99 until NOW + 2h."""
    nodes = [
        node(n).cpus(4).obj() if n not in busy else node(n).cpus(4).used(range(4), 400).obj()
        for n in ("n1", "n2")
    ]
    held: list[RunningJob] = [running(99, busy, NOW + 2 * HOUR)] if busy else []
    snap = snapshot(nodes, pending=pending, running=held, config=config)
    return dataclasses.replace(snap, reservations=reservations)


def _where(result_starts: tuple[object, ...]) -> dict[int, tuple[str, ...]]:
    return {s.job_id: tuple(a.node for a in s.allocation) for s in result_starts}  # type: ignore[attr-defined]


CASES = [
    # id, pending, reservations, busy nodes, where jobs start, pending reasons
    (
        "others keep off an active reservation's nodes",
        [job(1).tasks(4).obj(), job(2).tasks(4).obj()],
        (resv(),),
        (),
        {1: ("n2",)},
        {2: "Resources"},
    ),
    (
        "a reservation job runs on its nodes only",
        [in_resv(job(1).tasks(1).obj())],
        (resv(),),
        (),
        {1: ("n1",)},
        {},
    ),
    (
        "a reservation job waits for its nodes, not elsewhere",
        [in_resv(job(1).tasks(4).obj()), job(2).tasks(4).obj()],
        (resv(),),
        ("n1",),
        {2: ("n2",)},
        {1: "Resources"},
    ),
    (
        "a job waiting outside the reservation does not hold back one in it",
        [job(1).tasks(4).obj(), job(2).tasks(4).obj(), in_resv(job(3).tasks(1).obj())],
        (resv(),),
        (),
        {1: ("n2",), 3: ("n1",)},
        {2: "Resources"},
    ),
    (
        "a reservation job waits for the reservation to start",
        [in_resv(job(1).tasks(1).obj())],
        (resv(start=NOW + HOUR, end=NOW + 2 * HOUR),),
        (),
        {},
        {1: "Reservation"},
    ),
    (
        "FLEX lets a reservation job start early and elsewhere",
        [in_resv(job(1).tasks(4).obj())],
        (resv("R", NOW + HOUR, NOW + 2 * HOUR, ("n1",), "FLEX"),),
        ("n1",),
        {1: ("n2",)},
        {},
    ),
    (
        "MAINT: others wait with Slurm's maintenance reason",
        [job(1).nodes(2).tasks(2).obj()],
        (resv("R", NOW - 60, NOW + HOUR, ("n1",), "MAINT"),),
        (),
        {},
        {1: "ReqNodeNotAvail, Reserved for maintenance"},
    ),
    (
        "too few nodes outside reservations: Slurm's maintenance reason for any reservation",
        [job(1).tasks(1).time(120).obj()],
        (resv(start=NOW + HOUR, end=NOW + 2 * HOUR, nodes=("n1", "n2")),),
        (),
        {},
        {1: "ReqNodeNotAvail, Reserved for maintenance"},
    ),
    (
        "-w on a reserved node: may be reserved for another job",
        [job(1).nodelist("n1").obj()],
        (resv(),),
        (),
        {},
        {1: "ReqNodeNotAvail, May be reserved for other job"},
    ),
    ("a deleted reservation", [in_resv(job(1).obj(), "gone")], (resv(),), (), {}, {1: "ReservationDeleted"}),
    (
        "a job ending before a future reservation may use its nodes",
        [job(1).tasks(4).time(30).obj(), job(2).tasks(4).time(30).obj()],
        (resv(start=NOW + HOUR, end=NOW + 2 * HOUR),),
        (),
        {1: ("n1",), 2: ("n2",)},
        {},
    ),
    (
        "a job overlapping a future reservation keeps off its nodes",
        [job(1).tasks(4).time(90).obj(), job(2).tasks(4).time(90).obj()],
        (resv(start=NOW + HOUR, end=NOW + 2 * HOUR),),
        (),
        {1: ("n2",)},
        {2: "Resources"},
    ),
    (
        "unlimited jobs never start on nodes with a future reservation",
        [job(1).tasks(4).obj(), job(2).tasks(4).obj()],
        (resv(start=NOW + DAY, end=NOW + DAY + 60),),
        (),
        {1: ("n2",)},
        {2: "Resources"},
    ),
    (
        "a DAILY reservation's next day counts too",
        [job(1).tasks(4).time(23 * 60).obj()],
        (resv("R", NOW - 2 * HOUR, NOW - HOUR, ("n1", "n2"), "DAILY"),),
        (),
        {},
        {1: "ReqNodeNotAvail, Reserved for maintenance"},
    ),
]


@pytest.mark.parametrize(
    ("pending", "reservations", "busy", "starts", "reasons"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_reservations_in_the_cycle(
    pending: list[JobRequest],
    reservations: tuple[Reservation, ...],
    busy: tuple[str, ...],
    starts: dict[int, tuple[str, ...]],
    reasons: dict[int, str],
) -> None:
    result = run_cycle(_snap(pending, reservations, busy), NOW)
    assert _where(result.starts) == starts
    assert result.reasons == reasons


def test_future_reservation_blocks_backfill_of_a_long_job_but_not_a_short_one() -> None:
    """One node, reserved from NOW+1h: a 2-hour job must wait until the reservation ends."""
    one = (node("n1").cpus(4).obj(),)
    reservation = resv(start=NOW + HOUR, end=NOW + 3 * HOUR)
    pending = [job(1).tasks(4).time(120).obj(), job(2).tasks(4).time(30).obj()]
    snap = dataclasses.replace(snapshot(one, pending=pending, config=BACKFILL), reservations=(reservation,))
    result = run_cycle(snap, NOW)
    assert _where(result.starts) == {2: ("n1",)}
    assert result.planned[1].start_time == NOW + 3 * HOUR
    # --test-only answers the same question
    alone = dataclasses.replace(snap, pending=(pending[0],))
    found = earliest_start(pending[0], alone, NOW)
    assert found is None or found[0] >= NOW + 3 * HOUR


def test_a_waiting_reservation_job_is_planned_at_the_reservation_start() -> None:
    reservation = resv(start=NOW + HOUR, end=NOW + 2 * HOUR)
    result = run_cycle(_snap([in_resv(job(1).tasks(2).time(30).obj())], (reservation,)), NOW)
    assert result.reasons == {1: "Reservation"}
    assert result.planned[1].start_time == NOW + HOUR and result.planned[1].nodes == ("n1",)


def test_a_reservation_job_starts_once_it_is_active() -> None:
    reservation = resv(start=NOW + HOUR, end=NOW + 2 * HOUR)
    result = run_cycle(_snap([in_resv(job(1).tasks(2).obj())], (reservation,)), NOW + HOUR)
    assert _where(result.starts) == {1: ("n1",)}


ROLL = [
    ("still on", resv(start=NOW - 60, end=NOW + 60), NOW, (NOW - 60, NOW + 60)),
    ("over: gone", resv(start=NOW - 120, end=NOW), NOW, None),
    (
        "DAILY moves to the next day",
        resv("R", NOW - 120, NOW, ("n1",), "DAILY"),
        NOW,
        (NOW - 120 + DAY, NOW + DAY),
    ),
    (
        "DAILY skips missed days",
        resv("R", NOW - 120, NOW, ("n1",), "DAILY"),
        NOW + 2 * DAY + 5,
        (NOW - 120 + 3 * DAY, NOW + 3 * DAY),
    ),
    # NOW is a Friday (1970-01-02, UTC)
    (
        "WEEKLY moves a week",
        resv("R", NOW - 120, NOW, ("n1",), "WEEKLY"),
        NOW,
        (NOW - 120 + WEEK, NOW + WEEK),
    ),
    (
        "WEEKDAY goes from Friday to Monday",
        resv("R", NOW - 120, NOW, ("n1",), "WEEKDAY"),
        NOW,
        (NOW - 120 + 3 * DAY, NOW + 3 * DAY),
    ),
    (
        "WEEKEND made on a Friday starts on Saturday",
        resv("R", NOW - 120, NOW + 60, ("n1",), "WEEKEND"),
        NOW,
        (NOW - 120 + DAY, NOW + 60 + DAY),
    ),
]


@pytest.mark.parametrize(("reservation", "now", "want"), [c[1:] for c in ROLL], ids=[c[0] for c in ROLL])
def test_expired_reservations_go_and_daily_ones_roll_forward(
    reservation: Reservation, now: int, want: tuple[int, int] | None
) -> None:
    got = roll(reservation, now)
    assert (None if got is None else (got.start_time, got.end_time)) == want


def test_weekly_and_weekday_reservations_hold_their_nodes_on_their_days_only() -> None:
    weekly = resv("R", NOW, NOW + HOUR, ("n1",), "WEEKLY")
    assert is_active(weekly, NOW + 10) and is_active(weekly, NOW + 2 * WEEK + 10)
    assert not is_active(weekly, NOW + DAY + 10)
    assert not overlaps(weekly, NOW + HOUR, NOW + WEEK)
    assert overlaps(weekly, NOW + HOUR, NOW + WEEK + 1)
    weekday = resv("R", NOW, NOW + HOUR, ("n1",), "WEEKDAY")  # Friday
    assert is_active(weekday, NOW + 10)
    assert not is_active(weekday, NOW + DAY + 10) and not is_active(
        weekday, NOW + 2 * DAY + 10
    )  # the weekend
    assert is_active(weekday, NOW + 3 * DAY + 10)  # Monday
    assert not overlaps(weekday, NOW + HOUR, NOW + 3 * DAY)  # a run over the weekend does not meet it
    weekend = resv("R", NOW, NOW + HOUR, ("n1",), "WEEKEND")
    assert [is_active(weekend, NOW + k * DAY + 10) for k in range(4)] == [False, True, True, False]
    # days are the site's: at UTC-5, Friday 03:46 UTC is Thursday 22:46, so the weekend comes a day later
    west = Reservation(
        name="R",
        start_time=NOW,
        end_time=NOW + HOUR,
        nodes=frozenset({"n1"}),
        flags=frozenset({"WEEKDAY"}),
        utc_offset_s=-5 * HOUR,
    )  # Thursday 22:46 in UTC-5
    assert is_active(west, NOW + 10) and is_active(west, NOW + DAY + 10)  # Thursday, Friday there
    assert not is_active(west, NOW + 2 * DAY + 10)  # Saturday there


def test_daily_reservation_is_active_every_day_from_its_start() -> None:
    daily = resv("R", NOW, NOW + HOUR, ("n1",), "DAILY")
    assert not is_active(daily, NOW - 1)
    assert is_active(daily, NOW + 5 * DAY + 10)
    assert not is_active(daily, NOW + 5 * DAY + HOUR)
    assert overlaps(daily, NOW + HOUR, NOW + DAY + 1)
    assert not overlaps(daily, NOW + HOUR, NOW + DAY)
