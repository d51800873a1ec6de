"""LastBusyTime as 22.05 keeps it: the node daemon's start, then the end of the node's last job."""

from __future__ import annotations

from ctld.nodes import NodeRuntime, note_job_ended, note_registered
from shoal.conf import NodeConf
from shoal.v1 import cluster_pb2, jobs_pb2


def runtime(name: str) -> NodeRuntime:
    return NodeRuntime(
        conf=NodeConf(name=name, addr=name, hostname=name), info=cluster_pb2.NodeInfo(name=name)
    )


def job(job_id: int, state: int, *nodes: str) -> jobs_pb2.JobInfo:
    out = jobs_pb2.JobInfo(job_id=job_id, state=state)  # type: ignore[arg-type]
    for node in nodes:
        out.allocation.add(node=node, cpus=1)
    return out


def test_registration_shows_the_daemon_start_and_keeps_a_later_job_end() -> None:
    node = runtime("n1")
    node.info.noded_start_time = 100
    note_registered(node.info)
    assert node.info.last_busy_time == 100
    node.info.last_busy_time = 500  # a job ended there after that start; ctld restarts, noded registers again
    note_registered(node.info)
    assert node.info.last_busy_time == 500


def test_only_the_nodes_a_job_leaves_idle_take_its_end_time() -> None:
    """The real one: node4 with two jobs kept its LastBusyTime when the first ended, took the second's end."""
    nodes = {name: runtime(name) for name in ("n1", "n2", "n3")}
    ended = job(1, jobs_pb2.COMPLETED, "n1", "n2")
    beside = job(2, jobs_pb2.RUNNING, "n2")
    finished_long_ago = job(3, jobs_pb2.COMPLETED, "n1")
    note_job_ended(nodes, [ended, beside, finished_long_ago], ended, 700)
    assert [nodes[n].info.last_busy_time for n in ("n1", "n2", "n3")] == [700, 0, 0]
    beside.state = jobs_pb2.COMPLETED
    note_job_ended(nodes, [ended, beside, finished_long_ago], beside, 900)
    assert nodes["n2"].info.last_busy_time == 900


def test_a_job_that_never_started_changes_nothing() -> None:
    nodes = {"n1": runtime("n1")}
    note_job_ended(nodes, [], job(4, jobs_pb2.CANCELLED), 700)
    assert nodes["n1"].info.last_busy_time == 0
