"""A real local cluster per test module: `shoal up` starts shoal-ctld and shoal-noded on loopback.

The commands run as subprocesses with SLURM_CONF pointing at the cluster, exactly as a user runs them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli.command import COMMANDS as NATIVE_COMMANDS

NOBODY = 65534
_next_block = [0]


@dataclass
class Cluster:
    dir: Path
    env: dict[str, str]
    up_output: str = ""  # what `shoal up` printed (its URLs)

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    def run(
        self,
        *argv: str,
        user: int | None = None,
        cwd: Path | str | None = None,
        input: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run a shoal command (`sbatch ...`) as root, or as `user` in a forked child.

        As another user the command runs in a fork of this process (modules already imported), because
        the interpreter itself may live where that user cannot read (/root/.pyenv).
        """
        full_env = dict(self.env, **(env or {}))
        if user is not None:
            return run_as(user, argv, full_env, cwd, input, timeout)
        cmd = [*_command(argv[0]), *argv[1:]]
        cwd = (
            cwd if cwd is not None else self.dir
        )  # a job's default slurm-%j.out lands there, not in the checkout
        return subprocess.run(
            cmd, env=full_env, cwd=cwd, input=input, capture_output=True, text=True, timeout=timeout
        )

    def ok(self, *argv: str, **kw: object) -> str:
        out = self.run(*argv, **kw)  # type: ignore[arg-type]
        assert out.returncode == 0, f"{argv} failed ({out.returncode}): {out.stderr}"
        return out.stdout

    def submit(self, *argv: str, **kw: object) -> int:
        return int(self.ok("sbatch", "--parsable", *argv, **kw).strip().split(";")[0])

    def job_field(self, job_id: int | str, fmt: str) -> str:
        return self.ok("squeue", "-h", "-t", "all", "-j", str(job_id), "-o", fmt).strip()

    def state(self, job_id: int | str) -> str:
        return self.job_field(job_id, "%T")

    def wait_state(self, job_id: int | str, states: set[str], timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.state(job_id)
            if state in states:
                return state
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} is {state!r}, not one of {states} after {timeout}s")

    def log(self, name: str = "ctld") -> str:
        path = self.dir / "log" / f"{name}.log"
        return path.read_text() if path.exists() else ""


# The short commands run as installed (the native launcher and the cluster's command runner), the
# path users take, at a tenth of the CPU of a fresh interpreter per command; SHOAL_TEST_COMMANDS=python
# runs them as `python -m cli.X` instead (tests/e2e/test_native_commands.py always compares the two).
_NATIVE = Path(sysconfig.get_path("scripts"))


def _command(name: str) -> list[str]:
    if os.environ.get("SHOAL_TEST_COMMANDS") != "python" and name in NATIVE_COMMANDS:
        return [str(_NATIVE / name)]
    return [sys.executable, "-m", f"cli.{name}"]


