"""The short-command floor, measured from outside: what one command costs before and around its own work.

Issue 19 asks, where a target cannot be met, for the benchmark to show the floor that stops it. The
floor of a listing or a held submission is what every command pays whatever it does: starting, and one
authenticated call to the controller. Each probe below runs `calls` times in a row (after a few unmeasured
calls), on real Slurm and on shoal alike, and reports per call: wall time; host CPU (every process,
/proc/stat) and minor page faults (/proc/vmstat); and the CPU of each daemon role (cpuacct groups, as
vs_slurm's CPU split; "command" is what the caller's own process used: Slurm's whole C command, shoal's
native launcher, whose Python runs in the runner's fork).

    probe         what it is                               what it shows
    baseline      /bin/true                                the harness's own fork/exec/wait
    start-up      squeue --version                         a command that starts and exits, no controller
    round trip    scontrol ping                            start-up + one call to the controller doing nothing
    squeue/sinfo  the listings                             the targets (run first: the queue is empty)
    held sbatch   sbatch -H --wrap=true (cancelled after)  the held-submission target

Run through bench/vs_slurm.py (`--floor` alone, or with its default run). Figures only.
"""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

PROBES: tuple[tuple[str, list[str]], ...] = (
    ("baseline: /bin/true", ["/bin/true"]),
    ("start-up: `squeue --version`", ["squeue", "--version"]),
    ("round trip: `scontrol ping`", ["scontrol", "ping"]),
    ("`squeue`", ["squeue"]),
    ("`sinfo`", ["sinfo"]),
    ("held `sbatch -H --wrap=true`", ["sbatch", "-H", "--wrap=true"]),
)
WARM_CALLS = 10


class Probe(NamedTuple):
    wall_ms: float
    host_cpu_ms: float
    faults: float
    roles_ms: dict[str, float]  # CPU by daemon role, per call


def _host_cpu_s() -> float:
    """CPU seconds every CPU of the host has spent busy (not idle, not waiting on I/O)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def _host_faults() -> int:
    for line in Path("/proc/vmstat").read_text().splitlines():
        if line.startswith("pgfault "):
            return int(line.split()[1])
    return 0


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _call(cmd: list[str], env: dict[str, str], cwd: str) -> None:
    subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def measure(
    bin_dir: Path,
    env: Mapping[str, str],
    calls: int,
    role_usage: Callable[[], dict[str, float]],
) -> dict[str, Probe]:
    """Every probe, `calls` times each, against the implementation whose commands are in `bin_dir`.
    `role_usage` reads the daemons' CPU seconds by role (vs_slurm.RoleGroups.usage_s)."""
    full_env = {**os.environ, **env}
    work = tempfile.mkdtemp(prefix="command_floor.")
    name = f"floor_{os.getpid()}_{int(time.time())}"
    results: dict[str, Probe] = {}
    try:
        for label, argv in PROBES:
            exe = argv[0] if argv[0].startswith("/") else str(bin_dir / argv[0])
            cmd = [exe, *argv[1:], *(["-J", name] if argv[0] == "sbatch" else [])]

            for _ in range(WARM_CALLS):
                _call(cmd, full_env, work)
            roles0, cpu0, faults0, own0 = role_usage(), _host_cpu_s(), _host_faults(), _children_cpu_s()
            t0 = time.perf_counter()
            for _ in range(calls):
                _call(cmd, full_env, work)
            wall = time.perf_counter() - t0
            roles1, cpu1, faults1, own1 = role_usage(), _host_cpu_s(), _host_faults(), _children_cpu_s()
            roles = {r: 1000 * (roles1[r] - roles0[r]) / calls for r in roles1}
            roles["command"] = 1000 * (own1 - own0) / calls
            results[label] = Probe(
                1000 * wall / calls, 1000 * (cpu1 - cpu0) / calls, (faults1 - faults0) / calls, roles
            )
    finally:
        subprocess.run(
            [str(bin_dir / "scancel"), "-n", name], env=full_env, capture_output=True, check=False, timeout=60
        )
        for entry in Path(work).iterdir():
            entry.unlink()
        os.rmdir(work)
    return results


