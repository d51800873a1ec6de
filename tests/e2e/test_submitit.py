"""submitit's SlurmExecutor, unchanged, against a shoal cluster: a job that completes, and one that
checkpoints on its time-limit signal (submitit's own --signal), requeues itself and completes.

submitit drives the commands it finds on PATH (sbatch, sacct, scontrol, srun inside the job), as
on a real Slurm cluster; here they are shoal's.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster

submitit = pytest.importorskip("submitit", reason="submitit is not installed (pip install submitit)")

COMMANDS = ("sbatch", "srun", "salloc", "squeue", "sacct", "scontrol", "scancel", "sinfo")


class Resumable(submitit.helpers.Checkpointable):  # type: ignore[misc]
    """Counts to a target across runs: each run records how far it got, the checkpoint keeps it."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, marker: str) -> str:
        self.runs += 1
        if self.runs == 1:
            Path(marker).write_text("first run\n")
            time.sleep(300)  # the time-limit signal comes first
        return f"done after {self.runs} runs, restart {os.environ.get('SLURM_RESTART_COUNT', '0')}"


def _final_state(job: submitit.SlurmJob) -> str:  # type: ignore[type-arg]
    """The job's state as submitit reads it from sacct, once accounting has its end."""
    deadline = time.monotonic() + 30
    state = ""
    while time.monotonic() < deadline:
        state = job.watcher.get_state(job.job_id, mode="force")
        if state not in ("PENDING", "RUNNING", "REQUEUED", "UNKNOWN", "COMPLETING"):
            break
        time.sleep(0.5)
    return str(state)


def add(a: int, b: int) -> int:
    return a + b


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("cluster"), nodes=1, accounting=True)
    yield c
    stop_cluster(c)


@pytest.fixture
def shoal_path(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """shoal's commands first on PATH (this checkout's), SLURM_CONF at the cluster, for submitit and its jobs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in COMMANDS:
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {sys.executable} -m cli.{name} "$@"\n')
        script.chmod(0o755)
    for key in [k for k in os.environ if k.startswith(("SLURM_", "SBATCH_", "SUBMITIT_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))


def test_submitit_job_completes(cluster: Cluster, tmp_path: Path, shoal_path: None) -> None:
    executor = submitit.SlurmExecutor(folder=tmp_path / "jobs", python=sys.executable)
    executor.update_parameters(time=5)
    job = executor.submit(add, 2, 3)
    assert job.result() == 5
    assert _final_state(job) == "COMPLETED"


def test_submitit_checkpoint_on_timeout_requeues_and_completes(
    cluster: Cluster, tmp_path: Path, shoal_path: None
) -> None:
    executor = submitit.SlurmExecutor(folder=tmp_path / "jobs", python=sys.executable, max_num_timeout=3)
    # USR2 55 s before a 1-minute limit: the checkpoint comes within seconds of the start
    executor.update_parameters(time=1, signal_delay_s=55)
    marker = tmp_path / "first"
    job = executor.submit(Resumable(), str(marker))
    assert job.result() == "done after 2 runs, restart 1"  # not UncompletedJobError (FAILED)
    assert marker.read_text() == "first run\n"
    assert _final_state(job) == "COMPLETED"
    assert "Restarts=1" in cluster.ok("scontrol", "show", "job", job.job_id)


def test_submitit_preemption_checkpoints_requeues_and_completes(
    cluster: Cluster, tmp_path: Path, shoal_path: None
) -> None:
    """submitit's own preemption drill (`scancel --signal SIGTERM`, then `--signal USR2`, no -b): the
    step shrugs off the SIGTERM, checkpoints on USR2 and requeues; the next run finishes."""
    executor = submitit.SlurmExecutor(folder=tmp_path / "jobs", python=sys.executable)
    executor.update_parameters(time=60)  # far from its limit: this is a preemption, not a timeout
    marker = tmp_path / "first"
    job = executor.submit(Resumable(), str(marker))
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    job._interrupt()
    assert job.result() == "done after 2 runs, restart 1"
    assert _final_state(job) == "COMPLETED"
