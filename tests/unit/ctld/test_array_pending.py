"""A pending array behind a full cluster, as squeue shows it (the controller with a steppable clock).

22.05 keeps an array's pending tasks as one record: every pending task shows the same reason and the
same expected start. shoal keeps a record per task; its scheduler answers the tasks that ask alike
once per pass (ctld/sched/siblings.py) and backfill reserves room for at most bf_max_job_array_resv of
them (22.05's default 20), so the later ones show the start of the array's last reserved task and no
SCHEDNODES.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.v1 import jobs_pb2
from tests.unit.ctld.harness import Harness, cluster, job

CONF = {
    "SchedulerType": "sched/backfill",
    "SelectType": "select/cons_tres",
    "SelectTypeParameters": "CR_Core_Memory",
    "DefMemPerCPU": 100,
    "SchedulerParameters": "bf_resolution=1",
}


def _array(h: Harness, tasks: int) -> list[int]:
    """An array of whole-node tasks (4 CPUs, 10 minutes) on the one node; its task ids in order."""
    spec = job().tasks(4).time(10)
    spec.spec.array = f"0-{tasks - 1}"
    first = h.submit(spec)
    ids = sorted(j.job_id for j in h.ctl.jobs.values() if j.array_job_id == first)
    assert len(ids) == tasks
    return ids


@pytest.mark.parametrize(
    ("params", "reserved"),
    [("", 20), ("bf_max_job_array_resv=3", 3)],
    ids=["22.05's default: 20 tasks reserved", "bf_max_job_array_resv=3"],
)
def test_pending_tasks_share_a_reason_and_later_ones_hold_no_room(
    tmp_path: Path, params: str, reserved: int
) -> None:
    conf = {**CONF, "SchedulerParameters": ",".join(filter(None, [CONF["SchedulerParameters"], params]))}
    h = Harness.of(cluster().nodes(1, cpus=4, mem=8000).set(**conf), tmp_path)
    ids = _array(h, 30)
    h.schedule()
    now = int(h.clock())
    running, pending = ids[0], ids[1:]
    assert h.state(running) == "RUNNING"
    assert {h.reason(i) for i in pending} == {"Resources"}
    starts = [h.ctl.jobs[i].start_time for i in pending]
    nodes = [h.ctl.jobs[i].sched_nodes for i in pending]
    assert starts[:reserved] == [now + 600 * k for k in range(1, reserved + 1)]
    assert nodes[:reserved] == ["n1"] * reserved
    assert starts[reserved:] == [now + 600 * reserved] * (len(pending) - reserved)
    assert nodes[reserved:] == [""] * (len(pending) - reserved)

    h.advance(30)
    h.finish(running)
    h.schedule()
    assert h.state(ids[1]) == "RUNNING"
    assert {h.reason(i) for i in ids[2:]} == {"Resources"}
    assert sum(j.state == jobs_pb2.PENDING for j in h.ctl.jobs.values()) == 28