def run_as(
    user: int,
    argv: tuple[str, ...],
    env: dict[str, str],
    cwd: Path | str | None,
    input: str | None,
    timeout: float,
    enter: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`argv` as `user` in a fork; `enter` runs first in the child, as root (tests/e2e/hosts.py joins a
    separate host's namespaces there)."""
    import importlib
    import runpy

    for name in ("sbatch", "squeue", "sinfo", "scontrol", "scancel", "show", "fmt", "options", "common"):
        importlib.import_module(f"cli.{name}")
    importlib.import_module("shoal.rlimits")  # sbatch/srun import it (and `resource`) while they run
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: become the user, run the command's module as __main__
        code = 1
        try:
            os.dup2(in_r, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (out_r, err_r, in_w, in_r, out_w, err_w):
                os.close(fd)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            os.environ.clear()
            os.environ.update(env, HOME="/tmp")
            if enter is not None:
                enter()
            os.setgroups([])
            os.setgid(user)
            os.setuid(user)
            if cwd is not None:
                os.chdir(cwd)
            sys.argv = [argv[0], *argv[1:]]
            try:
                runpy.run_module(f"cli.{argv[0]}", run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # the child's own set-up failed: say so, or the test sees only "rc 1"
            import traceback

            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.close(out_w)
    os.close(err_w)
    os.close(in_r)
    if input:
        os.write(in_w, input.encode())
    os.close(in_w)
    with os.fdopen(out_r) as out_f, os.fdopen(err_r) as err_f:
        stdout, stderr = out_f.read(), err_f.read()
    _, status = os.waitpid(pid, 0)
    return subprocess.CompletedProcess(list(argv), os.waitstatus_to_exitcode(status), stdout, stderr)


def wait_until(what: str, check: Callable[[], object], timeout: float = 60) -> None:
    """Poll `check` until it is true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _quick_requeue(up_args: tuple[str, ...]) -> list[str]:
    """A requeued job waits cred_expire + 1 s (120 + 1 by default, as 22.05); tests wait 2 s, but the
    replay's realslurm-shaped cluster keeps the real one's wait (scenarios 183, 184)."""
    return [] if "--realslurm-shape" in up_args else ["--set", "AuthInfo=cred_expire=1"]


def start_cluster(
    directory: Path,
    nodes: int = 2,
    extra: tuple[str, ...] = (),
    cpus: int = 4,
    mem: int = 8000,
    up_args: tuple[str, ...] = (),
    accounting: bool = False,
    restd: bool = False,
) -> Cluster:
    """A local cluster through `shoal up`; shoal-restd only with `restd` (it costs every other
    module's cluster a second and a half of start-up)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    _next_block[0] += 1
    # distinct loopback addresses per xdist worker and cluster, so clusters never collide;
    # SHOAL_TEST_NET moves a whole test run elsewhere (two checkouts testing at once)
    net = int(os.environ.get("SHOAL_TEST_NET", "10"))
    base = f"127.{net + index}.{_next_block[0] % 250}.2"
    argv = [
        sys.executable,
        "-m",
        "cli.shoal_admin",
        "up",
        "--dir",
        str(directory),
        "--nodes",
        str(nodes),
        "--cpus-per-node",
        str(cpus),
        "--mem-per-node",
        str(mem),
        "--base-addr",
        base,
        "--no-check",
        *([] if accounting else ["--no-accounting"]),
        *([] if restd or "--no-restd" in up_args else ["--no-restd"]),
        "--set",
        "KillWait=2",
        "--set",
        "SlurmdTimeout=30",
        *_quick_requeue(up_args),
        *[a for e in extra for a in ("--set", e)],
        *up_args,
    ]
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SINFO_"))
    }
    env.pop("SHOAL_AGENT_SOCKET", None)
    directory.mkdir(parents=True, exist_ok=True)
    _let_everyone_through(directory)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        logs = "".join(p.read_text() for p in (directory / "log").glob("*") if p.is_file())
        raise RuntimeError(f"shoal up failed: {out.stderr}\n{logs}")
    env["SLURM_CONF"] = str(directory / "slurm.conf")
    return Cluster(dir=directory, env=env, up_output=out.stdout)


def stop_cluster(cluster: Cluster) -> None:
    subprocess.run(
        [sys.executable, "-m", "cli.shoal_admin", "down", "--dir", str(cluster.dir)],
        env=cluster.env,
        capture_output=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield c
    stop_cluster(c)


def _let_everyone_through(path: Path) -> None:
    """Make `path` and its parents (below /tmp) searchable, so other users reach sockets and files."""
    for p in (path, *path.parents):
        if str(p) in ("/", "/tmp"):
            break
        p.chmod(p.stat().st_mode | 0o011)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory every user may write (jobs of `nobody` write their output here)."""
    _let_everyone_through(tmp_path)
    tmp_path.chmod(0o1777)
    return tmp_path
