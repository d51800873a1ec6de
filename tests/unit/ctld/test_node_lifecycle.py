"""Nodes that stop answering and come back, in the controller, stepped by hand, with Slurm 22.05's rules.

SlurmdTimeout=60 here. A node silent for longer goes DOWN ("Not responding"); its jobs end NODE_FAIL,
or are requeued when they may be (JobRequeue=1 by default, --requeue), and run again elsewhere.
ReturnToService decides whether it comes back by itself once it answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.v1 import common_pb2, controller_pb2
from tests.unit.ctld.harness import ROOT, Harness, Launch, Terminate, cluster, job


def _silent_past_timeout(h: Harness, name: str) -> None:
    h.silence(name)
    for _ in range(7):  # 70 s of pings every 10 s, none answered
        h.advance(10)
        h.tick()


def test_a_node_silent_past_slurmd_timeout_goes_down_not_responding(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(2), tmp_path)
    h.silence("n1")
    for _ in range(5):
        h.advance(10)
        h.tick()
    assert h.node_state("n1") == "IDLE+NOT_RESPONDING"  # sinfo: idle*, still in service
    _silent_past_timeout(h, "n1")
    assert h.node_state("n1").startswith("DOWN")
    assert h.ctl.nodes["n1"].info.reason == "Not responding"
    assert h.node_state("n2") == "IDLE"


def test_a_job_that_may_not_be_requeued_ends_node_fail(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(2), tmp_path)
    job_id = h.submit(job().requeue(False))
    h.schedule()
    _silent_past_timeout(h, "n1")
    assert h.state(job_id) == "NODE_FAIL"


def test_a_requeueable_job_of_a_failed_node_runs_again_elsewhere(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(2), tmp_path)
    job_id = h.submit(job())  # JobRequeue=1 (the default): may be requeued
    h.schedule()
    assert h.effects() == [Launch("n1", job_id)]
    _silent_past_timeout(h, "n1")
    info = h.ctl.jobs[job_id]
    assert (h.state(job_id), info.restarts) == ("PENDING", 1)
    h.advance(600)
    h.schedule()
    assert (h.state(job_id), h.ctl.jobs[job_id].batch_host) == ("RUNNING", "n2")


@pytest.mark.parametrize(
    ("return_to_service", "back"),
    [(0, False), (1, True), (2, True)],
    ids=["ReturnToService=0", "ReturnToService=1", "ReturnToService=2"],
)
def test_a_down_node_that_answers_again_returns_as_return_to_service_says(
    tmp_path: Path, return_to_service: int, back: bool
) -> None:
    h = Harness.of(cluster().nodes(2).set(ReturnToService=return_to_service), tmp_path)
    _silent_past_timeout(h, "n1")
    h.answer("n1")
    h.advance(10)
    h.tick()
    assert (h.node_state("n1") == "IDLE") is back
    if not back:
        assert h.node_state("n1").startswith("DOWN")


def test_an_admin_down_node_stays_down_when_it_answers(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(2).set(ReturnToService=1), tmp_path)
    h.ctl.update_node(
        controller_pb2.UpdateNodeRequest(
            nodes="n1",
            fields=[
                common_pb2.KeyValue(key="State", value="DOWN"),
                common_pb2.KeyValue(key="Reason", value="bad dimm"),
            ],
        ),
        ROOT,
    )
    h.advance(10)
    h.tick()
    assert h.node_state("n1").startswith("DOWN")


def test_a_node_that_answers_again_is_told_to_kill_what_it_runs_of_ended_jobs_then_returns(
    tmp_path: Path,
) -> None:
    """Frozen past SlurmdTimeout, thawed: its job ended NODE_FAIL, but its processes still run there.
    ctld has them killed, and gives the node back only once nothing of them is left (its CPUs)."""
    h = Harness.of(cluster().nodes(2), tmp_path)
    job_id = h.submit(job().requeue(False))
    h.schedule()
    _silent_past_timeout(h, "n1")
    assert h.state(job_id) == "NODE_FAIL"
    h.effects()
    h.answer("n1")  # still runs the script: the recorder keeps it in n1's list
    h.advance(10)
    h.tick()
    assert any(isinstance(e, Terminate) and (e.node, e.job_id) == ("n1", job_id) for e in h.effects())
    assert h.node_state("n1").startswith("DOWN")
    h.node_killed("n1", job_id)
    h.advance(10)
    h.tick()
    assert h.node_state("n1") == "IDLE"


def test_a_node_that_registers_again_is_told_to_kill_jobs_that_ended_meanwhile(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(2), tmp_path)
    job_id = h.submit(job().requeue(False))
    h.schedule()
    _silent_past_timeout(h, "n1")
    assert h.state(job_id) == "NODE_FAIL"
    h.effects()
    h.answer("n1")
    h.register("n1", running=(job_id,))  # its stepd still runs the script
    assert Terminate("n1", job_id, "orphan") in h.effects()


def test_a_ctld_restarted_within_its_start_second_is_a_new_one_to_its_nodes(tmp_path: Path) -> None:
    """Nodes register again when a ctld they have not registered with pings them; they tell one ctld
    from the next by the run number it hands out. The start second told them apart only from a second
    on: a ctld killed and started again at once was the old one to its nodes, which never registered
    (test_resilience's kill -9 and restart, once in six runs)."""
    h = Harness.of(cluster().nodes(1), tmp_path)
    first = h.register("n1").ctld_start_time
    restarted = h.restart()  # the same (fake) clock: the same second
    assert restarted.register("n1").ctld_start_time not in (0, first)
