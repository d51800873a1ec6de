"""dask-jobqueue's SLURMCluster, unchanged, against a shoal cluster: it writes a job script of
`#SBATCH` lines, submits it with `sbatch`, reads the job id from sbatch's output, and its workers (one
per job) connect back to the scheduler; scaling down cancels the jobs with `scancel`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._tools import put_commands_on_path
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

dask_jobqueue = pytest.importorskip(
    "dask_jobqueue", reason="dask-jobqueue is not installed (pip install -e '.[tools]')"
)
distributed = pytest.importorskip("distributed", reason="dask's distributed is not installed")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("dask"), nodes=2, accounting=True)
    yield c
    stop_cluster(c)


def _square(x: int) -> tuple[int, str]:
    import os

    return x * x, os.environ.get("SLURM_JOB_ID", "")


def test_slurm_cluster_scales_to_two_workers_and_computes(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_commands_on_path(cluster, tmp_path / "bin", monkeypatch)
    monkeypatch.chdir(tmp_path)
    # everything on loopback: the scheduler, its dashboard and the workers
    with dask_jobqueue.SLURMCluster(
        cores=1,
        processes=1,
        memory="1GB",
        walltime="00:05:00",
        job_name="dask-worker",
        python=sys.executable,
        log_directory=str(tmp_path / "logs"),
        scheduler_options={"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"},
        worker_extra_args=["--host", "127.0.0.1", "--nanny-port", "0"],
    ) as dask_cluster:
        script = dask_cluster.job_script()
        assert "#SBATCH -J dask-worker" in script and "#SBATCH -t 00:05:00" in script
        dask_cluster.scale(jobs=2)
        with distributed.Client(dask_cluster) as client:
            client.wait_for_workers(2, timeout=120)
            results = client.gather(client.map(_square, range(8)))
            assert [r[0] for r in results] == [x * x for x in range(8)]
            # the job ids it read from sbatch's output are the jobs squeue shows running
            job_ids = sorted(str(w.job_id) for w in dask_cluster.workers.values())
            running = cluster.ok("squeue", "-h", "-n", "dask-worker", "-t", "R", "-o", "%i").split()
            assert len(job_ids) == 2 and sorted(running) == job_ids
            assert {r[1] for r in results} <= set(job_ids)  # the tasks ran inside those jobs
            dask_cluster.scale(jobs=0)
            wait_until(
                "scancel to end the worker jobs",
                lambda: not cluster.ok("squeue", "-h", "-n", "dask-worker", "-o", "%i").split(),
                timeout=60,
            )

    def states() -> list[str]:
        return cluster.ok("sacct", "-X", "-n", "-P", "-o", "State", "-j", ",".join(job_ids)).splitlines()

    deadline = time.monotonic() + 30
    while not all(s.startswith("CANCELLED") for s in states()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [s.split()[0] for s in states()] == ["CANCELLED"] * 2  # "CANCELLED by <uid>"
