"""Controller answers measured on the running Slurm 22.05 (the replay's controller-side differences,
issue 13): who may touch another user's job, unknown dependencies, requeue's wait, TimeLimit raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.controller import Caller
from tests.unit.ctld.harness import Harness, cluster, job

ALICE = Caller(uid=1001, gid=1001, host="login")
BOB = Caller(uid=1002, gid=1002, host="login")


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness.of(cluster().nodes(2, cpus=4), tmp_path)


@pytest.mark.parametrize(("action", "fields", "message"), [
    ("hold", {}, "Invalid user id"),
    ("uhold", {}, "Invalid user id"),
    ("release", {}, "Invalid user id"),
    ("update", {"TimeLimit": "5"}, "Invalid user id"),
    ("update", {"Comment": "x"}, "Invalid user id"),
    ("requeue", {}, "Access/permission denied"),
    ("requeuehold", {}, "Access/permission denied"),
])
def test_bob_touching_alices_job_gets_22_05s_refusal(h: Harness, action: str, fields: dict[str, str],
                                                     message: str) -> None:
    job_id = h.submit(job().held(), caller=ALICE)
    assert h.update(job_id, action, caller=BOB, **fields) == [message]
    assert h.reason(job_id) == "JobHeldUser"


@pytest.mark.parametrize("dependency", ["afterok:999999", "after:999998", "afterany:999997",
                                        "afternotok:999996", "singleton"])
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
