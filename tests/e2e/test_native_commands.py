"""The installed short commands (the native launcher + the agent's command runner) on a real cluster.

The cluster's noded starts the runner beside its agent; the commands under test are the ones pip
installed (cli/native/command.c), copied where every user can run them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.command import COMMANDS
from tests.e2e.conftest import Cluster, wait_until

pytestmark = pytest.mark.e2e

NOBODY = 65534


@pytest.fixture(scope="module")
def native(cluster: Cluster) -> Iterator[Path]:
    installed = Path(sysconfig.get_path("scripts")) / "squeue"
    if not installed.exists() or installed.read_bytes()[:4] != b"\x7fELF":
        pytest.skip("the short commands were installed as Python scripts (no C compiler at install time)")
    out = Path(tempfile.mkdtemp(prefix="shoal-native-"))
    os.chmod(out, 0o755)
    for name in COMMANDS:
        shutil.copy(installed, out / name)
        os.chmod(out / name, 0o755)
    # only the runner can answer: no shoal-command on PATH, none beside the copies
    wait_until("the command runner", lambda: os.path.exists(str(cluster.dir / "run" / "agent.sock.run")))
    yield out
    shutil.rmtree(out, ignore_errors=True)


def _run(
    native: Path,
    cluster: Cluster,
    *argv: str,
    user: int | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    full_env = dict(cluster.env, PATH="/usr/bin:/bin", **(env or {}))
    # user/group/extra_groups, not a preexec_fn: Python code in a fork of this gRPC-threaded process can abort
    ids = {} if user is None else {"user": user, "group": user, "extra_groups": []}
    return subprocess.run(
        [str(native / argv[0]), *argv[1:]],
        env=full_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        **ids,
    )  # type: ignore[call-overload]


def test_listings_match_the_python_commands(native: Path, cluster: Cluster) -> None:
    held = cluster.submit("-H", "-J", "held-one", "--wrap", "true")
    for argv in (
        ("squeue",),
        ("squeue", "-t", "all", "-o", "%i %j %T %r"),
        ("sinfo",),
        ("sinfo", "-N", "-l"),
        ("scontrol", "show", "job", str(held)),
        ("squeue", "-j", "999999"),
    ):
        fast = _run(native, cluster, *argv)
        slow = cluster.run(*argv)
        if argv[0] == "sinfo" and "-l" in argv:  # its first line is the time of day
            fast_out, slow_out = fast.stdout.split("\n", 1)[1], slow.stdout.split("\n", 1)[1]
        elif argv[:2] == ("scontrol", "show"):  # RunTime ticks
            fast_out = "\n".join(w for w in fast.stdout.split() if not w.startswith("RunTime="))
            slow_out = "\n".join(w for w in slow.stdout.split() if not w.startswith("RunTime="))
        else:
            fast_out, slow_out = fast.stdout, slow.stdout
        assert (fast.returncode, fast_out, fast.stderr) == (slow.returncode, slow_out, slow.stderr), argv
    cluster.ok("scancel", str(held))


def test_a_user_submits_from_their_directory_with_their_environment(
    native: Path, cluster: Cluster, workdir: Path
) -> None:
    (workdir / "job.sh").write_text('#!/bin/sh\nid -u\npwd\necho "$GREETING"\n')
    os.chmod(workdir / "job.sh", 0o755)
    out = _run(
        native,
        cluster,
        "sbatch",
        "--parsable",
        "-o",
        "out-%j.txt",
        "job.sh",
        user=NOBODY,
        cwd=workdir,
        env={"SBATCH_JOB_NAME": "from-env", "GREETING": "hello from nobody"},
    )
    assert out.returncode == 0, out.stderr
    job = int(out.stdout.strip())
    assert cluster.wait_state(job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    assert cluster.job_field(job, "%j %u") == "from-env nobody"
    assert (workdir / f"out-{job}.txt").read_text().splitlines() == [
        str(NOBODY),
        str(workdir),
        "hello from nobody",
    ]
    # and a user still may not touch another's job
    root_job = cluster.submit("-H", "--wrap", "true")
    denied = _run(native, cluster, "scancel", str(root_job), user=NOBODY, cwd=workdir)
    slow = cluster.run("scancel", str(root_job), user=NOBODY, cwd=workdir)
    assert (denied.returncode, denied.stderr) == (slow.returncode, slow.stderr)
    assert denied.returncode != 0 and "Access/permission denied" in denied.stderr
    cluster.ok("scancel", str(root_job))


def test_sbatch_wait_returns_the_jobs_exit_code(native: Path, cluster: Cluster, workdir: Path) -> None:
    out = _run(native, cluster, "sbatch", "--wait", "-o", "/dev/null", "--wrap", "exit 3", cwd=workdir)
    assert out.returncode == 3, out.stderr
    assert out.stdout.startswith("Submitted batch job ")
