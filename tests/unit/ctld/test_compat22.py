"""Controller answers measured on the running Slurm 22.05 (the replay's controller-side differences,
issue 13): who may touch another user's job, unknown dependencies, requeue's wait, TimeLimit raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.controller import Caller
from shoal.v1 import controller_pb2
from tests.unit.ctld.harness import Harness, cluster, job

ALICE = Caller(uid=1001, gid=1001, host="login")
BOB = Caller(uid=1002, gid=1002, host="login")


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness.of(cluster().nodes(2, cpus=4), tmp_path)


@pytest.mark.parametrize(
    ("action", "fields", "message"),
    [
        ("hold", {}, "Invalid user id"),
        ("uhold", {}, "Invalid user id"),
        ("release", {}, "Invalid user id"),
        ("update", {"TimeLimit": "5"}, "Invalid user id"),
        ("update", {"Comment": "x"}, "Invalid user id"),
        ("requeue", {}, "Access/permission denied"),
        ("requeuehold", {}, "Access/permission denied"),
    ],
)
def test_bob_touching_alices_job_gets_22_05s_refusal(
    h: Harness, action: str, fields: dict[str, str], message: str
) -> None:
    job_id = h.submit(job().held(), caller=ALICE)
    assert h.update(job_id, action, caller=BOB, **fields) == [message]
    assert h.reason(job_id) == "JobHeldUser"


@pytest.mark.parametrize(
    "dependency", ["afterok:999999", "after:999998", "afterany:999997", "afternotok:999996", "singleton"]
)
def test_a_dependency_on_a_job_never_seen_is_accepted_and_the_job_runs(h: Harness, dependency: str) -> None:
    spec = job()
    spec.spec.dependency = dependency
    job_id = h.submit(spec, caller=ALICE)
    h.schedule()
    assert h.state(job_id) == "RUNNING"


def test_a_dependency_that_does_not_parse_is_still_refused(h: Harness) -> None:
    spec = job()
    spec.spec.dependency = "afterok:abc"
    with pytest.raises(Exception, match="Job dependency problem"):
        h.submit(spec, caller=ALICE)


def _requeued(h: Harness, action: str) -> int:
    job_id = h.submit(job(), caller=ALICE)
    h.schedule()
    assert h.update(job_id, action, caller=ALICE) == []
    h.finish(job_id, exit_signal=15)  # the run's end, reported by its node
    h.schedule()
    return job_id


def test_a_requeued_job_waits_cred_expire_plus_one_second_as_begintime(h: Harness) -> None:
    """The real one: requeue at 13:10:49 showed EligibleTime=13:12:50 and Reason=BeginTime meanwhile."""
    job_id = _requeued(h, "requeue")
    info = h.ctl.jobs[job_id]
    assert (h.state(job_id), h.reason(job_id)) == ("PENDING", "BeginTime")
    assert info.eligible_time == info.spec.begin_time == int(h.clock()) + 121
    h.advance(119)
    h.schedule()
    assert (h.state(job_id), h.reason(job_id)) == ("PENDING", "BeginTime")
    h.advance(3)
    h.schedule()
    assert h.state(job_id) == "RUNNING"


def test_requeuehold_shows_its_own_reason_until_released(h: Harness) -> None:
    job_id = _requeued(h, "requeuehold")
    assert (h.state(job_id), h.reason(job_id), h.ctl.jobs[job_id].priority) == (
        "PENDING",
        "job requeued in held state",
        0,
    )
    h.advance(600)
    h.schedule()
    assert h.reason(job_id) == "job requeued in held state"
    assert h.update(job_id, "release", caller=ALICE) == []
    h.schedule()
    assert h.state(job_id) == "RUNNING"


def test_a_job_requeued_by_its_nodes_failure_waits_as_well(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(2, cpus=4).set(SlurmdTimeout=30), tmp_path)
    job_id = h.submit(job().requeue(), caller=ALICE)
    h.schedule()
    node = h.ctl.jobs[job_id].batch_host
    h.silence(node)
    h.advance(31)
    h.tick()
    info = h.ctl.jobs[job_id]
    assert (h.state(job_id), h.reason(job_id), info.restarts) == ("PENDING", "BeginTime", 1)
    assert info.spec.begin_time == int(h.clock()) + 121


@pytest.fixture
def two_partitions(tmp_path: Path) -> Harness:
    """As the real one: batch (MaxTime=UNLIMITED, the default) and debug (MaxTime=01:00:00, DefaultTime=30)."""
    return Harness.of(
        cluster()
        .nodes(2, cpus=4)
        .partition("batch", "n[1-2]", Default="YES")
        .partition("debug", "n[1-2]", MaxTime="01:00:00", DefaultTime="30"),
        tmp_path,
    )


def _pending(h: Harness, partition: str, minutes: int = -1) -> int:
    spec = job().time(minutes) if minutes != -1 else job()
    spec.spec.partition = partition
    spec.spec.begin_time = int(h.clock()) + 3600  # pending, as --begin=now+1hour
    return h.submit(spec, caller=ALICE)


@pytest.mark.parametrize(
    ("partition", "start", "new", "allowed"),
    [
        ("debug", 10, "20", True),
        ("debug", 10, "1:00:00", True),
        ("debug", 10, "2:00:00", False),
        ("debug", 10, "1:00:01", False),  # rounds up to 61 minutes
        ("debug", 10, "UNLIMITED", False),
        ("debug", -1, "2:00:00", False),  # DefaultTime=30, MaxTime=1:00:00
        ("debug", -1, "45", True),
        ("batch", 10, "2-00:00:00", True),
        ("batch", 10, "UNLIMITED", True),
    ],
)
def test_a_user_may_raise_a_pending_jobs_time_limit_up_to_the_partitions_max_time(
    two_partitions: Harness, partition: str, start: int, new: str, allowed: bool
) -> None:
    h = two_partitions
    job_id = _pending(h, partition, start)
    before = h.ctl.jobs[job_id].time_limit_min
    errors = h.update(job_id, "update", caller=ALICE, TimeLimit=new)
    assert errors == ([] if allowed else ["Access/permission denied"])
    assert (h.ctl.jobs[job_id].time_limit_min != before) == allowed


def test_a_user_may_only_lower_a_running_jobs_time_limit(two_partitions: Harness) -> None:
    h = two_partitions
    job_id = h.submit(job().time(10), caller=ALICE)
    h.schedule()
    assert h.update(job_id, "update", caller=ALICE, TimeLimit="20") == ["Access/permission denied"]
    assert h.update(job_id, "update", caller=ALICE, TimeLimit="5") == []
    assert h.ctl.jobs[job_id].time_limit_min == 5


def test_a_batch_job_whose_output_file_cannot_be_opened_ends_failed_0_53(h: Harness) -> None:
    """22.05: sbatch -o /nonexistent/x.out ends FAILED, Reason=JobLaunchFailure, ExitCode=0:53."""
    job_id = h.submit(job(), caller=ALICE)
    h.schedule()
    h.ctl.complete_batch(
        controller_pb2.CompleteBatchRequest(
            node="n1",
            job_id=job_id,
            exit_code=0,
            exit_signal=53,
            launch_failed=True,
            message="Could not open stdout file /nonexistent/x.out: No such file or directory",
            end_time=int(h.clock()),
        )
    )
    info = h.ctl.jobs[job_id]
    assert (h.state(job_id), h.reason(job_id), info.exit_code, info.exit_signal) == (
        "FAILED",
        "JobLaunchFailure",
        0,
        53,
    )


def test_any_other_launch_failure_still_ends_1_0(h: Harness) -> None:
    job_id = h.submit(job(), caller=ALICE)
    h.schedule()
    h.ctl.complete_batch(
        controller_pb2.CompleteBatchRequest(
            node="n1",
            job_id=job_id,
            exit_code=1,
            launch_failed=True,
            message="execve(): x: Permission denied",
            end_time=int(h.clock()),
        )
    )
    assert (h.state(job_id), h.ctl.jobs[job_id].exit_code, h.ctl.jobs[job_id].exit_signal) == ("FAILED", 1, 0)


def test_an_operators_hold_of_its_own_job_is_an_admin_hold(h: Harness) -> None:
    """Scenario 244 (22.05): root's `scontrol hold` of its own job shows JobHeldAdmin, its uhold
    JobHeldUser; a user's hold of its own job stays a user hold (scenario 180)."""
    own = h.submit(job().name("hr"))  # root's
    assert h.update(own, "hold") == []
    assert (h.reason(own), h.ctl.jobs[own].held_by_admin) == ("JobHeldAdmin", True)
    assert h.update(own, "uhold") == []
    assert (h.reason(own), h.ctl.jobs[own].held_by_admin) == ("JobHeldUser", False)
    alices = h.submit(job(), caller=ALICE)
    assert h.update(alices, "hold", caller=ALICE) == []
    assert h.reason(alices) == "JobHeldUser"


