"""A big array's pending tasks past what a cycle could start or reserve for stay out of the cycle
(ctld/array_window.py) and decide nothing: the same starts, reasons, priorities and planned starts as
a controller that shows the cycle every task (the scheduler's shortcuts off), over random clusters,
arrays (a throttle, a task updated to ask otherwise), jobs around them, both priority plugins,
partition preemption, bf_max_job_array_resv and starving-job reservations, cycle after cycle as jobs
end.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctld.errors import SlurmError
from ctld.sched import placement
from shoal.v1 import common_pb2, controller_pb2, jobs_pb2
from tests.unit.ctld.harness import ROOT, Harness, cluster, job


@contextmanager
def window(on: bool) -> Iterator[None]:
    """The window and every other shortcut on (as ctld runs), or all off (every task seen)."""
    before = placement.SHORTCUTS
    placement.SHORTCUTS = on
    try:
        yield
    finally:
        placement.SHORTCUTS = before


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, object]:
    nodes = [draw(st.sampled_from([2, 4, 8])) for _ in range(draw(st.integers(1, 3)))]
    conf: dict[str, str | int] = {
        "SchedulerType": "sched/backfill",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core_Memory",
        "DefMemPerCPU": 100,
    }
    params = ["bf_resolution=1"]
    if draw(st.booleans()):
        params.append(f"bf_max_job_array_resv={draw(st.sampled_from([0, 2, 5]))}")
    if draw(st.integers(0, 3)) == 0:
        params.append("shoal_starve_wait=1")
    conf["SchedulerParameters"] = ",".join(params)
    if draw(st.booleans()):
        conf.update(PriorityType="priority/multifactor", PriorityWeightAge=1000, PriorityWeightJobSize=1000)
    preempt = draw(st.booleans())
    if preempt:
        conf.update(PreemptType="preempt/partition_prio", PreemptMode="REQUEUE")
    jobs = []  # (kind, cpus, minutes, partition, tasks, throttle, odd task)
    for _ in range(draw(st.integers(0, 4))):
        jobs.append(("job", draw(st.integers(1, 4)), draw(st.sampled_from([5, 30])), "low", 0, 0, -1))
    for _ in range(draw(st.integers(1, 2))):
        tasks = draw(st.integers(2, 70))
        jobs.append(
            (
                "array",
                draw(st.integers(1, 2)),
                draw(st.sampled_from([5, 10, 60])),
                draw(st.sampled_from(["low", "high"])) if preempt else "low",
                tasks,
                draw(st.sampled_from([0, 0, 3])),
                draw(st.integers(-1, tasks - 1)),
            )
        )
        for _ in range(draw(st.integers(0, 2))):
            jobs.append(("job", draw(st.integers(1, 8)), draw(st.sampled_from([1, 5, 120])), "low", 0, 0, -1))
    ends = [draw(st.integers(0, 6)) for _ in range(6)]
    return {"nodes": nodes, "conf": conf, "jobs": jobs, "ends": ends, "preempt": preempt}


def _run(scenario: dict[str, object], directory: Path) -> list[list[tuple[object, ...]]]:
    """Each cycle's view of every job, as squeue and scontrol show it."""
    built = cluster()
    for cpus in scenario["nodes"]:  # type: ignore[attr-defined]
        built.nodes(1, cpus=cpus, mem=64000)
    names = ",".join(built.names)
    built.partition("low", names, Default="YES", PriorityTier="1").partition("high", names, PriorityTier="2")
    h = Harness.of(built.set(**scenario["conf"]), directory)  # type: ignore[arg-type]
    h.schedule()
    for kind, cpus, minutes, partition, tasks, throttle, odd in scenario["jobs"]:  # type: ignore[attr-defined]
        spec = job().cpus(cpus).time(minutes)
        spec.spec.partition = partition
        if kind == "array":
            spec.spec.array = f"0-{tasks - 1}" + (f"%{throttle}" if throttle else "")
        try:
            first = h.submit(spec)
        except SlurmError:  # more CPUs a task than a node has: refused alike with or without the window
            continue
        if kind == "array" and odd >= 0:  # one task asks otherwise (A_T: that task alone)
            update = controller_pb2.UpdateJobRequest(
                job_ids=[f"{first}_{odd}"],
                action="update",
                fields=[common_pb2.KeyValue(key="TimeLimit", value="2")],
            )
            assert not [r.message for r in h.ctl.update_job(update, ROOT).results if r.code]
        h.advance(1)
    views = []
    for ends in scenario["ends"]:  # type: ignore[attr-defined]
        h.schedule()
        views.append(
            [
                (
                    j.job_id,
                    j.state,
                    j.state_reason,
                    j.priority,
                    j.start_time,
                    j.sched_nodes,
                    j.batch_host,
                    tuple(a.node for a in j.allocation),
                )
                for j in sorted(h.ctl.jobs.values(), key=lambda j: j.job_id)
            ]
        )
        running = sorted(j.job_id for j in h.ctl.jobs.values() if j.state == jobs_pb2.RUNNING)
        for job_id in running[:ends]:
            h.finish(job_id)
        h.advance(30)
        h.tick()
    h.ctl.store.close()
    return views


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_tasks_left_out_of_a_cycle_change_no_answer(scenario: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory() as on_dir, tempfile.TemporaryDirectory() as off_dir:
        with window(True):
            seen = _run(scenario, Path(on_dir))
        with window(False):
            every = _run(scenario, Path(off_dir))
    for cycle, (got, want) in enumerate(zip(seen, every, strict=True)):
        assert got == want, f"cycle {cycle}"


def test_a_500_task_array_on_one_node_runs_in_task_order_every_pending_task_alike(tmp_path: Path) -> None:
    """squeue's view of a long array behind a 4-CPU node: one reason, one priority and, past the 20
    reserved tasks, one expected start for all pending tasks; the tasks start in order."""
    conf = {
        "SchedulerType": "sched/backfill",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core_Memory",
        "DefMemPerCPU": 100,
        "SchedulerParameters": "bf_resolution=1",
        "MaxArraySize": 1001,
        "PriorityType": "priority/multifactor",
        "PriorityWeightAge": 1000,
    }
    h = Harness.of(cluster().nodes(1, cpus=4, mem=8000).set(**conf), tmp_path)
    spec = job().time(10)
    spec.spec.array = "0-499"
    first = h.submit(spec)
    ids = sorted(j.job_id for j in h.ctl.jobs.values() if j.array_job_id == first)
    started: list[int] = []
    for _ in range(5):
        h.schedule()
        now = int(h.clock())
        running = sorted(j.job_id for j in h.ctl.jobs.values() if j.state == jobs_pb2.RUNNING)
        started += [i for i in running if i not in started]
        pending = [h.ctl.jobs[i] for i in ids if h.ctl.jobs[i].state == jobs_pb2.PENDING]
        assert {j.state_reason for j in pending} == {"Resources"}
        assert len({j.priority for j in pending}) == 1 and pending[0].priority > 0
        assert {j.last_sched_eval for j in pending} == {now}
        assert [j.start_time for j in pending[:20]] == [now + 600 * (k // 4 + 1) for k in range(20)]
        assert {j.start_time for j in pending[20:]} == {now + 600 * 5}
        assert {j.sched_nodes for j in pending[20:]} == {""}
        for job_id in running:
            h.finish(job_id)
        h.advance(60)
    assert started == ids[:20]
