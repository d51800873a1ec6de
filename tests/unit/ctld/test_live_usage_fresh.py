"""sstat right after a step starts (issue 17): GetLiveUsage for a job pings at once the nodes whose last
answer lacks a young step of it, and answers with what they said (or, without an answer, after its wait)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.actions import PingAnswer
from ctld.live_usage import FRESH_AGE_S
from shoal.v1 import cluster_pb2, controller_pb2, node_pb2
from tests.unit.ctld.harness import Harness, cluster, job

BATCH = -4


def _sstat(h: Harness, job_id: int, wait_s: float = 1.0) -> list[tuple[int, int, str]]:
    got = h.ctl.live_usage(controller_pb2.GetLiveUsageRequest(job_ids=[job_id], steps=True), wait_s=wait_s)
    return [(s.job_id, s.step_id, s.node) for s in got.steps]


@pytest.fixture
def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Harness, int, str]:
    """A batch job just started on one of two nodes that answer every ping at once with its script."""
    h = Harness.of(cluster().nodes(2), tmp_path)
    j = h.submit(job())
    h.schedule()
    node = h.ctl.jobs[j].allocation[0].node

    def answer_at_once(info: cluster_pb2.NodeInfo, ctld_start_time: int, on_answer: PingAnswer) -> None:
        h.nodes.pings.append(info.name)
        steps = [cluster_pb2.StepUsage(job_id=j, step_id=BATCH, ntasks=1)] if info.name == node else []
        on_answer(info.name, True, [j], node_pb2.NodePingResponse(running_jobs=[j], steps=steps))

    monkeypatch.setattr(h.nodes, "ping", answer_at_once)
    h.nodes.pings.clear()
    return h, j, node


def test_a_just_started_job_is_asked_of_its_node_at_once(started: tuple[Harness, int, str]) -> None:
    h, j, node = started
    assert _sstat(h, j) == [(j, BATCH, node)]
    assert h.nodes.pings == [node]  # only the job's node
    assert _sstat(h, j) == [(j, BATCH, node)]
    assert h.nodes.pings == [node]  # it has told of the step: not asked again


def test_other_reads_and_old_steps_ping_nobody(started: tuple[Harness, int, str]) -> None:
    h, j, _node = started
    h.ctl.live_usage(controller_pb2.GetLiveUsageRequest(gpus=True))  # restd's GPU listing
    h.advance(FRESH_AGE_S + 1)
    assert _sstat(h, j) == []  # no longer young: the periodic pings tell of it
    assert h.nodes.pings == []


def test_a_node_that_does_not_answer_costs_the_wait_only(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1), tmp_path)
    j = h.submit(job())
    h.schedule()
    h.nodes.pings.clear()
    assert _sstat(h, j, wait_s=0.05) == []  # the recording harness never answers by itself
    assert h.nodes.pings == ["n1"]
