"""Node failures as Slurm 22.05 handles them: requeue of what may be requeued, NODE_FAIL otherwise,
orphans killed when the node answers again, ReturnToService, and TerminateJob after every end."""

from __future__ import annotations

from pathlib import Path

from ctld.controller import Controller
from ctld.store import StateStore
from shoal.conf.slurm import parse_slurm_conf
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2
from tests.unit.ctld.builders import NoNodes, submit


class Recorded(NoNodes):
    """Node agents that record what they were asked to terminate."""

    def __init__(self) -> None:
        self.terminated: list[tuple[str, int, str]] = []

    def terminate(self, node: cluster_pb2.NodeInfo, job_id: int, kill_wait: int, reason: str) -> None:
        self.terminated.append((node.name, job_id, reason))


def _controller(tmp_path: Path, rts: int = 1) -> tuple[Controller, Recorded, list[float]]:
    cfg = parse_slurm_conf(
        "ClusterName=t\nSlurmctldHost=localhost\nNodeName=n[1-2] CPUs=4 RealMemory=1000\n"
        f"PartitionName=batch Nodes=n[1-2] Default=YES\nStateSaveLocation={tmp_path}\n"
        f"SlurmdTimeout=30\nReturnToService={rts}\n"
    )
    now = [1_000_000.0]
    actions = Recorded()
    ctl = Controller(cfg, StateStore(tmp_path), b"k" * 32, actions, clock=lambda: now[0])
    for name in ("n1", "n2"):
        ctl.register_node(controller_pb2.RegisterNodeRequest(name=name, reports_finished=True))
    return ctl, actions, now


def _running_on(ctl: Controller, job_id: int, node: str) -> jobs_pb2.JobInfo:
    job = ctl.jobs[job_id]
    job.state, job.batch_host, job.start_time = jobs_pb2.RUNNING, node, int(ctl.clock()) - 10
    job.allocation.append(jobs_pb2.NodeAlloc(node=node, cpu_ids=[0]))
    return job


def _silent(ctl: Controller, now: list[float], node: str) -> None:
    """`node` stops answering for longer than SlurmdTimeout; the other keeps answering."""
    now[0] += 31
    for name in ctl.nodes:
        if name != node:
            ctl.node_contact(name, True, [])
    ctl.housekeeping()


def test_a_node_that_stops_answering_requeues_what_may_be_requeued(tmp_path: Path) -> None:
    ctl, _, now = _controller(tmp_path)
    again = submit(ctl, requeue=-1)  # sbatch's default, JobRequeue=1
    lost = submit(ctl, requeue=0)  # --no-requeue
    _running_on(ctl, again, "n2")
    _running_on(ctl, lost, "n2")
    _silent(ctl, now, "n2")
    assert ctl.nodes["n2"].info.base_state == "DOWN" and ctl.nodes["n2"].info.reason == "Not responding"
    job = ctl.jobs[again]
    assert (job.state, job.restarts, job.state_reason, list(job.allocation)) == (
        jobs_pb2.PENDING,
        1,
        "BeginTime",
        [],
    )
    assert ctl.jobs[lost].state == jobs_pb2.NODE_FAIL


def test_an_answering_node_first_loses_what_it_runs_of_ended_jobs_then_returns(tmp_path: Path) -> None:
    ctl, actions, now = _controller(tmp_path)
    job_id = submit(ctl, requeue=-1)
    _running_on(ctl, job_id, "n2")
    _silent(ctl, now, "n2")
    ctl.node_contact("n2", True, [job_id])  # SIGCONT: the lost run still runs there
    assert ("n2", job_id, "orphan") in actions.terminated
    assert ctl.nodes["n2"].info.base_state == "DOWN"  # its CPUs are not free yet
    ctl.node_contact("n2", True, [])
    info = ctl.nodes["n2"].info
    assert (info.base_state, info.reason, info.not_responding) == ("IDLE", "", False)


def test_return_to_service_0_keeps_the_node_down(tmp_path: Path) -> None:
    ctl, _, now = _controller(tmp_path, rts=0)
    _silent(ctl, now, "n2")
    ctl.node_contact("n2", True, [])
    assert ctl.nodes["n2"].info.base_state == "DOWN" and not ctl.nodes["n2"].info.not_responding


def test_return_to_service_1_keeps_an_admin_down_node_down(tmp_path: Path) -> None:
    ctl, _, now = _controller(tmp_path, rts=1)
    ctl.nodes["n2"].info.base_state, ctl.nodes["n2"].info.reason = "DOWN", "maintenance"
    ctl.node_contact("n2", False)
    ctl.node_contact("n2", True, [])
    assert ctl.nodes["n2"].info.base_state == "DOWN"


def test_a_node_lost_report_requeues_and_a_plain_end_terminates_on_the_batch_host(tmp_path: Path) -> None:
    ctl, actions, _ = _controller(tmp_path)
    crashed, ended = submit(ctl, requeue=-1), submit(ctl, requeue=-1)
    _running_on(ctl, crashed, "n1")
    _running_on(ctl, ended, "n1")
    ctl.complete_batch(
        controller_pb2.CompleteBatchRequest(node="n1", job_id=crashed, exit_signal=9, node_fail=True)
    )
    assert (ctl.jobs[crashed].state, ctl.jobs[crashed].restarts) == (jobs_pb2.PENDING, 1)
    ctl.complete_batch(controller_pb2.CompleteBatchRequest(node="n1", job_id=ended, exit_code=0))
    assert ctl.jobs[ended].state == jobs_pb2.COMPLETED
    assert ("n1", ended, "ended") in actions.terminated


def test_job_requeue_0_makes_requeue_the_exception(tmp_path: Path) -> None:
    cfg = parse_slurm_conf(
        "ClusterName=t\nSlurmctldHost=localhost\nNodeName=n1 CPUs=4 RealMemory=1000\n"
        f"PartitionName=batch Nodes=n1 Default=YES\nStateSaveLocation={tmp_path}\nJobRequeue=0\n"
    )
    ctl = Controller(cfg, StateStore(tmp_path), b"k" * 32, Recorded(), clock=lambda: 1_000_000.0)
    default, asked = submit(ctl, requeue=-1), submit(ctl, requeue=1)
    assert (ctl.jobs[default].requeue, ctl.jobs[asked].requeue) == (False, True)