def _pending_array(h: Harness, tasks: int) -> int:
    b = job().name("arrs")
    b.spec.array = f"0-{tasks - 1}"
    b.spec.begin_time = int(h.clock()) + 3600
    return h.submit(b, caller=ALICE)


def test_a_task_changed_on_its_own_is_split_off_its_array_for_good(h: Harness) -> None:
    """Scenario 245 (22.05): `scontrol hold A_2` and `hold`+`release A_4` give tasks 2 and 4 records of
    their own, kept after the release and across a restart; holding the whole array splits none."""
    array = _pending_array(h, 6)
    assert h.update(f"{array}_2", "hold", caller=ALICE) == []
    assert h.update(f"{array}_4", "hold", caller=ALICE) == []
    assert h.update(f"{array}_4", "release", caller=ALICE) == []
    tasks = {j.array_task_id: j for j in h.ctl.jobs.values() if j.array_job_id == array}
    assert {t for t, j in tasks.items() if j.array_split} == {2, 4}
    h = h.restart()
    assert {j.array_task_id for j in h.ctl.jobs.values() if j.array_job_id == array and j.array_split} == {
        2,
        4,
    }
    other = _pending_array(h, 3)
    assert h.update(other, "hold", caller=ALICE) == []
    assert h.update(other, "release", caller=ALICE) == []
    assert not any(j.array_split for j in h.ctl.jobs.values() if j.array_job_id == other)
    # a task's own job id names that task alone: it splits too
    own_id = next(j.job_id for j in h.ctl.jobs.values() if j.array_job_id == other and j.array_task_id == 1)
    assert h.update(own_id, "hold", caller=ALICE) == []
    assert h.ctl.jobs[own_id].array_split
