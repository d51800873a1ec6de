"""The job state machine in the controller, stepped by hand: submit, start, end, time limit, cancel, hold, requeue.

Each test drives the real Controller through the harness (a steppable clock, node agents as data) and
asserts what squeue/scontrol would show and what ctld asked of the nodes.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from ctld.controller import Caller
from tests.unit.ctld.harness import Harness, Launch, Signal, Terminate, cluster, job

ALICE = Caller(uid=1001, gid=1001, host="login")


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness.of(cluster().nodes(2, cpus=4), tmp_path)


def test_a_job_starts_on_an_idle_node_and_completes(h: Harness) -> None:
    job_id = h.submit(job())
    assert (h.state(job_id), h.effects()) == ("PENDING", [])
    assert h.schedule() == 1
    assert (h.state(job_id), h.effects()) == ("RUNNING", [Launch("n1", job_id)])
    h.finish(job_id)
    assert h.state(job_id) == "COMPLETED"
    assert h.node_state("n1") == "IDLE"


@pytest.mark.parametrize(
    ("exit_code", "exit_signal", "state"),
    [
        (0, 0, "COMPLETED"),
        (3, 0, "FAILED"),
        (0, signal.SIGKILL, "FAILED"),
    ],
    ids=["exit-0", "exit-3", "killed"],
)
def test_how_the_script_ended_sets_the_state(
    h: Harness, exit_code: int, exit_signal: int, state: str
) -> None:
    job_id = h.submit(job())
    h.schedule()
    h.finish(job_id, exit_code, exit_signal)
    info = h.ctl.jobs[job_id]
    assert (h.state(job_id), info.exit_code, info.exit_signal) == (state, exit_code, exit_signal)


def test_the_time_limit_ends_the_job_as_timeout_after_its_node_says_so(h: Harness) -> None:
    job_id = h.submit(job().time(1))
    h.schedule()
    h.effects()
    h.advance(59)
    h.tick()
    assert (h.state(job_id), h.effects()) == ("RUNNING", [])
    h.advance(1)
    h.tick()
    assert (h.state(job_id), h.effects()) == ("COMPLETING", [Terminate("n1", job_id, "timeout")])
    h.finish(job_id, exit_signal=signal.SIGTERM)
    assert h.state(job_id) == "TIMEOUT"


@pytest.mark.parametrize("scheduler", ["sched/builtin", "sched/backfill"])
def test_a_timed_out_job_keeps_its_cpus_until_its_node_says_it_is_gone(
    tmp_path: Path, scheduler: str
) -> None:
    """COMPLETING past its end, a job still holds its CPUs (its processes are being killed): the next
    job waits for them (backfill once planned them free at the old job's end, and started it on them)."""
    h = Harness.of(cluster().nodes(1, cpus=2).set(SchedulerType=scheduler), tmp_path)
    first = h.submit(job().tasks(2).time(1))
    h.schedule()
    waiting = h.submit(job().tasks(2).time(1))
    h.advance(60)
    h.tick()
    h.effects()
    assert (h.state(first), h.schedule(), h.state(waiting), h.effects()) == ("COMPLETING", 0, "PENDING", [])
    assert h.reason(waiting) == "Resources"
    h.finish(first, exit_signal=signal.SIGTERM)
    assert (h.state(first), h.schedule(), h.state(waiting)) == ("TIMEOUT", 1, "RUNNING")
    assert h.effects()[-1] == Launch("n1", waiting)


def test_signal_before_the_time_limit_is_sent_once(h: Harness) -> None:
    job_id = h.submit(job().time(2).signal(signal.SIGUSR1, 60))
    h.schedule()
    h.effects()
    h.advance(59)
    h.tick()
    assert h.effects() == []
    h.advance(1)
    h.tick()
    h.advance(10)
    h.tick()
    assert h.effects() == [Signal("n1", job_id, signal.SIGUSR1, False)]


def test_cancelling_a_pending_job_touches_no_node(h: Harness) -> None:
    job_id = h.submit(job().nodes(3))  # more nodes than there are: it never starts
    h.schedule()
    h.cancel(job_id)
    assert (h.state(job_id), h.effects()) == ("CANCELLED", [])


def test_cancelling_a_running_job_terminates_it_on_its_node(h: Harness) -> None:
    job_id = h.submit(job().nodes(2))
    h.schedule()
    h.effects()
    h.cancel(job_id)
    assert {e.node for e in h.effects() if isinstance(e, Terminate) and e.job_id == job_id} == {"n1", "n2"}
    h.finish(job_id, exit_signal=signal.SIGTERM)
    assert h.state(job_id) == "CANCELLED"


def test_a_user_cannot_cancel_another_users_job(h: Harness) -> None:
    job_id = h.submit(job())
    result = h.cancel(job_id, caller=ALICE)
    assert result.results[0].code != 0
    assert h.state(job_id) == "PENDING"


def test_a_held_job_never_starts_until_released(h: Harness) -> None:
    job_id = h.submit(job().held())
    assert h.schedule() == 0
    assert (h.state(job_id), h.reason(job_id)) == ("PENDING", "JobHeldUser")
    assert h.update(job_id, "release") == []
    assert h.schedule() == 1
    assert h.state(job_id) == "RUNNING"


def test_jobs_wait_for_cpus_and_start_when_they_are_released(h: Harness) -> None:
    first = h.submit(job().nodes(2).cpus(4))
    second = h.submit(job().cpus(4))
    h.schedule()
    assert (h.state(first), h.state(second), h.reason(second)) == ("RUNNING", "PENDING", "Resources")
    h.finish(first)
    h.schedule()
    assert h.state(second) == "RUNNING"


def test_scontrol_requeue_runs_the_job_again_with_one_more_restart(h: Harness) -> None:
    job_id = h.submit(job())
    h.schedule()
    h.effects()
    assert h.update(job_id, "requeue") == []
    assert (h.state(job_id), h.effects()) == ("COMPLETING", [Terminate("n1", job_id, "requeue")])
    h.finish(job_id, exit_signal=signal.SIGTERM)  # the first run's end, reported by its node
    h.schedule()
    assert (h.state(job_id), h.reason(job_id), h.ctl.jobs[job_id].restarts) == ("PENDING", "BeginTime", 1)
    h.advance(600)  # a requeued job waits before it is eligible again
    h.schedule()
    assert (h.state(job_id), h.effects()) == ("RUNNING", [Launch("n1", job_id)])


def test_a_finished_job_is_forgotten_after_min_job_age(h: Harness) -> None:
    job_id = h.submit(job())
    h.schedule()
    h.finish(job_id)
    h.advance(299)
    h.tick()
    assert h.state(job_id) == "COMPLETED"
    h.advance(1)
    h.tick()
    assert h.state(job_id) == "PURGED"


def test_a_restarted_controller_keeps_every_job(h: Harness) -> None:
    running = h.submit(job())
    pending = h.submit(job().nodes(3))
    h.schedule()
    again = h.restart()
    assert (again.state(running), again.state(pending)) == ("RUNNING", "PENDING")
    assert again.submit(job()) == pending + 1  # ids are never reused


def test_a_time_limit_raised_by_an_admin_moves_the_timeout(h: Harness) -> None:
    job_id = h.submit(job().time(1))
    h.schedule()
    assert h.update(job_id, "update", TimeLimit="3") == []
    h.advance(120)
    h.tick()
    assert h.state(job_id) == "RUNNING"
    h.advance(60)
    h.tick()
    assert h.state(job_id) == "COMPLETING"


def test_the_nodes_asked_for_and_excluded_are_on_the_record(h: Harness) -> None:
    """scontrol's ReqNodeList/ExcNodeList and squeue's %n/%x read them (they were always empty)."""
    wanted = job()
    wanted.spec.nodelist, wanted.spec.exclude = "n1", "n2"
    job_id = h.submit(wanted)
    info = h.ctl.jobs[job_id]
    assert (list(info.req_nodes), list(info.exc_nodes)) == (["n1"], ["n2"])
