"""NumNodes of `scontrol show job` and NODES of squeue, against the real Slurm 22.05 (shoal/nodecount.py).

Each row is one job submitted as alice on the reference cluster (node[1-4], 16 CPUs, 8 gpu:h100; debug =
node[1-2]), its options and what 22.05 printed: NumNodes= and squeue's %D. Pending rows were taken while
every GPU was held (or with --begin=now+1hour), right after sbatch and again after a backfill pass: the
same both times, whatever the pending reason (Priority, Resources, BeginTime, Dependency). Running rows
after they started. Measured 2026-12-01.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cli import sbatch
from cli.show import format_job
from ctld.node_lifecycle import update_node
from shoal.v1 import common_pb2, controller_pb2, jobs_pb2
from tests.unit.ctld.harness import ROOT, Harness, JobBuilder, cluster

# (options, NumNodes, squeue %D) of a pending job
PENDING = [
    ("--gres=gpu:1", "1", 1),
    ("--gres=gpu:4", "1", 1),
    ("-N1 --gres=gpu:1", "1-1", 1),
    ("-N2 --gres=gpu:1", "2-2", 2),
    ("-N1-3 --gres=gpu:1", "3-3", 3),
    ("-N2-3 --gres=gpu:1", "3-3", 3),
    ("-N2-4 --gres=gpu:1", "4-4", 4),
    ("-N1-2", "2-2", 2),
    ("-N1-8 --begin=now+1hour", "4-8", 4),
    ("-p debug -N1-3 --begin=now+1hour", "2-3", 2),
    ("-N1-3 -n2 --gres=gpu:1", "2-2", 2),
    ("-N2-3 -n2 --begin=now+1hour", "2-2", 2),
    ("-N1-3 -n20 --begin=now+1hour", "3-3", 3),
    ("-N1-3 --ntasks-per-node=2 --begin=now+1hour", "2-3", 2),
    ("-N1-3 -w node1 --gres=gpu:1", "3-3", 3),
    ("-n4 --gres=gpu:1", "1", 1),
    ("-n20 --gres=gpu:1", "2", 2),
    ("-n4 --ntasks-per-node=2 --gres=gpu:1", "2", 2),
    ("--exclusive", "1", 1),
    ("-N1 --exclusive", "1-1", 1),
    ("-N2 --exclusive", "2-2", 2),
    ("-c4 --gres=gpu:1", "1", 1),
    ("-a1-2 --gres=gpu:1", "1", 1),
    ("-a1-2 -N1 --gres=gpu:1", "1-1", 1),
    ("-a1-3 -N1-3 --gres=gpu:1", "3-3", 3),
    ("-w node1 -n4 --begin=now+1hour", "1", 1),
    ("-H", "1", 1),
    ("-H -N1", "1-1", 1),
    ("-H -N2", "2-2", 2),
    ("-H -N1-3", "1-3", 1),
    ("-H -N1-3 -n2", "1-2", 1),
    ("-H -n20", "2", 2),
    ("-H -n4 --ntasks-per-node=2", "2", 2),
    ("-H -w node1 -n4", "1", 1),
]


def _cluster(tmp_path: Path) -> Harness:
    shape = cluster().nodes(4, cpus=16, mem=64000, gpus=8, prefix="node")
    shape.partition("batch", "node[1-4]", Default="YES").partition("debug", "node[1-2]")
    return Harness.of(shape, tmp_path)


def _spec(options: str) -> jobs_pb2.JobSpec:
    _, spec = sbatch.prepare(
        [*options.split(), "--wrap", "sleep 200"], {}, "/tmp", io.StringIO(""), 1_000_000
    )
    assert spec is not None
    return spec


@pytest.mark.parametrize(("options", "shown", "nodes"), PENDING, ids=[row[0] for row in PENDING])
def test_pending_num_nodes_as_2205(tmp_path: Path, options: str, shown: str, nodes: int) -> None:
    h = _cluster(tmp_path)
    job_id = h.submit(JobBuilder(_spec(options)))
    job = h.ctl.jobs[job_id]
    assert (f"NumNodes={shown} " in format_job(job, 1_000_000), job.num_nodes) == (True, nodes)


def test_a_node_down_lowers_the_nodes_expected_not_the_range(tmp_path: Path) -> None:
    """-N3-4 with node4 unavailable at submission: 22.05 showed NumNodes=3-4, squeue 3."""
    h = _cluster(tmp_path)
    fields = [common_pb2.KeyValue(key="State", value="DRAIN"), common_pb2.KeyValue(key="Reason", value="x")]
    update_node(h.ctl.state, controller_pb2.UpdateNodeRequest(nodes="node4", fields=fields), ROOT)
    job = h.ctl.jobs[h.submit(JobBuilder(_spec("-N3-4 --gres=gpu:1")))]
    assert "NumNodes=3-4 " in format_job(job, 1_000_000)


# (options, NumNodes of the running job): the nodes it holds, no range. (22.05 also gave -N1-2 two nodes
# and -N2-4 three, as many as were free; shoal's scheduler gives a range its minimum: not a display rule.)
RUNNING = [
    ("", "1"),
    ("-N1", "1"),
    ("-N2", "2"),
    ("-n2", "1"),
    ("-n20", "2"),
]


@pytest.mark.parametrize(("options", "shown"), RUNNING, ids=[row[0] or "plain" for row in RUNNING])
def test_running_num_nodes_is_what_it_holds(tmp_path: Path, options: str, shown: str) -> None:
    h = _cluster(tmp_path)
    job_id = h.submit(JobBuilder(_spec(options)))
    h.schedule()
    job = h.ctl.jobs[job_id]
    assert job.state == jobs_pb2.RUNNING
    assert f"NumNodes={shown} " in format_job(job, 1_000_000)
