"""A pending job's request with its association is kept from cycle to cycle (ctld.accounting's
attach) and made anew when the association cache moves the job to another association: the
scheduler then applies the new association's limits."""

from __future__ import annotations

from pathlib import Path

from shoal.v1 import accounting_pb2 as pb
from tests.unit.ctld.harness import Harness, cluster, job

NONE = {"grp_jobs": -1, "max_submit_jobs": -1, "grp_submit_jobs": -1, "max_wall_min": -1, "grp_wall_min": -1}


def cache(version: int, user_assoc: int, max_jobs: int) -> pb.GetLimitsResponse:
    """root's association in account `a` has id `user_assoc` and MaxJobs `max_jobs` (-1: none)."""
    return pb.GetLimitsResponse(
        version=version,
        changed=True,
        associations=[
            pb.Association(id=1, account="root", max_jobs=-1, **NONE),
            pb.Association(id=2, account="a", parent="root", max_jobs=-1, **NONE),
            pb.Association(id=user_assoc, account="a", user="root", max_jobs=max_jobs, **NONE),
        ],
        qos=[
            pb.Qos(
                name="normal",
                max_submit_per_user=-1,
                max_jobs_per_user=-1,
                grp_jobs=-1,
                max_wall_min=-1,
                grp_wall_min=-1,
            )
        ],
        users=[pb.AcctUser(name="root", default_account="a")],
    )


def test_a_new_association_for_the_job_applies_at_the_next_cycle(tmp_path: Path) -> None:
    builder = (
        cluster()
        .nodes(1, cpus=4)
        .set(
            AccountingStorageType="accounting_storage/slurmdbd",
            AccountingStorageEnforce="associations,limits",
        )
    )
    h = Harness.of(builder, tmp_path)
    h.ctl.accounting.push(cache(1, user_assoc=4, max_jobs=-1))
    busy = h.submit(job().tasks(4).time(10))
    waiting = h.submit(job().tasks(4).time(10))
    h.schedule()
    h.schedule()  # the second cycle reuses the kept request
    assert (h.state(busy), h.state(waiting), h.reason(waiting)) == ("RUNNING", "PENDING", "Resources")
    # the association is deleted and added again (a new id), now with MaxJobs=1
    h.ctl.accounting.push(cache(2, user_assoc=6, max_jobs=1))
    h.schedule()
    assert h.reason(waiting) == "AssocMaxJobsLimit"
