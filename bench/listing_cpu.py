"""CPU per `squeue` / `sinfo` call with N held jobs queued, real Slurm 22.05 then shoal, in one run.

    python bench/listing_cpu.py [--queue 500] [--reps 30] [--skip-slurm]

Per call, by role: the command itself (getrusage of this process's children), the controller
(slurmctld / shoal-ctld: utime+stime of its process from /proc), shoal's agent and command runner
(with the forks they reaped: a native command's Python half runs in the runner's forks), and munged.
CPU, not wall time, so the figures hold on a shared machine; the wall median is printed too. The
real Slurm must be up; its held jobs are submitted as alice and cancelled by id at the end. A fresh
shoal cluster (4 x 16 CPUs, 8 gpu:h100) is brought up with this process's PYTHONPATH and stopped.
Needs root. Figures only.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
SLURM_ENV = {**os.environ, "SLURM_CONF": "/etc/slurm/slurm.conf"}


def _cpu_s(pid: int, children: bool) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children else 0)
    return ticks / TICK


def _pids(match: dict[str, str], within: str) -> dict[int, str]:
    """Live processes whose command line has `within` and one of `match`'s keys: pid -> role."""
    found: dict[int, tuple[str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if within not in cmd:
            continue
        role = next((r for key, r in match.items() if key in cmd.split(" ")[0] or f" {key}" in cmd), None)
        if role:
            found[int(entry.name)] = (role, cmd)
    # a fork of a matched daemon (the runner's child still finishing a command) has its command line:
    # the parent counts it once reaped, and it may be gone before the measurement ends
    return {pid: role for pid, (role, cmd) in found.items() if found.get(_parent(pid), ("", ""))[1] != cmd}


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def measure(argv: list[str], env: dict[str, str], daemons: dict[int, str], reps: int) -> dict[str, float]:
    """Mean CPU ms per call by role, and the median wall ms."""
    subprocess.run(argv, env=env, capture_output=True, check=True)  # warm
    before = {pid: _cpu_s(pid, role != "ctld") for pid, role in daemons.items()}
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    walls = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"command": (usage1.ru_utime + usage1.ru_stime - usage0.ru_utime - usage0.ru_stime) * 1000 / reps}
    for pid, role in daemons.items():
        out[role] = out.get(role, 0.0) + (_cpu_s(pid, role != "ctld") - before[pid]) * 1000 / reps
    out["total"] = sum(out.values())
    out["wall median"] = statistics.median(walls) * 1000
    return out


def slurm(queue: int, reps: int) -> dict[str, dict[str, float]]:
    ids = []
    for _ in range(queue):
        out = subprocess.run(
            [
                "runuser",
                "-u",
                "alice",
                "--",
                "/usr/bin/sbatch",
                "--parsable",
                "-H",
                "-J",
                "perf2-listing",
                "-o",
                "/dev/null",
                "--chdir=/tmp",
                "--wrap=true",
            ],
            env=SLURM_ENV,
            capture_output=True,
            text=True,
            check=True,
        )
        ids.append(out.stdout.strip().split(";")[0])
    try:
        daemons = _pids({"slurmctld": "ctld", "munged": "auth (munge)"}, "")
        return {name: measure([f"/usr/bin/{name}"], SLURM_ENV, daemons, reps) for name in ("squeue", "sinfo")}
    finally:
        for start in range(0, len(ids), 200):
            subprocess.run(
                ["/usr/bin/scancel", *ids[start : start + 200]], env=SLURM_ENV, capture_output=True
            )


def shoal(queue: int, reps: int) -> dict[str, dict[str, float]]:
    directory = Path(tempfile.mkdtemp(prefix="listing-cpu-", dir="/tmp"))
    py = sys.executable
    scripts = Path(sysconfig.get_path("scripts"))
    up = subprocess.run(
        [
            py,
            "-m",
            "cli.shoal_admin",
            "up",
            "--dir",
            str(directory),
            "--nodes",
            "4",
            "--cpus-per-node",
            "16",
            "--mem-per-node",
            "64000",
            "--gpus-per-node",
            "8",
            "--gpu-type",
            "h100",
            "--no-check",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if up.returncode != 0:
        raise SystemExit(f"listing_cpu: shoal up failed: {up.stderr}")
    env = {**os.environ, "SLURM_CONF": str(directory / "slurm.conf")}
    try:
        for _ in range(queue):
            subprocess.run(
                [str(scripts / "sbatch"), "-H", "-o", "/dev/null", "--chdir=/tmp", "--wrap=true"],
                env=env,
                capture_output=True,
                check=True,
            )
        daemons = _pids(
            {"ctld.main": "ctld", "shoal.agent.agentd": "agent + runner", "cli.runner": "agent + runner"},
            str(directory),
        )
        return {name: measure([str(scripts / name)], env, daemons, reps) for name in ("squeue", "sinfo")}
    finally:
        subprocess.run(
            [py, "-m", "cli.shoal_admin", "down", "--dir", str(directory)], capture_output=True, timeout=120
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queue", type=int, default=500)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--skip-slurm", action="store_true")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}; PYTHONPATH={os.environ.get('PYTHONPATH', '')}")
    results = {} if args.skip_slurm else {"slurm": slurm(args.queue, args.reps)}
    results["shoal"] = shoal(args.queue, args.reps)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    for kind, by_command in results.items():
        for name, row in by_command.items():
            cells = ", ".join(f"{role} {ms:.2f}" for role, ms in row.items())
            print(f"{kind:6} {name:7} CPU ms per call: {cells}")
    if "slurm" in results:
        for name in ("squeue", "sinfo"):
            ratio = results["shoal"][name]["total"] / results["slurm"][name]["total"]
            print(f"{name}: shoal / Slurm, total CPU per call = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
