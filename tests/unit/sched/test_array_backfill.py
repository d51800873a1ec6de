"""A pending array under sched/backfill: bf_max_job_array_resv caps the tasks that get a reservation.

As 22.05 (SchedulerParameters bf_max_job_array_resv, default 20), backfill reserves room in the future
for at most that many tasks of one array; its later tasks hold nothing, so a lower job may plan into
the room they would have taken, and they still start at once wherever they fit now. A task past the
cap shows the start of its array's last reserved task and no SCHEDNODES, as the one pending record of
the array does in 22.05 (squeue --start shows a start time for every pending task).
"""

from __future__ import annotations

import dataclasses

import pytest

from ctld.sched.cycle import run_cycle
from ctld.sched.model import Config, JobRequest, NodeAllocation, RunningJob
from ctld.sched_config import sched_config
from shoal.conf.slurm import parse_slurm_conf
from tests.unit.sched.builders import job, node, snapshot

NOW = 10_000
HOUR = 3600
BACKFILL = Config(def_mem_per_cpu_mb=100, scheduler="sched/backfill", bf_resolution_s=1)
ARRAY = 100  # the array's job id; its tasks are jobs 101, 102, ...


def _tasks(count: int, cpus: int, minutes: int) -> list[JobRequest]:
    return [
        job(ARRAY + 1 + task).tasks(cpus).time(minutes).array(ARRAY, task).submitted(1).obj()
        for task in range(count)
    ]


def _cycle(pending: list[JobRequest], config: Config, nodes: int = 1):  # type: ignore[no-untyped-def]
    """`nodes` 4-CPU nodes; a job holds all of n1 until NOW + 1 h."""
    cluster = [node(f"n{i}").cpus(4).obj() for i in range(1, nodes + 1)]
    cluster[0] = node("n1").cpus(4).used(cpus=range(4), mem=400).obj()
    run = RunningJob(99, ("n1",), NOW + HOUR, allocation=(NodeAllocation("n1", (0, 1, 2, 3), 400, tasks=4),))
    return run_cycle(snapshot(cluster, pending=pending, running=[run], config=config), NOW)


LATER = job(900).tasks(4).time(60).submitted(2).obj()  # a lower job behind the array, same ask

CASES = [
    # id, bf_max_job_array_resv, tasks, {job: (planned start, SCHEDNODES)}
    (
        "default 20: five tasks each reserved, the lower job after them",
        None,
        5,
        {
            **{ARRAY + 1 + t: (NOW + (t + 1) * HOUR, ("n1",)) for t in range(5)},
            900: (NOW + 6 * HOUR, ("n1",)),
        },
    ),
    (
        "2: the third task on holds nothing; the lower job takes the room after the second",
        2,
        5,
        {
            ARRAY + 1: (NOW + HOUR, ("n1",)),
            ARRAY + 2: (NOW + 2 * HOUR, ("n1",)),
            **{ARRAY + 1 + t: (NOW + 2 * HOUR, ()) for t in range(2, 5)},
            900: (NOW + 3 * HOUR, ("n1",)),
        },
    ),
    (
        "0: no task reserved, nothing shown for them; the lower job right after the running one",
        0,
        5,
        {900: (NOW + HOUR, ("n1",))},
    ),
    (
        "the 21st task of 25 gets no reservation of its own",
        None,
        25,
        {
            **{ARRAY + 1 + t: (NOW + (t + 1) * HOUR, ("n1",)) for t in range(20)},
            **{ARRAY + 1 + t: (NOW + 20 * HOUR, ()) for t in range(20, 25)},
            900: (NOW + 21 * HOUR, ("n1",)),
        },
    ),
]


@pytest.mark.parametrize(("limit", "count", "planned"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_reservations_per_array(
    limit: int | None, count: int, planned: dict[int, tuple[int, tuple[str, ...]]]
) -> None:
    config = BACKFILL if limit is None else dataclasses.replace(BACKFILL, bf_max_job_array_resv=limit)
    result = _cycle([*_tasks(count, 4, 60), LATER], config)
    assert result.starts == ()
    assert {j: (p.start_time, p.nodes) for j, p in result.planned.items()} == planned


def test_tasks_past_the_cap_still_start_where_they_fit_now() -> None:
    """Two nodes, n1 busy for an hour: a big job reserves both from then; with no reservation for any
    task, the short tasks fill n2 now (they end before the big job starts), the rest wait."""
    big = job(1).nodes(2).tasks(8).time(60).obj()
    tasks = _tasks(6, 1, 30)
    result = _cycle([big, *tasks], dataclasses.replace(BACKFILL, bf_max_job_array_resv=0), nodes=2)
    assert [s.job_id for s in result.starts] == [101, 102, 103, 104]
    assert all(s.by_backfill for s in result.starts)
    assert result.reasons == {1: "Resources", 105: "Priority", 106: "Priority"}
    assert set(result.planned) == {1}


@pytest.mark.parametrize(
    ("words", "cap"),
    [((), 20), (("bf_max_job_array_resv=3",), 3), (("bf_max_job_array_resv=x",), 20)],
    ids=["default", "set", "not a number: the default"],
)
def test_the_cap_from_scheduler_parameters(words: tuple[str, ...], cap: int, tmp_path) -> None:  # type: ignore[no-untyped-def]
    params = f"SchedulerParameters={','.join(words)}\n" if words else ""
    cfg = parse_slurm_conf(
        f"ClusterName=t\nSlurmctldHost=h\nStateSaveLocation={tmp_path}\n{params}"
        "NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1\n"
    )
    assert sched_config(cfg).bf_max_job_array_resv == cap
