"""Resource limits set before sbatch/srun reach the job, and two launch failures, as measured on
Slurm 22.05 (issue H13).

22.05, as alice: `ulimit -S -s unlimited; ulimit -S -n 1024; ulimit -S -c 0` before sbatch -> the
script sees stack unlimited, open files 1024 (hard: the node's), core 0, and no SLURM_RLIMIT_* in
its environment; srun tasks likewise, and an srun after `ulimit -S -n 512` in the script sees 512.
`sbatch -D /nonexistent` -> COMPLETED 0:0, run in /tmp with "couldn't chdir" in its output;
`#!/nonexistent/sh` -> FAILED 2:0, "execve(): bad interpreter(/nonexistent/sh): ..." in its output.
"""

from __future__ import annotations

import pwd
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, run_as, start_cluster, stop_cluster

pytestmark = pytest.mark.e2e

KIB = 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """slurm.conf: PropagateResourceLimitsExcept=MEMLOCK (the rest propagated, the default)."""
    c = start_cluster(tmp_path_factory.mktemp("rlimits"), extra=("PropagateResourceLimitsExcept=MEMLOCK",))
    yield c
    stop_cluster(c)


def _limited(**soft: int) -> None:
    """In the command's child, before it becomes the user: the soft limits a shell's `ulimit -S` sets."""
    for name, value in soft.items():
        which = getattr(resource, f"RLIMIT_{name.upper()}")
        resource.setrlimit(which, (value, resource.getrlimit(which)[1]))


def _submit(cluster: Cluster, user: int, argv: tuple[str, ...], cwd: Path, **soft: int) -> int:
    out = run_as(
        user, ("sbatch", "--parsable", *argv), cluster.env, cwd, None, 60, enter=lambda: _limited(**soft)
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def _finished(cluster: Cluster, job_id: int) -> tuple[str, str]:
    """(state, ExitCode) once the job has ended."""
    state = cluster.wait_state(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"})
    show = cluster.ok("scontrol", "show", "job", str(job_id))
    return state, show.split("ExitCode=", 1)[1].split()[0]


def _output(path: Path) -> str:
    deadline = time.monotonic() + 10  # the state may be recorded before the file is closed
    while time.monotonic() < deadline and not path.exists():
        time.sleep(0.1)
    return path.read_text()


def test_alices_limits_before_sbatch_are_the_scripts(cluster: Cluster, workdir: Path) -> None:
    alice = pwd.getpwnam("alice").pw_uid
    script = workdir / "limits.sh"
    script.write_text(
        "#!/bin/bash\n"
        'echo "s=$(ulimit -s) n=$(ulimit -n) c=$(ulimit -c) hn=$(ulimit -H -n) l=$(ulimit -l)"\n'
        'echo "rl=$(env | grep -c ^SLURM_RLIMIT_)"\n'
    )
    job_id = _submit(
        cluster,
        alice,
        ("-o", str(workdir / "limits.out"), str(script)),
        workdir,
        stack=resource.RLIM_INFINITY,
        nofile=1024,
        core=0,
        memlock=4096 * KIB,
    )
    assert _finished(cluster, job_id) == ("COMPLETED", "0:0")
    node_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    node_memlock = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0] // KIB  # MEMLOCK is excepted: the node's
    assert _output(workdir / "limits.out").splitlines() == [
        f"s=unlimited n=1024 c=0 hn={node_hard} l={node_memlock}",
        "rl=0",
    ]


def test_propagate_option_sends_an_excepted_limit(cluster: Cluster, workdir: Path) -> None:
    """--propagate=MEMLOCK: only that limit, whatever PropagateResourceLimitsExcept says."""
    script = workdir / "memlock.sh"
    script.write_text('#!/bin/bash\necho "l=$(ulimit -l) n=$(ulimit -n)"\n')
    node_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    job_id = _submit(
        cluster,
        0,
        ("--propagate=MEMLOCK", "-o", str(workdir / "memlock.out"), str(script)),
        workdir,
        memlock=4096 * KIB,
        nofile=1000,
    )
    assert _finished(cluster, job_id) == ("COMPLETED", "0:0")
    assert _output(workdir / "memlock.out").strip() == f"l=4096 n={node_nofile}"


def test_srun_tasks_get_the_limits_of_srun(cluster: Cluster, workdir: Path) -> None:
    """srun inside the script: the script's own limits then, after `ulimit -S -n 512`, 512; and a
    plain srun whose caller set `ulimit -S -n 2048 -c 0`."""
    script = workdir / "steps.sh"
    script.write_text(
        "#!/bin/bash\n"
        "srun -n1 bash -c 'echo first n=$(ulimit -n) s=$(ulimit -s) rl=$(env | grep -c ^SLURM_RLIMIT_)'\n"
        "ulimit -S -n 512\n"
        "srun -n1 bash -c 'echo second n=$(ulimit -n)'\n"
    )
    job_id = _submit(
        cluster,
        0,
        ("-o", str(workdir / "steps.out"), str(script)),
        workdir,
        nofile=1024,
        stack=resource.RLIM_INFINITY,
    )
    assert _finished(cluster, job_id) == ("COMPLETED", "0:0")
    assert _output(workdir / "steps.out").splitlines() == ["first n=1024 s=unlimited rl=0", "second n=512"]

    out = run_as(
        0,
        ("srun", "-n1", "bash", "-c", "echo n=$(ulimit -n) c=$(ulimit -c)"),
        cluster.env,
        workdir,
        None,
        60,
        enter=lambda: _limited(nofile=2048, core=0),
    )
    assert (out.returncode, out.stdout.strip()) == (0, "n=2048 c=0"), out.stderr


def test_missing_workdir_runs_in_tmp_and_completes(cluster: Cluster, workdir: Path) -> None:
    script = workdir / "cwd.sh"
    script.write_text("#!/bin/bash\npwd\n")
    job_id = cluster.submit("-D", "/nonexistent", "-o", str(workdir / "cwd.out"), str(script))
    assert _finished(cluster, job_id) == ("COMPLETED", "0:0")
    lines = _output(workdir / "cwd.out").splitlines()
    assert lines[-1] == "/tmp"
    assert lines[0].endswith(
        ": error: couldn't chdir to `/nonexistent': No such file or directory: going to /tmp instead"
    )
    assert lines[0].startswith("slurmstepd-")


def test_bad_interpreter_line_fails_the_job_2_0(cluster: Cluster, workdir: Path) -> None:
    script = workdir / "bad.sh"
    script.write_text("#!/nonexistent/sh\necho hi\n")
    job_id = cluster.submit("-o", str(workdir / "bad.out"), str(script))
    assert _finished(cluster, job_id) == ("FAILED", "2:0")
    assert (
        _output(workdir / "bad.out")
        .splitlines()[-1]
        .endswith(": error: execve(): bad interpreter(/nonexistent/sh): No such file or directory")
    )
