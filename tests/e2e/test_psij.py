"""PSI/J's Slurm executor (psij-python), unchanged, against a shoal cluster: it renders its job script
from its own template, submits it with `sbatch`, polls `squeue -O JobArrayID,StateCompact,Reason -t all
--me` and cancels with `scancel -Q`; the job's exit code comes back through the file its script writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.e2e._tools import put_commands_on_path
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e

psij = pytest.importorskip("psij", reason="psij-python is not installed (pip install -e '.[tools]')")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("psij"), nodes=1)
    yield c
    stop_cluster(c)


def test_psij_job_completes_and_one_is_cancelled(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_commands_on_path(cluster, tmp_path / "bin", monkeypatch)
    from psij.executors.batch.slurm import SlurmExecutorConfig

    config = SlurmExecutorConfig(work_directory=tmp_path / "psij", queue_polling_interval=1)
    executor = psij.JobExecutor.get_instance("slurm", config=config)
    out = tmp_path / "out"
    job = psij.Job(
        psij.JobSpec(
            executable="/bin/sh",
            arguments=["-c", "echo job $SLURM_JOB_ID"],
            stdout_path=out,
            directory=tmp_path,
            attributes=psij.JobAttributes(duration=timedelta(minutes=2)),
        )
    )
    executor.submit(job)
    status = job.wait(timeout=timedelta(seconds=90))
    assert status is not None and status.state == psij.JobState.COMPLETED, status
    assert status.exit_code == 0
    assert out.read_text() == f"job {job.native_id}\n"
    assert cluster.state(job.native_id) == "COMPLETED"

    slow = psij.Job(
        psij.JobSpec(
            executable="/bin/sleep",
            arguments=["60"],
            directory=tmp_path,
            attributes=psij.JobAttributes(duration=timedelta(minutes=2)),
        )
    )
    executor.submit(slow)
    slow.wait(target_states=[psij.JobState.ACTIVE], timeout=timedelta(seconds=60))
    slow.cancel()
    status = slow.wait(timeout=timedelta(seconds=60))
    assert status is not None and status.state == psij.JobState.CANCELED, status
