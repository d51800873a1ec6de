"""`shoal up` as a newcomer runs it: the installed command, from wherever they happen to stand."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

SCRIPTS = Path(sysconfig.get_path("scripts"))


def _base_addr() -> str:
    """A loopback block of this xdist worker that start_cluster never hands out (it uses 0-249)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    return f"127.{int(os.environ.get('SHOAL_TEST_NET', '10')) + index}.251.2"


def test_shoal_up_from_the_directory_that_holds_the_clone(tmp_path: Path) -> None:
    """Right after `git clone .../shoal`, the caller's cwd has a `shoal/` folder; no daemon may import it."""
    clone = tmp_path / "shoal"
    (clone / "shoal").mkdir(parents=True)
    (clone / "README.md").write_text("a clone\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "PYTHONPATH"))}
    env.pop("SHOAL_AGENT_SOCKET", None)
    directory = tmp_path / "cluster"
    shoal = str(SCRIPTS / "shoal")
    assert Path(shoal).exists(), f"the console script {shoal} is not installed (pip install -e .)"
    up = subprocess.run(
        [
            shoal,
            "up",
            "--dir",
            str(directory),
            "--nodes",
            "2",
            "--cpus-per-node",
            "2",
            "--base-addr",
            _base_addr(),
            "--no-accounting",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    try:
        logs = "".join(p.read_text() for p in (directory / "log").glob("*") if p.is_file())
        assert up.returncode == 0, f"{up.stderr}\n{logs}"
        assert "quick-start job 1 completed" in up.stdout
        assert "Traceback" not in logs
    finally:
        subprocess.run(
            [shoal, "down", "--dir", str(directory)], cwd=tmp_path, env=env, capture_output=True, timeout=60
        )


def _admin(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.shoal_admin", *argv], env=env, capture_output=True, text=True, timeout=180
    )


def test_defaults_help_status_and_set_on_an_existing_directory(tmp_path: Path) -> None:
    """Backfill and multifactor by default; --help shows defaults; status shows nodes and jobs; re-running
    `shoal up --set` on the same directory changes that key, a different --nodes is refused."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.pop("SHOAL_AGENT_SOCKET", None)
    help_text = _admin("up", "--help", env=env)
    assert help_text.returncode == 0 and "(default: 4)" in help_text.stdout, help_text.stdout
    directory = tmp_path / "cluster"
    shape = (
        "--dir",
        str(directory),
        "--nodes",
        "2",
        "--cpus-per-node",
        "2",
        "--base-addr",
        _base_addr(),
        "--no-accounting",
        "--no-check",
    )
    conf_env = dict(env, SLURM_CONF=str(directory / "slurm.conf"))
    try:
        up = _admin("up", *shape, env=env)
        assert up.returncode == 0, up.stderr
        config = subprocess.run(
            [sys.executable, "-m", "cli.scontrol", "show", "config"],
            env=conf_env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert re.search(r"^SchedulerType\s+= sched/backfill$", config, re.M), config
        assert re.search(r"^PriorityType\s+= priority/multifactor$", config, re.M), config
        assert re.search(r"^PriorityWeightFairshare\s+= 10000$", config, re.M | re.I), config
        status = _admin("status", "--dir", str(directory), env=env)
        assert status.returncode == 0, status.stdout + status.stderr
        assert re.search(r"^batch\*\s+up\s+infinite\s+2\s+idle node\[1-2\]$", status.stdout, re.M), (
            status.stdout
        )
        assert (
            "\njobs: 0 " in status.stdout and f"export SLURM_CONF={directory / 'slurm.conf'}" in status.stdout
        )
        assert f"logs: {directory / 'log'}/" in status.stdout
        _admin("down", "--dir", str(directory), env=env)

        refused = _admin("up", *shape, "--nodes", "3", env=env)
        assert refused.returncode == 1 and "--nodes 3" in refused.stderr and "--rewrite" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert "shoal-ctld: stopped" in _admin("status", "--dir", str(directory), env=env).stdout

        again = _admin("up", *shape, "--set", "SchedulerType=sched/builtin", env=env)
        assert again.returncode == 0, again.stderr
        assert "SchedulerType=sched/builtin (was SchedulerType=sched/backfill)" in again.stdout, again.stdout
        config = subprocess.run(
            [sys.executable, "-m", "cli.scontrol", "show", "config"],
            env=conf_env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert re.search(r"^SchedulerType\s+= sched/builtin$", config, re.M), config
    finally:
        _admin("down", "--dir", str(directory), env=env)


def _cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def test_more_node_cpus_than_the_host_has_is_said_and_scontrol_shows_the_nodes_ids(tmp_path: Path) -> None:
    """Issue 15: a node of more CPUs than this host: `shoal up` says a task's cpuset reads host CPUs;
    `scontrol -d show job` shows the node's ids (as 22.05 here: CPU_IDs=1-6 while the task reads 0-1)."""
    host = len(os.sched_getaffinity(0))
    cpus = host + 2
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.pop("SHOAL_AGENT_SOCKET", None)
    directory = tmp_path / "cluster"
    conf_env = dict(env, SLURM_CONF=str(directory / "slurm.conf"))
    try:
        up = _admin(
            "up",
            "--dir",
            str(directory),
            "--nodes",
            "1",
            "--cpus-per-node",
            str(cpus),
            "--base-addr",
            _base_addr(),
            "--no-accounting",
            "--no-check",
            env=env,
        )
        assert up.returncode == 0, up.stderr
        notes = [line for line in up.stdout.splitlines() if line.startswith("shoal: note: ")]
        assert len(notes) == 1 and f"emulate {cpus} CPUs on this host's {host}" in notes[0], up.stdout
        assert "CPU_IDs=" in notes[0]
        confined = (directory / "cgroup.conf").exists()
        assert ("cpuset" in notes[0]) == confined
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "cli.sbatch",
                "--parsable",
                "--wait",
                "-c",
                str(cpus),
                "-o",
                str(tmp_path / "out"),
                "--wrap",
                "grep Cpus_allowed_list /proc/self/status",
            ],
            env=conf_env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        shown = subprocess.run(
            [sys.executable, "-m", "cli.scontrol", "-d", "show", "job", out.stdout.strip()],
            env=conf_env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert f"     Nodes=node1 CPU_IDs=0-{cpus - 1} " in shown, shown
        task_cpus = _cpu_list((tmp_path / "out").read_text().split()[-1])
        assert task_cpus <= os.sched_getaffinity(0) and len(task_cpus) <= host  # the host's, as the note says
    finally:
        _admin("down", "--dir", str(directory), env=env)
