"""ctld/decisions.py: what the core's decisions do to records and node usage (shared by ctld and shoal sim)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ctld import decisions, snapshot
from ctld.record import JobRecord
from ctld.sched import model as m
from shoal.v1 import jobs_pb2
from tests.unit.ctld.harness import Harness, cluster, job

NODE = m.Node(name="n1", cpus=8, real_memory_mb=8000)
ALLOC = m.NodeAllocation(node="n1", cpu_ids=(0, 1), mem_mb=500, gpu_indices=(3,), tasks=2)
START = m.Start(job_id=5, partition="batch", allocation=(ALLOC,), time_limit_min=10, exclusive=False)


def test_a_start_on_its_record_and_what_the_core_then_sees() -> None:
    job = JobRecord(job_id=5, state=jobs_pb2.PENDING)
    decisions.apply_start(job, START, 1000, {"n1": "h100"})
    assert (job.state, job.start_time, job.end_time, job.nodes, job.batch_host) == (
        jobs_pb2.RUNNING,
        1000,
        1600,
        "n1",
        "n1",
    )
    assert (job.num_cpus, job.mem_mb, job.num_gpus, job.allocation[0].gpu_type) == (2, 500, 1, "h100")
    assert job.tres_alloc == "cpu=2,mem=500M,node=1,billing=2,gres/gpu=1"
    view = decisions.running_view(job)
    assert (view.job_id, view.nodes, view.end_time, view.allocation) == (5, ("n1",), 1600, (ALLOC,))


def test_node_usage_taken_and_given_back() -> None:
    held = decisions.take(NODE, ALLOC, exclusive=True)
    assert held.usage == m.NodeUsage(
        cpu_ids=frozenset({0, 1}), mem_mb=500, gpu_indices=frozenset({3}), exclusive=True, jobs=1
    )
    assert decisions.give_back(held, ALLOC).usage == m.NodeUsage()


def test_a_time_limit_cuts_a_run_short() -> None:
    assert decisions.run_end(100, 30, 1) == (130, False)
    assert decisions.run_end(100, 90, 1) == (160, True)
    assert decisions.run_end(0, 90, -2) == (90, False)  # UNLIMITED
    assert decisions.limit_end(100, -2) == 0


def test_an_arrays_pending_tasks_share_one_reason() -> None:
    tasks = {i: JobRecord(job_id=i, array_job_id=1, state=jobs_pb2.PENDING) for i in (2, 3)}
    result = m.CycleResult(verdicts={2: m.Pend("Priority"), 3: m.Pend("Resources")}, priorities={2: 7, 3: 8})
    decisions.apply_verdicts(tasks, result, 50)
    assert [(j.state_reason, j.priority, j.last_sched_eval) for j in tasks.values()] == [
        ("Priority", 7, 50),
        ("Priority", 8, 50),
    ]


def test_the_sims_running_usage_is_what_ctld_sums_from_its_records(tmp_path: Path) -> None:
    # ctld sums node usage from every active record each cycle (snapshot.usage); shoal sim takes and
    # gives back per start and end (decisions.take / give_back): the two must agree
    h = Harness.of(cluster().nodes(3, cpus=4, mem=8000), tmp_path)
    ids = [h.submit(job().cpus(c).time(10)) for c in (1, 2, 3, 1)] + [h.submit(job().nodes(2).cpus(2))]
    h.schedule()
    state = h.ctl.state
    running = [state.jobs[i] for i in ids if state.jobs[i].state == jobs_pb2.RUNNING]
    assert len(running) >= 3
    nodes = {name: m.Node(name=name, cpus=4, real_memory_mb=8000) for name in state.nodes}
    for rec in running:
        for alloc in decisions.running_view(rec).allocation:
            nodes[alloc.node] = decisions.take(nodes[alloc.node], alloc, exclusive=not rec.oversubscribe)
    summed = snapshot.usage(state)
    for name, node in nodes.items():
        assert replace(summed[name], users=frozenset(), user_exclusive=False) == node.usage, name
    first = decisions.running_view(running[0])
    for alloc in first.allocation:
        nodes[alloc.node] = decisions.give_back(nodes[alloc.node], alloc)
    h.finish(running[0].job_id)
    summed = snapshot.usage(state)
    for name, node in nodes.items():
        assert replace(summed[name], users=frozenset(), user_exclusive=False) == node.usage, name
