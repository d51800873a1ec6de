"""simple_slurm, unchanged, against a shoal cluster: its Slurm object writes `#SBATCH --key value`
lines, feeds the script to `sbatch` through a shell here-document and reads the id from "Submitted
batch job N"; its squeue wrapper parses `squeue --me -o '"%i","%j",...'` as CSV; its scancel wrapper
cancels by id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._tools import put_commands_on_path
from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

pytestmark = pytest.mark.e2e

simple_slurm = pytest.importorskip(
    "simple_slurm", reason="simple_slurm is not installed (pip install -e '.[tools]')"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("simple"), nodes=1)
    yield c
    stop_cluster(c)


def test_submit_watch_and_cancel(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    put_commands_on_path(cluster, tmp_path / "bin", monkeypatch)
    monkeypatch.chdir(tmp_path)
    done = simple_slurm.Slurm(
        job_name="simple", output=str(tmp_path / "out.%j"), ntasks=1, time="00:05:00", mem="100M"
    )
    done.add_cmd("echo job $SLURM_JOB_ID on $SLURMD_NODENAME")
    job = done.sbatch(verbose=False)
    cluster.wait_state(job, {"COMPLETED"})
    assert (tmp_path / f"out.{job}").read_text() == f"job {job} on node1\n"  # $ kept for the job's shell

    slow = simple_slurm.Slurm(job_name="slow", output="/dev/null", time="00:05:00", mem="100M")
    slow.add_cmd("sleep 60")
    job = slow.sbatch(verbose=False)
    cluster.wait_state(job, {"RUNNING"})
    slow.squeue.update_squeue()
    # 22.05: "JOBID","NAME","ST","TIME","TIME_LEFT","NODES","CPUS","MIN_MEMORY","TRES_PER_NODE","NODELIST(REASON)"
    row = slow.squeue.jobs[job]
    assert list(row) == [
        "JOBID",
        "NAME",
        "ST",
        "TIME",
        "TIME_LEFT",
        "NODES",
        "CPUS",
        "MIN_MEMORY",
        "TRES_PER_NODE",
        "NODELIST(REASON)",
    ]
    assert (
        row["NAME"],
        row["ST"],
        row["NODES"],
        row["CPUS"],
        row["MIN_MEMORY"],
        row["TRES_PER_NODE"],
        row["NODELIST(REASON)"],
    ) == ("slow", "R", "1", "1", "100M", "N/A", "node1")
    slow.scancel.cancel_job(job)
    wait_until("the job to be cancelled", lambda: cluster.state(job) == "CANCELLED")
