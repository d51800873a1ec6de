"""Job signals as Slurm 22.05 delivers them: to the steps by default, to the batch shell only with
-b / B:, to both with -f; and a checkpointing step that requeues its own job on --signal (submitit's
and Lightning's pattern) gets a requeued job, not a FAILED one.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster, wait_until

# A step task that records each USR1/USR2 it catches in its own file, and ends after the first.
STEP = """\
import os, signal, sys, time
out = sys.argv[1] + "/step." + os.environ["SLURM_PROCID"]
def caught(signum, frame):
    with open(out, "a") as f:
        f.write(signal.Signals(signum).name + "\\n")
    sys.exit(0)
for s in (signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(s, caught)
open(out + ".up", "w").close()
time.sleep(120)
"""

# The batch shell traps the same signals (noting them after srun returns, as bash does).
SCRIPT = """\
#!/bin/bash
trap 'echo USR1 >> {d}/shell' USR1
trap 'echo USR2 >> {d}/shell' USR2
srun {py} {d}/step.py {d}
echo "srun $?" >> {d}/shell
"""

# submitit's checkpoint-on-timeout: the step catches USR2, writes a checkpoint and requeues its
# own job with scontrol; the next run resumes from the checkpoint and completes.
CHECKPOINT = """\
import os, signal, subprocess, sys, time
d = sys.argv[1]
ckpt = os.path.join(d, "checkpoint")
if os.path.exists(ckpt):
    with open(os.path.join(d, "resumed"), "w") as f:
        f.write(open(ckpt).read() + " restart " + os.environ.get("SLURM_RESTART_COUNT", "") + "\\n")
    sys.exit(0)
def on_usr2(signum, frame):
    with open(ckpt, "w") as f:
        f.write("state-42")
    rc = subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]]).returncode
    with open(os.path.join(d, "requeue_rc"), "w") as f:
        f.write(str(rc) + "\\n")
    sys.exit(0)
signal.signal(signal.SIGUSR2, on_usr2)
signal.signal(signal.SIGTERM, lambda s, f: None)  # as submitit: a requeue's SIGTERM is not the end
time.sleep(120)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("cluster"), nodes=2)
    yield c
    stop_cluster(c)


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _start(cluster: Cluster, d: Path, *sbatch: str, tasks: int = 1) -> int:
    (d / "step.py").write_text(STEP)
    (d / "job.sh").write_text(SCRIPT.format(d=d, py=sys.executable))
    job = cluster.submit("-o", str(d / "out"), *sbatch, str(d / "job.sh"))
    ups = [d / f"step.{rank}.up" for rank in range(tasks)]
    wait_until("the step's tasks to start", lambda: all(p.exists() for p in ups))
    return job


@pytest.mark.parametrize(
    ("flags", "shell", "step"),
    [
        ((), [], ["SIGUSR1"]),  # steps only; the shell never sees it
        (("-b",), ["USR1"], []),  # the batch shell only
        (("-f",), ["USR1"], ["SIGUSR1"]),  # the shell and every step
    ],
    ids=["steps", "batch", "full"],
)
def test_scancel_signal_reaches_whom_slurm_says(
    cluster: Cluster, workdir: Path, flags: tuple[str, ...], shell: list[str], step: list[str]
) -> None:
    job = _start(cluster, workdir)
    cluster.ok("scancel", *flags, "-s", "USR1", str(job))
    if not step:  # the step runs on, untouched: end it so that the shell reports
        cluster.ok("scancel", "-s", "USR2", str(job))
    assert cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED"}) == "COMPLETED"
    assert [w for w in _lines(workdir / "shell") if w != "srun" and not w.isdigit()] == shell
    assert _lines(workdir / "step.0")[:1] == (step or ["SIGUSR2"])
    if not flags:
        assert "srun 0" in (workdir / "shell").read_text()
    # with -f, srun (in the shell's group) also passes the signal on to its tasks, as Slurm's does: a
    # task may see it twice, and die of the second while it exits


def test_scancel_signal_reaches_every_node_of_a_step(cluster: Cluster, workdir: Path) -> None:
    job = _start(cluster, workdir, "-N", "2", "-n", "2", tasks=2)
    cluster.ok("scancel", "--signal=USR1", str(job))
    assert cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED"}) == "COMPLETED"
    assert _lines(workdir / "step.0") == ["SIGUSR1"]
    assert _lines(workdir / "step.1") == ["SIGUSR1"]
    assert _lines(workdir / "shell") == ["srun", "0"]


def test_time_limit_signal_reaches_the_step_not_the_shell(cluster: Cluster, workdir: Path) -> None:
    # USR2 55 s before a 1-minute limit: within seconds of the start
    job = _start(cluster, workdir, "-t", "1", "--signal=USR2@55")
    assert cluster.wait_state(job, {"COMPLETED", "FAILED", "TIMEOUT"}, timeout=90) == "COMPLETED"
    assert _lines(workdir / "step.0") == ["SIGUSR2"]
    assert _lines(workdir / "shell") == ["srun", "0"]


def test_batch_time_limit_signal_reaches_only_the_shell(cluster: Cluster, workdir: Path) -> None:
    (workdir / "step.py").write_text(STEP)
    script = (
        f"#!/bin/bash\ntrap 'echo USR2 >> {workdir}/shell; exit 3' USR2\nsrun {sys.executable} "
        f"{workdir}/step.py {workdir} &\nwait\n"
    )
    job = cluster.submit("-o", str(workdir / "out"), "-t", "1", "--signal=B:USR2@55", "--wrap", script)
    assert cluster.wait_state(job, {"COMPLETED", "FAILED", "TIMEOUT"}, timeout=90) == "FAILED"
    assert _lines(workdir / "shell") == ["USR2"]
    assert not _lines(workdir / "step.0")  # the step was ended with the job, never signalled
    assert cluster.job_field(job, "%r") == "NonZeroExitCode"


