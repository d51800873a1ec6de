"""The systemd units of etc/systemd, run as systemd would: each daemon started from its unit's ExecStart
(options from the EnvironmentFile's variable), READY=1 on the test's $NOTIFY_SOCKET once it serves,
commands answered, and a clean exit 0 on SIGTERM. The daemons run as root here: the unit's User=slurm
could not start this checkout's interpreter (see docs/deploy.md, "Install").
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli import shoal_admin
from tests.e2e.conftest import wait_until

pytestmark = pytest.mark.e2e

UNITS = Path(__file__).resolve().parents[2] / "etc" / "systemd"
PREFIX = "/opt/shoal/bin/"
SCRIPTS = sysconfig.get_path("scripts") + "/"
DAEMONS = ("shoal-dbd", "shoal-ctld", "shoal-noded", "shoal-agentd")


def unit(name: str) -> dict[str, dict[str, str]]:
    """A unit file's sections and keys (the last value of a repeated key, as systemd's for these keys)."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for raw in (UNITS / f"{name}.service").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current[key.strip()] = value.strip()
    return sections


def exec_start(name: str, env: dict[str, str]) -> list[str]:
    """ExecStart as systemd runs it: `$VAR` becomes the variable's words, the prefix this environment's."""
    argv: list[str] = []
    for word in shlex.split(unit(name)["Service"]["ExecStart"]):
        if re.fullmatch(r"\$\w+", word):
            argv.extend(env.get(word[1:], "").split())
        else:
            argv.append(word)
    assert argv[0].startswith(PREFIX), argv
    return [SCRIPTS + argv[0][len(PREFIX) :], *argv[1:]]


def environment_variable(name: str) -> str:
    """The options variable the unit's ExecStart expands (SHOAL_CTLD_OPTIONS ...)."""
    found = re.findall(r"\$(\w+)", unit(name)["Service"]["ExecStart"])
    assert len(found) == 1, found
    return str(found[0])


@pytest.mark.parametrize("name", (*DAEMONS, "shoal-restd"))
def test_each_unit_runs_as_an_admin_moving_from_slurm_expects(name: str) -> None:
    u = unit(name)
    service = u["Service"]
    assert "network-online.target" in u["Unit"]["After"] and u["Unit"]["Wants"] == "network-online.target"
    assert service["Type"] == "notify" and service["Restart"] == "on-failure"
    assert service["EnvironmentFile"] == f"-/etc/default/{name}"
    assert service["ExecStart"] == f"{PREFIX}{name} -D ${environment_variable(name)}"
    assert int(service["LimitNOFILE"]) >= 65536
    assert u["Install"]["WantedBy"] == "multi-user.target"
    if name in ("shoal-ctld", "shoal-dbd", "shoal-restd"):
        assert service["User"] == "slurm"  # SlurmUser, never root
    else:
        assert "User" not in service  # root: noded starts tasks as users; agentd's runner becomes callers
    if name == "shoal-noded":
        assert service["KillMode"] == "process"  # stepd and tasks outlive a noded restart
    if name == "shoal-dbd":
        assert "mariadb.service" in u["Unit"]["After"]


