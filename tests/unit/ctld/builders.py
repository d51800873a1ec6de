"""A controller in one process (no daemons) for the ctld unit tests, and a way to submit to it."""

from __future__ import annotations

from pathlib import Path

from ctld.actions import LaunchFailed, PingAnswer
from ctld.controller import Caller, Controller
from ctld.store import StateStore
from shoal.conf.slurm import parse_slurm_conf
from shoal.v1 import cluster_pb2, jobs_pb2, node_pb2

ROOT = Caller(uid=0, gid=0, host="login")


def crafted_spec(**fields: object) -> jobs_pb2.JobSpec:
    """A JobSpec as a hostile client could send it: sbatch's defaults, then any field set to anything."""
    spec = jobs_pb2.JobSpec(
        batch=True,
        script=b"#!/bin/sh\ntrue\n",
        work_dir="/tmp",
        time_limit_min=-1,
        time_min_min=-1,
        requeue=-1,
    )
    for name, value in fields.items():
        if name == "environment":
            spec.environment.update(value)  # type: ignore[call-overload]
        else:
            setattr(spec, name, value)
    return spec


class NoNodes:
    """Node agents that are never reached: these tests run no scheduling cycle."""

    def launch(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchBatchRequest, on_failure: LaunchFailed
    ) -> None:
        raise AssertionError("no job is launched before a scheduling cycle")

    def terminate(self, node: cluster_pb2.NodeInfo, job_id: int, kill_wait: int, reason: str) -> None:
        raise AssertionError("nothing to terminate")

    def signal(
        self, node: cluster_pb2.NodeInfo, job_id: int, signal: int, batch_only: bool, full: bool = False
    ) -> None:
        raise AssertionError("nothing to signal")

    def ping(self, node: cluster_pb2.NodeInfo, ctld_start_time: int, on_answer: PingAnswer) -> None:
        pass

    def launch_tasks(self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchTasksRequest) -> str:
        raise AssertionError("no steps here")

    def reconfigure(self, node: cluster_pb2.NodeInfo) -> None:
        pass

    def run_prolog(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.RunPrologRequest, on_done: object
    ) -> None:
        raise AssertionError("no job starts here")

    def signal_step(self, node: cluster_pb2.NodeInfo, job_id: int, step_id: int, signal: int) -> None:
        raise AssertionError("no steps here")


def make_controller(tmp_path: Path) -> Controller:
    cfg = parse_slurm_conf(
        "ClusterName=t\nSlurmctldHost=localhost\nNodeName=n1 CPUs=4 RealMemory=1000\n"
        f"PartitionName=batch Nodes=n1 Default=YES\nStateSaveLocation={tmp_path}\n"
    )
    return Controller(cfg, StateStore(tmp_path), b"k" * 32, NoNodes(), clock=lambda: 1_000_000.0)


def submit(ctl: Controller, **spec: object) -> int:
    job = jobs_pb2.JobSpec(batch=True, script=b"#!/bin/sh\ntrue\n", work_dir="/tmp", **spec)  # type: ignore[arg-type]
    return ctl.submit(job, ROOT, test_only=False).job_id
