"""A node's failed Prolog or Epilog, in the controller (no daemons): drained node, held requeue."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.v1 import controller_pb2
from tests.unit.ctld.harness import Harness, cluster, job


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness.of(cluster().nodes(2, cpus=4), tmp_path)


def _report(h: Harness, job_id: int, **fields: object) -> None:
    info = h.ctl.jobs[job_id]
    h.ctl.complete_batch(
        controller_pb2.CompleteBatchRequest(
            node=info.batch_host, job_id=job_id, run=info.restarts, end_time=int(h.clock()), **fields
        )
    )  # type: ignore[arg-type]


def _node(h: Harness, name: str) -> controller_pb2.GetNodesResponse:
    return h.ctl.get_nodes(controller_pb2.GetNodesRequest(names=[name]))


def test_a_failed_prolog_drains_the_node_and_requeues_the_job_held(h: Harness) -> None:
    job_id = h.submit(job())
    h.schedule()
    _report(
        h,
        job_id,
        exit_code=1,
        launch_failed=True,
        prolog_failed=True,
        message="prolog /p failed (exit code 3)",
    )
    info = h.ctl.jobs[job_id]
    assert (h.state(job_id), h.reason(job_id), info.priority, info.restarts) == (
        "PENDING",
        "launch failed requeued held",
        0,
        1,
    )
    node = _node(h, "n1").nodes[0]
    assert (node.state, node.reason) == ("IDLE+DRAIN", "Prolog error")
    h.advance(121)  # past any requeue's wait (cred_expire + 1 s)
    assert h.schedule() == 0  # held: it does not start on n2 either
    assert h.update(job_id, "release") == []
    assert h.schedule() == 1 and h.ctl.jobs[job_id].batch_host == "n2"  # never on the drained node


def test_the_hold_survives_a_controller_restart(h: Harness) -> None:
    job_id = h.submit(job())
    h.schedule()
    _report(h, job_id, launch_failed=True, prolog_failed=True)
    h2 = h.restart()
    assert (h2.state(job_id), h2.reason(job_id)) == ("PENDING", "launch failed requeued held")
    assert _node(h2, "n1").nodes[0].reason == "Prolog error"


def test_a_failed_epilog_drains_the_node_and_the_job_keeps_its_result(h: Harness) -> None:
    job_id = h.submit(job())
    h.schedule()
    _report(h, job_id, exit_code=0, epilog_failed=True, hook_message="epilog /e failed (exit code 1)")
    assert h.state(job_id) == "COMPLETED"
    node = _node(h, "n1").nodes[0]
    assert (node.state, node.reason) == ("IDLE+DRAIN", "Epilog error")


def test_nohold_on_prolog_fail_requeues_without_the_hold(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(2, cpus=4).set(SchedulerParameters="nohold_on_prolog_fail"), tmp_path)
    job_id = h.submit(job())
    h.schedule()
    _report(h, job_id, launch_failed=True, prolog_failed=True)
    assert h.state(job_id) == "PENDING" and not h.ctl.jobs[job_id].held
