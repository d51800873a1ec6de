"""ctld's Why read (`shoal why`): the explainer's answer in words, for the job's owner or an operator."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.errors import SlurmError
from ctld.state import Caller
from shoal.v1 import controller_pb2 as pb
from tests.unit.ctld.harness import Harness, cluster, job

ALICE = Caller(uid=1000, gid=1000, host="login")
BOB = Caller(uid=1001, gid=1001, host="login")


def _harness(tmp_path: Path) -> tuple[Harness, int, int]:
    """Two 4-CPU nodes under backfill: job `big` (2 nodes, 1 h) runs; `small` waits for one node."""
    h = Harness.of(cluster().nodes(2).set(SchedulerType="sched/backfill"), tmp_path)
    big = h.submit(job().nodes(2).tasks(8).time(60), ALICE)
    h.schedule()
    small = h.submit(job().tasks(4).time(30), ALICE)
    h.schedule()
    return h, big, small


def test_a_pending_job_is_told_what_holds_it_and_when_it_starts(tmp_path: Path) -> None:
    h, big, small = _harness(tmp_path)
    resp = h.ctl.why(pb.WhyRequest(job_id=str(small)), ALICE)
    assert (resp.state, resp.reason) == ("PENDING", "Resources")
    assert resp.planned_start == h.ctl.state.jobs[big].end_time
    assert resp.planned_nodes == "n1"
    short = next(w for w in resp.waits_for if w.kind == "resources")
    assert (short.resource, short.needed, short.free, short.nodes) == ("cpu", 4, 0, "n[1-2]")
    assert [x.job_id for x in short.holders] == [big]
    assert f"Job {small} is PENDING, Reason: Resources." in resp.text
    assert f"Held by job {big}" in resp.text
    assert resp.suggestions == []  # nothing smaller starts before the running job ends


def test_a_running_job_says_where_and_until_when(tmp_path: Path) -> None:
    h, big, _ = _harness(tmp_path)
    resp = h.ctl.why(pb.WhyRequest(job_id=str(big)), ALICE)
    assert (resp.state, resp.nodes, resp.end_time) == ("RUNNING", "n[1-2]", h.ctl.state.jobs[big].end_time)
    assert "is RUNNING on n[1-2]" in resp.text and "(its time limit)" in resp.text


@pytest.mark.parametrize("job_id", ["999", "abc", ""], ids=["unknown", "not a number", "empty"])
def test_an_unknown_job_is_an_invalid_job_id(tmp_path: Path, job_id: str) -> None:
    h, _, _ = _harness(tmp_path)
    with pytest.raises(SlurmError, match="Invalid job id specified"):
        h.ctl.why(pb.WhyRequest(job_id=job_id), ALICE)


def test_another_users_job_is_not_visible_but_an_operator_sees_it(tmp_path: Path) -> None:
    h, _, small = _harness(tmp_path)
    with pytest.raises(SlurmError, match="Invalid job id specified"):
        h.ctl.why(pb.WhyRequest(job_id=str(small)), BOB)
    assert h.ctl.why(pb.WhyRequest(job_id=str(small)), Caller(uid=0, gid=0)).reason == "Resources"


def test_a_held_job_says_how_to_release_it(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(1), tmp_path)
    held = h.submit(job().held(), ALICE)
    h.schedule()
    resp = h.ctl.why(pb.WhyRequest(job_id=str(held)), ALICE)
    assert resp.reason == "JobHeldUser"
    assert [w.kind for w in resp.waits_for] == ["hold"]
    assert f"scontrol release {held}" in resp.text


def test_an_exclusive_job_is_told_which_nodes_are_in_use(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(2), tmp_path)
    busy = h.submit(job().tasks(1), ALICE)
    h.schedule()
    whole = h.submit(job().nodes(2).exclusive(), ALICE)
    h.schedule()
    resp = h.ctl.why(pb.WhyRequest(job_id=str(whole)), ALICE)
    short = next(w for w in resp.waits_for if w.kind == "resources")
    assert (short.resource, short.nodes) == ("node", "n1")
    assert "It needs whole idle nodes (--exclusive); n1 is in use." in resp.text
    assert f"Held by job {busy}" in resp.text
