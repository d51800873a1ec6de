"""sshare -l's TRES columns as ctld computes them: a running job's remaining TRES-minutes count in its
association and every one above it; GrpTRESMins is printed in the tracked TRES' order."""

from __future__ import annotations

from ctld import priority_report
from ctld.record import JobRecord
from ctld.sched.fairshare import ShareAssoc
from shoal.v1 import jobs_pb2

TREE = [
    ShareAssoc(id=1, parent_id=0, account="root"),
    ShareAssoc(id=2, parent_id=1, account="physics"),
    ShareAssoc(id=3, parent_id=2, account="physics", user="alice"),
    ShareAssoc(id=4, parent_id=1, account="research"),
]


def _running(cpus: int, mem_mb: int, gpus: int, start: int, limit_min: int) -> JobRecord:
    job = JobRecord(job_id=7, user_id=1001)
    job.start_time, job.time_limit_min = start, limit_min
    job.allocation = [
        jobs_pb2.NodeAlloc(
            node="node1", cpu_ids=list(range(cpus)), mem_mb=mem_mb, gpu_indices=list(range(gpus))
        )
    ]
    return job


def test_a_running_job_counts_its_time_left_up_the_tree() -> None:
    job = _running(cpus=2, mem_mb=2000, gpus=1, start=1000, limit_min=10)
    left = priority_report.run_tres_seconds(job, now=1000 + 300)  # 5 of its 10 minutes left
    assert {k: v / 60 for k, v in left.items()} == {
        "cpu": 10,
        "mem": 10000,
        "node": 5,
        "gres/gpu": 5,
        "billing": 10,
    }
    totals = priority_report.per_subtree(TREE, [(3, left), (4, {"cpu": 60.0})])
    assert totals[3]["cpu"] == totals[2]["cpu"] == 600 and totals[1]["cpu"] == 660
    assert totals[4] == {"cpu": 60.0}


def test_a_job_without_a_limit_or_past_it_has_nothing_left() -> None:
    assert priority_report.run_tres_seconds(_running(1, 100, 0, 1000, -2), now=1100) == {}
    assert priority_report.run_tres_seconds(_running(1, 100, 0, 1000, 1), now=2000)["cpu"] == 0


def test_grp_tres_mins_in_tracked_order() -> None:
    names = ["cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages", "gres/gpu"]
    assert priority_report.tres_text("gres/gpu=600,cpu=6000", names) == "cpu=6000,gres/gpu=600"
    assert priority_report.tres_text("", names) == ""