def report(slurm: dict[str, Probe], shoal: dict[str, Probe], calls: int, roles: tuple[str, ...]) -> list[str]:
    """Markdown: the probes side by side, shoal's CPU by role, and each target against the floor."""
    lines = [
        f"| per call ({calls} calls in a row, queue empty) | Slurm 22.05 wall / host CPU / faults "
        "| shoal wall / host CPU / faults | wall ratio |",
        "|---|---|---|---|",
    ]
    for label, _ in PROBES:
        a, b = slurm[label], shoal[label]
        lines.append(
            f"| {label} | {a.wall_ms:.2f} ms / {a.host_cpu_ms:.2f} ms / {a.faults:.0f} "
            f"| {b.wall_ms:.2f} ms / {b.host_cpu_ms:.2f} ms / {b.faults:.0f} | {b.wall_ms / a.wall_ms:.2f}x |"
        )
    shown = [
        r for r in roles if any(p.roles_ms.get(r, 0.0) >= 0.005 for p in (*slurm.values(), *shoal.values()))
    ]
    lines += [
        "",
        "| CPU ms per call by role (Slurm / shoal) | " + " | ".join(shown) + " |",
        "|---|" + "---|" * len(shown),
    ]
    for label, _ in PROBES[1:]:
        cells = [
            f"{slurm[label].roles_ms.get(r, 0.0):.2f} / {shoal[label].roles_ms.get(r, 0.0):.2f}"
            for r in shown
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", *floor_lines(slurm, shoal)]
    return lines


def floor_lines(slurm: dict[str, Probe], shoal: dict[str, Probe]) -> list[str]:
    """Each target's budget (from Slurm's figure in this run) against shoal's floor: its round trip,
    the cost of a command that calls the controller and does nothing else."""
    base_slurm = slurm[PROBES[0][0]].wall_ms
    base_shoal = shoal[PROBES[0][0]].wall_ms
    start = shoal[PROBES[1][0]].wall_ms - base_shoal
    trip = shoal[PROBES[2][0]].wall_ms - base_shoal
    out = [
        f"shoal's floor, net of the harness's /bin/true ({base_shoal:.2f} ms): start-up {start:.2f} ms, "
        f"round trip {trip:.2f} ms (of which the call itself {trip - start:.2f} ms).",
    ]
    targets = (
        ("`squeue`", 1.2, "<= 1.2x"),
        ("`sinfo`", 1.2, "<= 1.2x"),
        ("held `sbatch -H --wrap=true`", 1.0, ">= 1x rate"),
    )
    for label, factor, words in targets:
        budget = factor * (slurm[label].wall_ms - base_slurm)
        own = shoal[label].wall_ms - base_shoal
        verdict = (
            "met"
            if own <= budget
            else (
                "below shoal's floor: not reachable without a cheaper command path"
                if budget < trip
                else f"above the floor: {own - budget:.2f} ms of the command's own work to cut"
            )
        )
        out.append(
            f"- {label} ({words} Slurm's): budget {budget:.2f} ms net, shoal {own:.2f} ms net "
            f"(floor {trip:.2f} + its own work {own - trip:.2f}): {verdict}."
        )
    # Parallel submitters on a small host are CPU-bound: the ceiling is the host's CPUs over the CPU
    # that one submission costs the whole host (command, runner, agent, controller, accounting).
    held = PROBES[-1][0]
    cores = os.cpu_count() or 1
    ceilings = {k: 1000 * cores / p[held].host_cpu_ms for k, p in (("slurm", slurm), ("shoal", shoal))}
    share = ceilings["shoal"] / ceilings["slurm"]
    out.append(
        f"- parallel submitters (>= 0.7x Slurm's rate): CPU-bound on {cores} CPUs, one held submission costs "
        f"the host {slurm[held].host_cpu_ms:.2f} ms (Slurm) / {shoal[held].host_cpu_ms:.2f} ms (shoal): "
        f"at most {ceilings['slurm']:.0f} / {ceilings['shoal']:.0f} submissions/s, shoal's best {share:.2f}x "
        f"of Slurm's{' (below the target: the floor)' if share < 0.7 else ''}; jobs that run meanwhile cost "
        "both more (vs_slurm's CPU split)."
    )
    return out