def test_systemd_analyze_verify_finds_nothing_wrong(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    for name in (
        *DAEMONS,
        "shoal-restd",
    ):  # the units as installed with shoal in this environment instead of /opt/shoal
        text = (UNITS / f"{name}.service").read_text().replace(PREFIX, SCRIPTS)
        (tmp_path / f"{name}.service").write_text(text)
    out = subprocess.run(
        [analyze, "verify", *sorted(str(p) for p in tmp_path.glob("*.service"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout + out.stderr == "", out.stdout + out.stderr


class Notify:
    """A $NOTIFY_SOCKET of our own, as systemd makes for each Type=notify service."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(90)

    def next(self) -> dict[str, str]:
        data = self.sock.recv(4096).decode()
        return dict(line.partition("=")[::2] for line in data.splitlines() if line)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    """One node's cluster with accounting (slurmdbd.conf on SQLite), as `shoal up` writes it."""
    net = int(os.environ.get("SHOAL_TEST_NET", "10"))
    args = shoal_admin._parser().parse_args(
        [
            "up",
            "--dir",
            str(tmp_path),
            "--nodes",
            "1",
            "--cpus-per-node",
            "2",
            "--mem-per-node",
            "2000",
            "--base-addr",
            f"127.{net}.253.2",
            "--set",
            "KillWait=2",
        ]
    )
    return shoal_admin.write_config(args, tmp_path)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_daemons_started_as_their_units_say_serve_and_stop_cleanly(
    tmp_path: Path, conf: Path, started: list[subprocess.Popen[str]]
) -> None:
    login_socket = tmp_path / "run" / "login.sock"
    options = {
        "shoal-dbd": f"-f {tmp_path / 'slurmdbd.conf'}",
        "shoal-ctld": f"-f {conf}",
        "shoal-noded": f"-f {conf} -N node1",  # its local agent on AgentSocket: the compute node's
        "shoal-agentd": f"-f {conf} --socket {login_socket}",  # a login host's
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SHOAL_AGENT"))}
    notifies = {}
    for name in DAEMONS:  # the order systemd's After= and an admin's `systemctl start` give
        notify = notifies[name] = Notify(tmp_path / f"{name}.notify")
        env = dict(base, NOTIFY_SOCKET=str(notify.path), **{environment_variable(name): options[name]})
        proc = subprocess.Popen(
            exec_start(name, env),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        started.append(proc)
        try:
            ready = notify.next()
        except TimeoutError:
            proc.kill()
            raise AssertionError(f"{name}: no READY=1: {proc.communicate(timeout=30)}") from None
        assert ready == {"READY": "1", "MAINPID": str(proc.pid)}, ready

    commands = dict(base, SLURM_CONF=str(conf))
    work = tmp_path / "work"
    work.mkdir()

    def run(*argv: str, agent: Path | None = None) -> str:
        env = dict(commands, SHOAL_AGENT_SOCKET=str(agent)) if agent else commands
        out = subprocess.run(
            [sys.executable, "-m", *argv], env=env, cwd=work, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, f"{argv}: {out.stderr}"
        return out.stdout

    # through noded's agent; READY=1 means noded serves, its registration with ctld follows
    wait_until(
        "node1 idle",
        lambda: run("cli.sinfo", "-h", "-p", "batch", "-o", "%N %t").split() == ["node1", "idle"],
    )
    job = run(
        "cli.sbatch", "--parsable", "--wait", "-o", "out-%j", "--wrap", "echo served", agent=login_socket
    ).strip()
    assert (work / f"out-{job}").read_text() == "served\n"
    accounted = run("cli.sacct", "-n", "-X", "-P", "-j", job, "-o", "JobID,State", agent=login_socket)
    assert accounted.split() == [f"{job}|COMPLETED"]  # ctld reached dbd
    assert run("cli.sacct", "-n", "-X", "-P", "-j", job, "-o", "JobID").split() == [
        job
    ]  # on a compute node too

    log = tmp_path / "log" / "ctld.log"  # logrotate moves the file away, then signals the daemon
    log.rename(tmp_path / "log" / "ctld.log.1")
    os.kill(started[DAEMONS.index("shoal-ctld")].pid, signal.SIGHUP)
    wait_until("a new ctld.log", lambda: log.exists() and "SIGHUP: log file reopened" in log.read_text())
    assert "shoal-ctld listening on" in (tmp_path / "log" / "ctld.log.1").read_text()

    for name, proc in reversed(list(zip(DAEMONS, started, strict=True))):  # systemctl stop: SIGTERM
        os.kill(proc.pid, signal.SIGTERM)
        assert notifies[name].next() == {"STOPPING": "1"}
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"{name}: {err}"
        assert "Traceback" not in err
        if name == "shoal-ctld":  # -D copies the log (here SlurmctldLogFile) to stderr
            assert "shoal-ctld listening on" in err
        notifies[name].close()
    assert not login_socket.exists() and not (tmp_path / "run" / "agent.sock").exists()
    assert "shoal-ctld stopping" in log.read_text()


@pytest.mark.parametrize(
    "module", ["ctld.main", "noded.main", "dbd.main", "shoal.agent.agentd", "restd.main"]
)
@pytest.mark.parametrize("bad", [["--bogus"], ["-f"]], ids=["unknown-option", "missing-value"])
def test_a_bad_daemon_option_is_the_usage_and_exit_1(module: str, bad: list[str]) -> None:
    """As slurmctld/slurmd/slurmdbd 22.05: the usage on stderr, exit 1 (argparse alone exits 2)."""
    out = subprocess.run([sys.executable, "-m", module, *bad], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith("usage: shoal-") and "Traceback" not in out.stderr
    assert re.search(r"^shoal-\w+: error: ", out.stderr, re.M), out.stderr
