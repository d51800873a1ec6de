"""What the step supervisor does to a job as 22.05's does, measured there (issue H3, 2026-12-01):
the RSS limit is the memory the job (or step) holds on the node, a job ended at its time limit is
told so on its stderr by a line that names the node, and a task that exits 143 itself is an exit
code, not a signal.

22.05 (alice, DefMemPerCPU=1000): `sbatch --mem=2000 --wrap 'ulimit -Sm; ulimit -Hm; srun ...'`
-> 2048000 soft and hard in the script and its srun task (also after the submitting shell's
`ulimit -S -m 500000` or 5000000); `-c2 --mem-per-cpu=1500` -> 3072000; no --mem, -n4 -> 4096000
in the script and in `srun -n1`, 307200 in `srun -n1 --mem=300`; `srun --mem=2000` -> 2048000.
`sbatch -t 1 --wrap 'sleep 300'` -> `slurmstepd-node1: error: *** JOB J ON node1 CANCELLED AT
<time> DUE TO TIME LIMIT ***` in its output (tested with the step's `srun -t 1` in tests/e2e/test_srun.py, to share the minute's wait).
`sbatch --wrap 'exit 143'` -> scontrol ExitCode=143:0, sacct FAILED 15:0 (sacct's ExitCode shows
128..255 less 128: exit 128 -> 0:0, 129 -> 1:0, 200 -> 72:0, still FAILED); `srun sh -c 'exit 143'`
-> srun exits 143, the job and step 0 FAILED 15:0, DerivedExitCode 143:0; while `srun sh -c
'kill -TERM $$'` -> job FAILED 0:15, step CANCELLED 0:15.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, run_as, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e

KIB = 1024
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
LIMITS = 'echo "S=$(ulimit -Sm) H=$(ulimit -Hm)"'


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("stepd22"), accounting=True, extra=("DefMemPerCPU=1000",))
    yield c
    stop_cluster(c)


def _output(path: Path) -> list[str]:
    deadline = time.monotonic() + 10  # the state may be recorded before the file is closed
    while time.monotonic() < deadline and not path.exists():
        time.sleep(0.1)
    return path.read_text().splitlines()


def _sbatch(cluster: Cluster, workdir: Path, *argv: str, rss_soft: int | None = None) -> int:
    """sbatch from a shell whose soft RSS limit is `rss_soft` (None: as it is)."""

    def enter() -> None:
        if rss_soft is not None:
            resource.setrlimit(resource.RLIMIT_RSS, (rss_soft, resource.getrlimit(resource.RLIMIT_RSS)[1]))

    out = run_as(0, ("sbatch", "--parsable", *argv), cluster.env, workdir, None, 60, enter=enter)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def _sacct(cluster: Cluster, job: int) -> list[str]:
    """sacct's rows for the job, once accounting has its end (and its steps')."""
    deadline = time.monotonic() + 30
    rows: list[str] = []
    while time.monotonic() < deadline:
        rows = cluster.ok("sacct", "-j", str(job), "-o", "JobID,State,ExitCode", "-P", "-n").split()
        if rows and all("RUNNING" not in r and "PENDING" not in r for r in rows):
            return rows
        time.sleep(0.3)
    return rows


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--mem=2000",), 2048000),
        (("-c2", "--mem-per-cpu=1500"), 3072000),
        (("-n2",), 2048000),  # DefMemPerCPU=1000
    ],
    ids=["mem", "mem-per-cpu", "def-mem-per-cpu"],
)
def test_rss_limit_is_the_jobs_memory_in_the_script_and_its_tasks(
    cluster: Cluster, workdir: Path, argv: tuple[str, ...], expected: int
) -> None:
    out = workdir / f"rss{expected}.out"
    wrap = f"{LIMITS}; srun -n1 sh -c '{LIMITS}'"
    job = _sbatch(cluster, workdir, *argv, "-o", str(out), "--wrap", wrap)
    assert cluster.wait_state(job, ENDED) == "COMPLETED"
    assert _output(out) == [f"S={expected} H={expected}"] * 2


def test_rss_limit_wins_over_the_submitting_shells_and_a_step_has_its_own(
    cluster: Cluster, workdir: Path
) -> None:
    out = workdir / "rss-steps.out"
    wrap = f"{LIMITS}; srun -n1 --mem=300 sh -c '{LIMITS}'"
    job = _sbatch(cluster, workdir, "-n4", "-o", str(out), "--wrap", wrap, rss_soft=500000 * KIB)
    assert cluster.wait_state(job, ENDED) == "COMPLETED"
    assert _output(out) == ["S=4096000 H=4096000", "S=307200 H=307200"]
    direct = cluster.run("srun", "--mem=2000", "sh", "-c", LIMITS, cwd=workdir)
    assert (direct.returncode, direct.stdout.strip()) == (0, "S=2048000 H=2048000"), direct.stderr


@pytest.mark.parametrize(("code", "shown"), [(143, 15), (128, 0), (200, 72), (100, 100)])
def test_a_batch_script_exiting_143_is_an_exit_code_sacct_shows_less_128(
    cluster: Cluster, workdir: Path, code: int, shown: int
) -> None:
    job = cluster.submit("-o", "/dev/null", "--wrap", f"exit {code}", cwd=workdir)
    assert cluster.wait_state(job, ENDED) == "FAILED"
    assert f"ExitCode={code}:0" in cluster.ok("scontrol", "show", "job", str(job))
    assert _sacct(cluster, job) == [f"{job}|FAILED|{shown}:0", f"{job}.batch|FAILED|{shown}:0"]


def test_an_srun_task_exiting_143_is_an_exit_code_not_a_signal(cluster: Cluster, workdir: Path) -> None:
    out = cluster.run("srun", "-J", "e143", "sh", "-c", "exit 143", cwd=workdir)
    assert out.returncode == 143
    job = int(cluster.ok("squeue", "-h", "-t", "all", "-n", "e143", "-o", "%i").split()[-1])
    assert "ExitCode=143:0" in cluster.ok("scontrol", "show", "job", str(job))
    assert _sacct(cluster, job) == [f"{job}|FAILED|15:0", f"{job}.0|FAILED|15:0"]


def test_an_srun_task_terminated_by_sigterm_is_a_signal(cluster: Cluster, workdir: Path) -> None:
    out = cluster.run("srun", "-J", "sigterm", "sh", "-c", "kill -TERM $$", cwd=workdir)
    assert out.returncode == 143
    job = int(cluster.ok("squeue", "-h", "-t", "all", "-n", "sigterm", "-o", "%i").split()[-1])
    assert "ExitCode=0:15" in cluster.ok("scontrol", "show", "job", str(job))
    assert _sacct(cluster, job) == [f"{job}|FAILED|0:15", f"{job}.0|CANCELLED|0:15"]
