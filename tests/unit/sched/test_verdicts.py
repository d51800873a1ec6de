"""The core's verdicts: Pend (waits for room; `busy` = running jobs hold it, the one case that
invites preemption) or Unresolvable (no plan, no preemption), each with the word squeue shows."""

from __future__ import annotations

import pytest

from ctld.sched.cycle import run_cycle
from ctld.sched.model import Pend, Unresolvable, Waiting
from tests.unit.sched.builders import job, node, snapshot

FULL = (node("n1").used(cpus=range(16)).obj(),)  # every CPU of the one node held by a running job


@pytest.mark.parametrize(
    ("pending", "want"),
    [
        ([job(1).tasks(16).obj()], {1: Pend("Resources", busy=True)}),
        ([job(1).tasks(16).obj(), job(2).obj()], {1: Pend("Resources", busy=True), 2: Pend("Priority")}),
        ([job(1).hold().obj()], {1: Unresolvable("JobHeldUser")}),
        ([job(1).begin(5000).obj()], {1: Unresolvable("BeginTime")}),
        ([job(1).nodelist("n9").obj()], {1: Unresolvable("ReqNodeNotAvail")}),
    ],
    ids=["no room now", "behind a higher job", "held", "begins later", "names a node it cannot use"],
)
def test_cycle_verdicts(pending: list, want: dict[int, Waiting]) -> None:  # type: ignore[type-arg]
    result = run_cycle(snapshot(FULL, pending=pending), 1000)
    assert result.verdicts == want
    assert result.reasons == {job_id: verdict.reason for job_id, verdict in want.items()}
