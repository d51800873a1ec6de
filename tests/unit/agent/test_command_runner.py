"""The native commands and the agent's warm command runner (cli/native/command.c, cli/runner.py).

Real processes throughout: the compiled launcher, the runner the agent starts, and the agent in front
of an authenticated gRPC server that answers Ping with the caller it was vouched for.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.command import COMMANDS
from cli.runner import SPARE_DEATHS, SPARES
from shoal.agent.protocol import RUNNER_SUFFIX
from shoal.agent.server import AgentServer
from tests.unit.agent.conftest import AGENT_HOST, KEY, PINGED_BY

NOBODY = 65534
SOURCE = Path(__file__).resolve().parents[3] / "cli" / "native" / "command.c"


def _wait_for(check: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture(scope="module")
def launcher_dir() -> Iterator[Path]:
    """A directory every user may read holding the launcher under every command's name, and nothing
    else: no `shoal-command` beside it, so a command the runner did not serve fails visibly."""
    installed = Path(sysconfig.get_path("scripts")) / "squeue"
    out = Path(tempfile.mkdtemp(prefix="shoal-launcher-"))  # pytest's tmp_path is private to root
    os.chmod(out, 0o755)
    binary = out / "launcher.bin"
    if installed.exists() and installed.read_bytes()[:4] == b"\x7fELF":
        shutil.copy(installed, binary)
    else:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            pytest.skip("no C compiler: the short commands are installed as Python scripts")
        subprocess.run([cc, "-O2", "-o", str(binary), str(SOURCE)], check=True)
    for name in COMMANDS:
        shutil.copy(binary, out / name)
        os.chmod(out / name, 0o755)
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture
def runner_agent(ctld: str, public_dir: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[AgentServer]:
    """An agent with its command runner; SHOAL_AGENT_SOCKET points the commands at it."""
    path = os.path.join(public_dir, "run", "agent.sock")
    server = AgentServer(path, KEY, {"ctld": ctld}, host=AGENT_HOST, command_runner=True)
    server.start()
    monkeypatch.setenv("SHOAL_AGENT_SOCKET", path)
    _wait_for(lambda: os.path.exists(path + RUNNER_SUFFIX))
    yield server
    server.stop()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SHOAL_COMMAND_RUNNER",)}
    env["PATH"] = "/usr/bin:/bin"  # no shoal-command on PATH: only the runner can answer
    env.update(extra)
    return env


def _native(
    launcher_dir: Path, *argv: str, user: int | None = None, **kw: object
) -> subprocess.CompletedProcess[str]:
    # user/group/extra_groups, not a preexec_fn: Python code in a fork of this gRPC-threaded process can abort
    ids = {} if user is None else {"user": user, "group": user, "extra_groups": []}
    return subprocess.run(
        [str(launcher_dir / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=60, **ids, **kw
    )  # type: ignore[call-overload]


def _python(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"cli.{argv[0]}", *argv[1:]], capture_output=True, text=True, timeout=60, **kw
    )  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "argv",
    [
        ("scontrol", "show", "hostnames", "gpu[01-03]"),
        ("scontrol", "ping"),
        ("squeue", "--no-such-option"),
        ("sinfo", "--version"),
        ("sbatch", "/nonexistent/script.sh"),
        ("scancel",),
    ],
)
def test_native_command_prints_and_exits_as_the_python_command(
    runner_agent: AgentServer, launcher_dir: Path, argv: tuple[str, ...]
) -> None:
    native = _native(launcher_dir, *argv, env=_env())
    python = _python(*argv, env=_env())
    assert (native.returncode, native.stdout, native.stderr) == (
        python.returncode,
        python.stdout,
        python.stderr,
    )
    assert "shoal-command" not in native.stderr


def test_native_command_runs_as_the_caller_with_its_environment(
    runner_agent: AgentServer, launcher_dir: Path, public_dir: str
) -> None:
    as_root = _native(launcher_dir, "scontrol", "ping", env=_env())
    assert as_root.stdout.endswith(" is UP\n") and PINGED_BY[-1] == (0, 0, AGENT_HOST)
    as_nobody = _native(launcher_dir, "scontrol", "ping", env=_env(), user=NOBODY, cwd=public_dir)
    assert as_nobody.returncode == 0, as_nobody.stderr
    assert as_nobody.stdout.endswith(" is UP\n") and PINGED_BY[-1] == (NOBODY, NOBODY, AGENT_HOST)
    # the caller's environment, not the runner's: `show hostnames` defaults to $SLURM_JOB_NODELIST
    out = _native(
        launcher_dir,
        "scontrol",
        "show",
        "hostnames",
        env=_env(SLURM_JOB_NODELIST="a[7-8]"),
        user=NOBODY,
        cwd=public_dir,
    )
    assert out.stdout == "a7\na8\n"


def test_native_command_reads_stdin_and_works_in_the_callers_directory(
    runner_agent: AgentServer, launcher_dir: Path, public_dir: str
) -> None:
    workdir = Path(public_dir) / "work"
    workdir.mkdir()
    (workdir / "job.sh").write_text("#!/bin/sh\n#SBATCH --bogus-directive\ntrue\n")
    os.chmod(workdir, 0o777)
    # a relative script path resolves in the caller's directory: sbatch reads it and refuses its directive
    by_path = _native(launcher_dir, "sbatch", "job.sh", env=_env(), cwd=workdir, user=NOBODY)
    by_python = _python("sbatch", "job.sh", env=_env(), cwd=workdir)
    assert by_path.returncode == by_python.returncode != 0
    assert by_path.stderr == by_python.stderr
    # and the script can come on stdin
    by_stdin = _native(
        launcher_dir, "sbatch", env=_env(), cwd=workdir, input=(workdir / "job.sh").read_text()
    )
    assert by_stdin.stderr == by_python.stderr


def test_without_a_runner_the_launcher_runs_the_python_command(
    agent: AgentServer, launcher_dir: Path, tmp_path: Path
) -> None:
    scripts = sysconfig.get_path("scripts")
    if not os.path.exists(os.path.join(scripts, "shoal-command")):
        pytest.skip("shoal-command is not installed in this environment")
    out = _native(launcher_dir, "scontrol", "ping", env=_env(PATH=f"{scripts}:/usr/bin:/bin"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.endswith(" is UP\n") and PINGED_BY[-1] == (0, 0, AGENT_HOST)
    # the same launcher finding no shoal-command says so
    missing = _native(launcher_dir, "scontrol", "ping", env=_env())
    assert (missing.returncode, missing.stdout) == (1, "")
    assert "cannot run shoal-command" in missing.stderr


def test_shoal_command_runner_0_bypasses_the_runner(runner_agent: AgentServer, launcher_dir: Path) -> None:
    out = _native(launcher_dir, "scontrol", "ping", env=_env(SHOAL_COMMAND_RUNNER="0"))
    assert out.returncode == 1
    assert "cannot run shoal-command" in out.stderr


def test_runner_survives_garbage_and_half_requests(runner_agent: AgentServer, launcher_dir: Path) -> None:
    path = runner_agent.socket_path + RUNNER_SUFFIX
    stalled = socket.socket(socket.AF_UNIX)
    stalled.connect(path)
    stalled.sendall(b"SHR1\x06\x00")  # a request that never completes
    for junk in (b"GET / HTTP/1.0\r\n\r\n", b"SHR1" + b"\xff" * 64, b""):
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(path)
            conn.sendall(junk)
    out = _native(launcher_dir, "scontrol", "ping", env=_env())
    assert out.stdout.endswith(" is UP\n") and PINGED_BY[-1] == (0, 0, AGENT_HOST)
    stalled.close()


def test_signals_reach_the_command_and_its_status_comes_back(
    runner_agent: AgentServer, launcher_dir: Path
) -> None:
    def interrupted(argv: list[str]) -> tuple[int, str]:
        # `sbatch` without a script reads it from stdin: it blocks there until interrupted
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
        )
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)  # stdin stays open: only the signal can end it
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.communicate()
        return code, err

    assert interrupted([str(launcher_dir / "sbatch")]) == interrupted([sys.executable, "-m", "cli.sbatch"])
    assert interrupted([str(launcher_dir / "sbatch")])[0] == 130


def test_a_killed_launcher_takes_its_command_with_it(runner_agent: AgentServer, launcher_dir: Path) -> None:
    runner_pid = _runner_pid(runner_agent)
    spares = _spares(runner_pid)
    proc = subprocess.Popen(
        [str(launcher_dir / "sbatch")],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    # a spare took it (the runner forks its replacement) and waits for the script on stdin
    _wait_for(lambda: len(_children(runner_pid) - spares) == 1)
    proc.kill()
    proc.wait()
    _wait_for(lambda: len(spares - _children(runner_pid)) == 1)  # that command is gone, the others wait on
    assert len(_children(runner_pid)) == len(spares)


def test_the_runner_leaves_with_its_agent(ctld: str, public_dir: str) -> None:
    path = os.path.join(public_dir, "run", "agent.sock")
    server = AgentServer(path, KEY, {"ctld": ctld}, host=AGENT_HOST, command_runner=True)
    server.start()
    _wait_for(lambda: os.path.exists(path + RUNNER_SUFFIX))
    runner_pid = _runner_pid(server)
    spares = _spares(runner_pid)
    server.stop()
    _wait_for(lambda: not _alive(runner_pid))
    assert not os.path.exists(path + RUNNER_SUFFIX)
    assert not [pid for pid in spares if _alive(pid)]  # no spare is left waiting


def test_a_runner_that_died_is_started_again(runner_agent: AgentServer, launcher_dir: Path) -> None:
    first = _runner_pid(runner_agent)
    spares = _spares(first)
    os.kill(first, signal.SIGKILL)
    _wait_for(lambda: not [pid for pid in spares if _alive(pid)])  # its spares die with it
    _wait_for(
        lambda: (
            _runner_pid(runner_agent) != first
            and stat.S_ISSOCK(os.stat(runner_agent.socket_path + RUNNER_SUFFIX).st_mode)
        ),
        timeout=30,
    )
    _wait_for(lambda: _native(launcher_dir, "scontrol", "ping", env=_env()).returncode == 0)


def test_each_command_gets_its_own_caller_in_turn_and_side_by_side(
    runner_agent: AgentServer, launcher_dir: Path, public_dir: str
) -> None:
    work = Path(public_dir) / "work"
    work.mkdir()
    os.chmod(work, 0o777)
    (work / "job.sh").write_text("#!/bin/sh\n#SBATCH --bogus-directive\ntrue\n")
    nobody = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    # one command stays open beside the others: sbatch waiting for its script on stdin
    held = subprocess.Popen(
        [str(launcher_dir / "sbatch")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=work,
        **nobody,  # type: ignore[arg-type]
    )
    for i in range(2 * SPARES + 1):  # more commands than spares: the first ones, and those forked after them
        user = NOBODY if i % 2 else None
        cwd = work if i % 3 else Path(public_dir)
        listed = _native(
            launcher_dir,
            "scontrol",
            "show",
            "hostnames",
            env=_env(SLURM_JOB_NODELIST=f"n[{i}-{i + 1}]"),
            user=user,
        )
        assert (listed.returncode, listed.stdout) == (0, f"n{i}\nn{i + 1}\n")
        ping = _native(launcher_dir, "scontrol", "ping", env=_env(), user=user, cwd=public_dir)
        assert ping.returncode == 0, ping.stderr
        assert PINGED_BY[-1] == ((NOBODY, NOBODY, AGENT_HOST) if user else (0, 0, AGENT_HOST))
        # what the command before was given (its environment, its directory) is not seen by the next
        for argv in (("scontrol", "show", "hostnames"), ("sbatch", "job.sh"), ("squeue", "--no-such-option")):
            native = _native(launcher_dir, *argv, env=_env(), user=user, cwd=cwd)
            python = _python(*argv, env=_env(), cwd=cwd)
            assert (native.returncode, native.stdout, native.stderr) == (
                python.returncode,
                python.stdout,
                python.stderr,
            ), (i, argv)
    _out, err = held.communicate((work / "job.sh").read_text(), timeout=60)
    reference = _python("sbatch", env=_env(), cwd=work, input=(work / "job.sh").read_text())
    assert (held.returncode, err) == (reference.returncode, reference.stderr) and held.returncode != 0


def test_a_spare_killed_while_it_waits_is_replaced(runner_agent: AgentServer, launcher_dir: Path) -> None:
    runner_pid = _runner_pid(runner_agent)
    spares = _spares(runner_pid)
    for pid in spares:
        os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: len(_children(runner_pid)) == SPARES and not _children(runner_pid) & spares)
    out = _native(launcher_dir, "scontrol", "ping", env=_env())
    assert out.stdout.endswith(" is UP\n") and PINGED_BY[-1] == (0, 0, AGENT_HOST)


def test_a_runner_whose_spares_keep_dying_forks_per_command(
    runner_agent: AgentServer, launcher_dir: Path
) -> None:
    runner_pid = _runner_pid(runner_agent)
    killed: set[int] = set()
    deadline = time.monotonic() + 30
    while len(killed) < SPARE_DEATHS + SPARES and time.monotonic() < deadline:
        for pid in _children(runner_pid) - killed:
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.05)
    _wait_for(lambda: not _children(runner_pid))  # it has given up forking spares ...
    time.sleep(0.5)
    assert not _children(runner_pid)
    # ... and forks per command: one held open, another beside it, each with its own caller and status
    held = subprocess.Popen(
        [str(launcher_dir / "sbatch")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    _wait_for(lambda: len(_children(runner_pid)) == 1)
    out = _native(launcher_dir, "scontrol", "ping", env=_env(), user=NOBODY)
    assert out.returncode == 0 and PINGED_BY[-1] == (NOBODY, NOBODY, AGENT_HOST)
    _out, err = held.communicate("#!/bin/sh\n#SBATCH --bogus-directive\ntrue\n", timeout=60)
    assert held.returncode != 0 and "bogus-directive" in err
    _wait_for(lambda: not _children(runner_pid))


def _runner_pid(server: AgentServer) -> int:
    runner = server._runner
    assert runner is not None
    return runner.pid


def _spares(runner_pid: int) -> set[int]:
    """The runner's children once it has forked its spares (none is running a command)."""
    _wait_for(lambda: len(_children(runner_pid)) == SPARES)
    return _children(runner_pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid: int) -> set[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return {int(p) for p in fh.read().split()}
    except FileNotFoundError:
        return set()


def test_the_runner_loads_what_the_short_commands_load_and_nothing_heavier() -> None:
    code = (
        "import sys, cli.runner as r; r.preload(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'sqlalchemy', 'alembic', 'ctld', "
        "'noded', 'dbd')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_runner_that_cannot_listen_is_not_started_again(ctld: str, public_dir: str) -> None:
    # the agent's path fits a unix socket address (108 bytes), the runner's (".run" more) does not
    base = os.path.join(public_dir, "run")
    path = os.path.join(base, "a" * (105 - len(base) - 1))
    assert len(path) == 105
    server = AgentServer(path, KEY, {"ctld": ctld}, host=AGENT_HOST, command_runner=True)
    server.start()
    try:
        _wait_for(lambda: server._runner is None)  # it exited (cannot listen) and the agent gave up
        assert os.path.exists(path)  # the agent itself serves on
    finally:
        server.stop()


def test_the_launcher_knows_the_same_commands_as_shoal_command() -> None:
    text = SOURCE.read_text()
    block = text[text.index("COMMANDS[] = {") : text.index("};", text.index("COMMANDS[] = {"))]
    assert (
        tuple(
            part.strip().strip('"')
            for part in block.split("{", 1)[1].split(",")
            if part.strip() and part.strip() != "NULL"
        )
        == COMMANDS
    )