def test_checkpointing_step_requeues_its_job_on_the_time_limit_signal(
    cluster: Cluster, workdir: Path
) -> None:
    (workdir / "ckpt.py").write_text(CHECKPOINT)
    script = f"#!/bin/bash\nsrun {sys.executable} {workdir}/ckpt.py {workdir}\n"
    job = cluster.submit(
        "-o", str(workdir / "out"), "--open-mode=append", "-t", "1", "--signal=USR2@55", "--wrap", script
    )
    assert (
        cluster.wait_state(job, {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"}, timeout=120) == "COMPLETED"
    )
    assert _lines(workdir / "requeue_rc") == ["0"]  # scontrol was not killed by the requeue it made
    assert (workdir / "resumed").read_text().split() == ["state-42", "restart", "1"]
    assert "Restarts=1" in cluster.ok("scontrol", "show", "job", str(job))


def test_scancel_step_signals_that_step_and_the_job_runs_on(cluster: Cluster, workdir: Path) -> None:
    job = _start(cluster, workdir)
    out = cluster.run("scancel", "-v", "-s", "USR1", f"{job}.0")
    assert out.returncode == 0
    assert out.stderr == f"scancel: Signal 10 to step {job}.0\n"
    assert cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED"}) == "COMPLETED"
    assert _lines(workdir / "step.0") == ["SIGUSR1"]
    assert _lines(workdir / "shell") == ["srun", "0"]


def test_scancel_step_cancels_that_step_only(cluster: Cluster, workdir: Path) -> None:
    (workdir / "up").unlink(missing_ok=True)
    script = f"#!/bin/bash\nsrun sh -c 'touch {workdir}/up; sleep 120'\necho \"srun $?\" > {workdir}/shell\n"
    job = cluster.submit("-o", str(workdir / "out"), "--wrap", script)
    wait_until("the step to start", (workdir / "up").exists)
    out = cluster.run("scancel", "-v", f"{job}.0")
    assert (out.returncode, out.stderr) == (0, f"scancel: Terminating step {job}.0\n")
    assert cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED"}) == "COMPLETED"
    assert _lines(workdir / "shell")[0] == "srun"
    assert _lines(workdir / "shell")[1] != "0"
    gone = cluster.run("scancel", f"{job}.7")  # the job has ended: Slurm's error, measured on 22.05
    assert (gone.returncode, gone.stderr) == (
        1,
        f"scancel: error: Kill job error on job step id {job}.7: Invalid job id specified\n",
    )


def test_scancel_batch_without_a_signal_kills_the_shell(cluster: Cluster, workdir: Path) -> None:
    job = _start(cluster, workdir)
    out = cluster.run("scancel", "-v", "-b", str(job))
    assert (out.returncode, out.stderr) == (0, f"scancel: Terminating batch job {job}\n")
    assert cluster.wait_state(job, {"COMPLETED", "FAILED", "CANCELLED"}) == "FAILED"
    assert "ExitCode=0:9" in cluster.ok("scontrol", "show", "job", str(job))


@pytest.mark.parametrize("prog", ["srun", "salloc"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_while_the_allocation_pends_cancels_it(
    cluster: Cluster, prog: str, sig: signal.Signals
) -> None:
    """`timeout 3 srun ...` on a full cluster: the job is cancelled, never left PENDING (22.05's words)."""
    busy = cluster.submit("-N2", "--exclusive", "-o", "/dev/null", "--wrap", "sleep 120")
    cluster.wait_state(busy, {"RUNNING"})
    try:
        _revoke(cluster, prog, sig)
    finally:
        cluster.ok("scancel", str(busy))


def _revoke(cluster: Cluster, prog: str, sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", f"cli.{prog}", "-N1", "true"],
        env=cluster.env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()
    queued = proc.stderr.readline() if prog == "salloc" else first
    job = queued.split()[2]
    assert queued == f"{prog}: job {job} queued and waiting for resources\n"
    proc.send_signal(sig)
    _, rest = proc.communicate(timeout=30)
    if prog == "salloc":
        assert first == f"salloc: Pending job allocation {job}\n"
        assert rest == f"salloc: Job allocation {job} has been revoked.\nsalloc: Job aborted due to signal\n"
    else:
        assert rest == f"srun: Job allocation {job} has been revoked\nsrun: Force Terminated JobId={job}\n"
    assert proc.returncode == 1
    assert cluster.state(job) == "CANCELLED"
    assert cluster.job_field(job, "%j") == ("interactive" if prog == "salloc" else "true")


def test_signals_to_a_pending_job(cluster: Cluster) -> None:
    """22.05: a signal other than KILL cannot reach a pending job (exit 228, its error number's low
    byte); KILL, or -b (which means KILL to the shell), cancels it."""
    job = cluster.submit("-H", "-o", "/dev/null", "--wrap", "true")
    for flags in (("-s", "USR1"), ("-f", "-s", "USR1"), ("-s", "TERM")):
        out = cluster.run("scancel", *flags, str(job))
        assert (out.returncode, out.stderr) == (
            228,
            f"scancel: error: Kill job error on job id {job}: Job can not be altered now, try again later\n",
        )
    assert cluster.state(job) == "PENDING"
    assert cluster.run("scancel", "-b", str(job)).returncode == 0
    assert cluster.state(job) == "CANCELLED"
