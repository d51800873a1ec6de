"""scontrol suspend/resume in the controller, stepped by hand: who may, which jobs, what the nodes are
asked, and the time a suspended job spends not counting as run time or against its limit (the real
22.05: EndTime moves by the suspended time on resume, RunTime stops while suspended)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.controller import Caller
from shoal.states import run_seconds
from shoal.v1 import jobs_pb2
from tests.unit.ctld.harness import Harness, Launch, Suspend, Terminate, cluster, job

ALICE = Caller(uid=1001, gid=1001, host="login")


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness.of(cluster().nodes(2, cpus=4), tmp_path)


def running(h: Harness, builder: object = None) -> int:
    job_id = h.submit(job().time(1).nodes(2) if builder is None else builder)  # type: ignore[arg-type]
    h.schedule()
    h.effects()
    return job_id


def test_suspend_stops_the_job_on_every_node_and_resume_continues_it(h: Harness) -> None:
    job_id = running(h)
    assert h.update(job_id, "suspend") == []
    assert (h.state(job_id), h.effects()) == (
        "SUSPENDED",
        [Suspend("n1", job_id, True), Suspend("n2", job_id, True)],
    )
    assert h.update(job_id, "suspend") == []  # again: no error, nothing more asked (22.05)
    assert h.effects() == []
    assert h.update(job_id, "resume") == []
    assert (h.state(job_id), h.effects()) == (
        "RUNNING",
        [Suspend("n1", job_id, False), Suspend("n2", job_id, False)],
    )
    assert h.update(job_id, "resume") == ["Job is not suspended"]


def test_suspended_time_is_neither_run_time_nor_counted_against_the_limit(h: Harness) -> None:
    job_id = running(h)
    info = h.ctl.jobs[job_id]
    end = info.end_time
    h.advance(20)
    h.update(job_id, "suspend")
    h.advance(100)  # past the 1-minute limit in wall time
    h.tick()
    assert h.state(job_id) == "SUSPENDED"
    assert (run_seconds(info, int(h.clock())), info.pre_suspend_secs) == (20, 20)
    h.update(job_id, "resume")
    assert info.end_time == end + 100
    h.advance(39)
    h.tick()
    assert (h.state(job_id), run_seconds(info, int(h.clock()))) == ("RUNNING", 59)
    h.advance(1)
    h.tick()
    assert h.state(job_id) == "COMPLETING"
    assert Terminate("n1", job_id, "timeout") in h.effects()


@pytest.mark.parametrize(
    ("setup", "caller", "message"),
    [
        ("running", ALICE, "Access/permission denied"),  # even the job's owner: operators only
        ("pending", None, "Job is pending execution"),
        ("ended", None, "Job/step already completing or completed"),
    ],
    ids=["user", "pending", "ended"],
)
def test_refusals(h: Harness, setup: str, caller: Caller | None, message: str) -> None:
    job_id = h.submit(job().time(1), caller=ALICE)
    if setup != "pending":
        h.schedule()
    if setup == "ended":
        h.finish(job_id)
    assert h.update(job_id, "suspend", **({"caller": caller} if caller else {})) == [message]  # type: ignore[arg-type]
    assert h.state(job_id) == {"running": "RUNNING", "pending": "PENDING", "ended": "COMPLETED"}[setup]


def test_an_unknown_job_gets_22_05s_answer(h: Harness) -> None:
    assert h.update(99, "resume") == ["Unexpected message received"]


def test_a_cancelled_suspended_job_ends_without_its_suspended_time(h: Harness) -> None:
    job_id = running(h)
    h.advance(10)
    h.update(job_id, "suspend")
    h.advance(50)
    h.cancel(job_id)
    assert h.state(job_id) == "COMPLETING"
    assert Terminate("n1", job_id, "cancel") in h.effects()
    h.finish(job_id, exit_signal=15)
    info = h.ctl.jobs[job_id]
    assert (h.state(job_id), run_seconds(info, int(h.clock()))) == ("CANCELLED", 10)


def test_a_suspended_job_on_a_failed_node_is_requeued_and_its_next_run_starts_afresh(h: Harness) -> None:
    job_id = running(h, job().time(1))
    h.update(job_id, "suspend")
    h.silence("n1")
    for _ in range(7):  # past SlurmdTimeout=60
        h.advance(10)
        h.tick()
    info = h.ctl.jobs[job_id]
    assert (h.state(job_id), info.restarts) == ("PENDING", 1)
    assert (info.suspend_time, info.suspended_secs, info.pre_suspend_secs) == (0, 0, 0)


def preempting(tmp_path: Path) -> Harness:
    """PreemptMode=SUSPEND,GANG under preempt/partition_prio: urgent (tier 10) over low, one 4-CPU node."""
    builder = (
        cluster()
        .nodes(1, cpus=4)
        .set(PreemptType="preempt/partition_prio", PreemptMode="SUSPEND,GANG", DefMemPerCPU=1000)
        .partition("low", "n1", Default="YES")
        .partition("urgent", "n1", PriorityTier="10")
    )
    return Harness.of(builder, tmp_path)


def urgent(minutes: int) -> object:
    builder = job().cpus(4).time(minutes)
    builder.spec.partition = "urgent"
    return builder


def test_a_higher_tier_suspends_the_low_job_which_resumes_when_it_ends(tmp_path: Path) -> None:
    h = preempting(tmp_path)
    low = running(h, job().cpus(4).time(2))
    info = h.ctl.jobs[low]
    end = info.end_time
    h.advance(30)
    high = h.submit(urgent(1))  # type: ignore[arg-type]
    h.schedule()
    # the low job is stopped in place and the urgent one starts on its CPUs in the same cycle
    assert (h.state(low), h.state(high), h.reason(low)) == ("SUSPENDED", "RUNNING", "None")
    assert h.effects() == [Suspend("n1", low, True), Launch("n1", high)]
    assert info.preempt_time == 0  # 22.05: PreemptTime=None for a suspended job
    h.advance(100)  # past the low job's 2-minute limit in wall time: it is not counted
    h.tick()
    assert h.state(low) == "SUSPENDED"
    h.finish(high)
    h.schedule()
    assert (h.state(low), run_seconds(info, int(h.clock()))) == ("RUNNING", 30)
    assert Suspend("n1", low, False) in h.effects()
    assert info.end_time == end + 100
    h.advance(89)
    h.tick()
    assert h.state(low) == "RUNNING"  # 119 s run of its 120
    h.advance(1)
    h.tick()
    assert h.state(low) == "COMPLETING"


def test_an_operators_suspend_is_not_resumed_by_the_scheduler(tmp_path: Path) -> None:
    h = preempting(tmp_path)
    low = running(h, job().cpus(4).time(2))
    h.update(low, "suspend")
    h.effects()
    waiting = h.submit(job().cpus(4).time(1))
    h.schedule()
    assert (h.state(low), h.state(waiting)) == ("SUSPENDED", "PENDING")  # it keeps what it holds
    assert h.effects() == []


def test_a_suspended_job_survives_a_controller_restart_and_still_resumes(tmp_path: Path) -> None:
    h = preempting(tmp_path)
    low = running(h, job().cpus(4).time(2))
    high = h.submit(urgent(1))  # type: ignore[arg-type]
    h.schedule()
    h = h.restart()
    assert h.state(low) == "SUSPENDED"
    h.finish(high)
    h.schedule()
    assert h.state(low) == "RUNNING"


def test_steps_of_a_suspended_job_show_running_with_their_time_stopped(h: Harness) -> None:
    """22.05's squeue -s and scontrol show step: State=RUNNING, TIME without the suspension."""
    from cli.stepshow import run_time
    from shoal.v1 import controller_pb2

    job_id = running(h, job().time(5))

    def batch_step() -> tuple[str, int]:
        reply = h.ctl.get_steps(controller_pb2.GetStepsRequest(step_ids=[str(job_id)]))
        (step,) = reply.steps
        return jobs_pb2.JobState.Name(step.state), run_time(step, reply.now)

    h.advance(20)
    h.update(job_id, "suspend")
    h.advance(30)
    assert batch_step() == ("RUNNING", 20)
    h.update(job_id, "resume")
    h.advance(10)
    assert batch_step() == ("RUNNING", 30)
