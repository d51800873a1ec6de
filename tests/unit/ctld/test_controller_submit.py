"""Submission in the controller (no daemons): what squeue shows of a job before any scheduling cycle."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.controller import Caller, Controller
from ctld.store import StateStore
from shoal.conf.slurm import parse_slurm_conf
from shoal.v1 import cluster_pb2, jobs_pb2, node_pb2

ROOT = Caller(uid=0, gid=0, host="login")


class NoNodes:
    """Node agents that are never reached: these tests run no scheduling cycle."""

    def launch(self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchBatchRequest) -> None:
        raise AssertionError("no job is launched before a scheduling cycle")

    def terminate(self, node: cluster_pb2.NodeInfo, job_id: int, kill_wait: int, reason: str) -> None:
        raise AssertionError("nothing to terminate")

    def signal(self, node: cluster_pb2.NodeInfo, job_id: int, signal: int, batch_only: bool) -> None:
        raise AssertionError("nothing to signal")

    def ping(self, node: cluster_pb2.NodeInfo) -> None:
        pass

    def launch_tasks(self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchTasksRequest) -> str:
        raise AssertionError("no steps here")

    def signal_step(self, node: cluster_pb2.NodeInfo, job_id: int, step_id: int, signal: int) -> None:
        raise AssertionError("no steps here")


@pytest.fixture
def controller(tmp_path: Path) -> Controller:
    cfg = parse_slurm_conf(
        "ClusterName=t\nSlurmctldHost=localhost\nNodeName=n1 CPUs=4 RealMemory=1000\n"
        f"PartitionName=batch Nodes=n1 Default=YES\nStateSaveLocation={tmp_path}\n"
    )
    return Controller(cfg, StateStore(tmp_path), b"k" * 32, NoNodes(), clock=lambda: 1_000_000.0)


def submit(ctl: Controller, **spec: object) -> int:
    job = jobs_pb2.JobSpec(batch=True, script=b"#!/bin/sh\ntrue\n", work_dir="/tmp", **spec)  # type: ignore[arg-type]
    return ctl.submit(job, ROOT, test_only=False).job_id


CASES = [
    # (id, state the first job is in, the dependent's hold, the dependent's reason at submission)
    ("target-pending", jobs_pb2.PENDING, False, "Dependency"),
    ("target-running", jobs_pb2.RUNNING, False, "Dependency"),
    ("target-completed", jobs_pb2.COMPLETED, False, "None"),
    ("target-failed", jobs_pb2.FAILED, False, "DependencyNeverSatisfied"),
    ("held-keeps-its-reason", jobs_pb2.PENDING, True, "JobHeldUser"),
]


@pytest.mark.parametrize(("target_state", "hold", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_afterok_reason_shows_from_submission(
    controller: Controller, target_state: jobs_pb2.JobState, hold: bool, reason: str
) -> None:
    """As Slurm, `squeue` right after `sbatch --dependency` says why the job waits (no cycle needed)."""
    first = submit(controller)
    controller.jobs[first].state = target_state
    dependent = submit(controller, dependency=f"afterok:{first}", hold=hold)
    assert controller.jobs[dependent].state_reason == reason
