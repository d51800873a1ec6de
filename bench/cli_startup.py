"""Process time of one short command (sbatch -H, squeue, sinfo) and what its start-up costs.

    python bench/cli_startup.py                 # brings up a 4-node cluster in a temp dir, queues
                                                # 500 held jobs, measures, tears it down
    python bench/cli_startup.py --reps 30 --queue 500 --keep

Each figure is the wall time of fork+exec+run+exit of one command (median of --reps calls, plus
the mean user+sys CPU per call from getrusage, and "agent ms": the CPU per call of the cluster's agent and
command runner, whose forks run a native command's Python half), run the way a user runs it: the console script
next to the interpreter. Variants:

  installed   bytecode cached (PYTHONPYCACHEPREFIX set, PYTHONDONTWRITEBYTECODE unset): what an
              installed package does; the headline figure
  no-pyc      PYTHONDONTWRITEBYTECODE=1 and no cache: this dev checkout as it is (the editable
              install has no __pycache__, so shoal's modules are compiled from source every call)
  no-site     python -S with PYTHONPATH=repo:site-packages, bytecode cached: skips site-packages'
              .pth hooks (the editable-install finder, and this sandbox's certifi CA hook), an
              estimate of a plain (non-editable) install
Baselines: `python -c pass`, `python -S -c pass`, and `python -S -c 'import google.protobuf...'`.

Then `python -X importtime -m cli.squeue -h` (installed variant, cluster up): the top imports by
cumulative and by self time, and the cumulative time of each top-level import.
Figures only; nothing is asserted. Slurm 22.05's C binaries on this machine: sbatch ~55 ms,
squeue ~40 ms (issue figures); target: within 4x (220 ms, 160 ms).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sysconfig.get_path("scripts"))  # the console scripts (a venv's bin, not its interpreter's)
PY = sys.executable  # the environment shoal is installed in (a venv's interpreter, not what it links to)


def agent_pids(directory: str) -> list[int]:
    """The cluster's local agent and its command runner (whose forks run the native commands), not the
    runner's spares: their CPU reaches the runner's (cutime) once each has run its command."""
    found: dict[int, int] = {}  # pid -> parent
    runners = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if directory in cmd and ("cli.runner" in cmd or "shoal.agent.agentd" in cmd):
            found[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
            if "cli.runner" in cmd:
                runners.add(int(entry))
    return [pid for pid, parent in found.items() if parent not in runners]


def process_cpu_s(pids: list[int]) -> float:
    """CPU seconds of these processes and of their children they have waited for (utime..cstime)."""
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        total += sum(int(f) for f in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def run_many(
    argv: list[str], env: dict[str, str], reps: int, warm: int = 2, agent: Sequence[int] = ()
) -> tuple[float, float, float, float]:
    """(median wall ms, min wall ms, mean user+sys CPU ms of the command, mean CPU ms of the agent and
    runner, their forks included) over reps calls."""
    for _ in range(warm):
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    walls = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    agent_before = process_cpu_s(list(agent))
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        walls.append(time.perf_counter() - t0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    agent_cpu = (process_cpu_s(list(agent)) - agent_before) / reps
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / reps
    return statistics.median(walls) * 1000, min(walls) * 1000, cpu * 1000, agent_cpu * 1000


INPROC = """
import contextlib, io, os, statistics, sys, time
from cli import {name} as mod
args = sys.argv[2:]
times = []
for i in range(int(sys.argv[1]) + 2):
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        t0 = time.perf_counter(); mod.main(args); dt = time.perf_counter() - t0
    if i >= 2:
        times.append(dt)
print("%.2f %.2f" % (statistics.median(times) * 1000, min(times) * 1000))
"""


def in_process(name: str, args: list[str], env: dict[str, str], reps: int) -> tuple[float, float]:
    """(median ms, min ms) of main(args) called again and again in one warm process: the work a
    command does after start-up (option parsing, the agent round trip, formatting)."""
    out = subprocess.run(
        [PY, "-c", INPROC.format(name=name), str(reps), *args], env=env, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    return float(out[0]), float(out[1])


def envs(cache: str) -> dict[str, dict[str, str]]:
    base = dict(os.environ)
    installed = dict(base, PYTHONPYCACHEPREFIX=cache)
    installed.pop("PYTHONDONTWRITEBYTECODE", None)
    no_pyc = dict(base, PYTHONDONTWRITEBYTECODE="1")
    no_pyc.pop("PYTHONPYCACHEPREFIX", None)
    site_pkgs = sysconfig.get_paths()["purelib"]
    no_site = dict(installed, PYTHONPATH=f"{REPO}:{site_pkgs}")
    return {"installed": installed, "no-pyc": no_pyc, "no-site": no_site}


def command(variant: str, name: str, args: list[str]) -> list[str]:
    if variant == "no-site":
        return [PY, "-S", "-m", f"cli.{name}", *args]
    return [str(BIN / name), *args]


def importtime(env: dict[str, str], top: int) -> None:
    out = subprocess.run(
        [PY, "-X", "importtime", "-m", "cli.squeue", "-h"],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=False,
    ).stderr
    rows = []
    for line in out.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_text, cum_text, name = line.removeprefix("import time:").split("|")
        rows.append((int(self_text), int(cum_text), name.rstrip(), name.strip()))
    total_self = sum(r[0] for r in rows)
    print(
        f"\n## python -X importtime -m cli.squeue -h: {len(rows)} modules, {total_self / 1000:.1f} ms self in all"
    )
    print(f"top {top} by cumulative (ms, indented = nested):")
    for self_us, cum_us, raw, _ in sorted(rows, key=lambda r: -r[1])[:top]:
        print(f"  {cum_us / 1000:7.1f} cum {self_us / 1000:6.1f} self  {raw}")
    print(f"top {top} by self:")
    for self_us, _cum, _, name in sorted(rows, key=lambda r: -r[0])[:top]:
        print(f"  {self_us / 1000:7.1f} self  {name}")
    # Cumulative time per top-level import (and per .pth hook under site): who pulls the stdlib in.
    print("cumulative per top-level import (>= 1 ms; site's children indented):")
    for _, cum_us, raw, _ in rows:
        depth = (len(raw) - len(raw.lstrip()) - 1) // 2
        if cum_us >= 1000 and (depth == 0 or (depth == 1 and _under_site(rows, raw))):
            print(f"  {cum_us / 1000:7.1f} ms  {raw}")


def _under_site(rows: list[tuple[int, int, str, str]], raw: str) -> bool:
    """Whether the depth-1 entry `raw` belongs to `site` (the first depth-0 entry after it)."""
    seen = False
    for _, _, other, name in rows:
        if other is raw:
            seen = True
        elif seen and len(other) - len(other.lstrip()) < len(raw) - len(raw.lstrip()):
            return name == "site"
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--queue", type=int, default=500, help="held jobs queued before measuring")
    ap.add_argument("--dir", help="existing shoal cluster dir to use (default: bring one up)")
    ap.add_argument("--keep", action="store_true", help="leave the cluster up")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)

    cache = os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "shoal-bench", "pycache"
    )
    os.makedirs(cache, exist_ok=True)
    variants = envs(cache)
    directory = args.dir or tempfile.mkdtemp(prefix="shoalcli.")
    conf = os.path.join(directory, "slurm.conf")
    started = False
    if not args.dir:
        subprocess.run(
            [PY, "-m", "cli.shoal_admin", "up", "--dir", directory, "--nodes", "4", "--cpus-per-node", "16",
             "--mem-per-node", "64000", "--gpus-per-node", "8", "--no-check"],
            cwd=REPO, env=variants["installed"], check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        started = True
    for env in variants.values():
        env["SLURM_CONF"] = conf
    try:
        inst = variants["installed"]
        t0 = time.perf_counter()
        for _ in range(args.queue):
            subprocess.run([str(BIN / "sbatch"), "-H", "-J", "bench_cli", "--wrap=true"], env=inst,
                           stdout=subprocess.DEVNULL, check=True)  # fmt: skip
        dt = time.perf_counter() - t0
        print(f"# queued {args.queue} held jobs in {dt:.1f} s ({args.queue / dt:.1f} jobs/s); "
              f"load {open('/proc/loadavg').read().split()[:3]}; {os.cpu_count()} CPUs; reps {args.reps}")  # fmt: skip
        agent = agent_pids(directory)
        print(f"{'command':<44} {'variant':<10} {'median ms':>9} {'min ms':>7} {'cpu ms':>7} {'agent ms':>8}")
        cases = [
            ("sbatch -H -J bench_cli --wrap=true", "sbatch", ["-H", "-J", "bench_cli", "--wrap=true"]),
            ("squeue", "squeue", []),
            ("sinfo", "sinfo", []),
        ]
        for label, name, cargs in cases:
            for variant in ("installed", "no-pyc", "no-site"):
                med, low, cpu, agent_ms = run_many(
                    command(variant, name, cargs), variants[variant], args.reps, agent=agent
                )
                print(
                    f"{label:<44} {variant:<10} {med:>9.1f} {low:>7.1f} {cpu:>7.1f} {agent_ms:>8.1f}",
                    flush=True,
                )
        print(f"{'in one warm process: main(args) per call':<44} {'':<10} {'median ms':>9} {'min ms':>7}")
        for label, name, cargs in cases:
            med, low = in_process(name, cargs, inst, args.reps)
            print(f"{label:<44} {'in-proc':<10} {med:>9.1f} {low:>7.1f}", flush=True)
        baselines = [
            ("python -c pass", [PY, "-c", "pass"], "installed"),
            ("python -S -c pass", [PY, "-S", "-c", "pass"], "installed"),
            ("python -S: import google.protobuf.message", [PY, "-S", "-c", "import google.protobuf.message"], "no-site"),
            ("python -S: import shoal.v1.controller_pb2", [PY, "-S", "-c", "import shoal.v1.controller_pb2"], "no-site"),
        ]  # fmt: skip
        for label, cmd, variant in baselines:
            med, low, cpu, _ = run_many(cmd, variants[variant], args.reps)
            print(f"{label:<44} {variant:<10} {med:>9.1f} {low:>7.1f} {cpu:>7.1f}", flush=True)
        importtime(inst, args.top)
        subprocess.run([str(BIN / "scancel"), "-n", "bench_cli"], env=inst, check=False)
    finally:
        if started and not args.keep:
            subprocess.run([PY, "-m", "cli.shoal_admin", "down", "--dir", directory], cwd=REPO,
                           env=variants["installed"], check=False, stdout=subprocess.DEVNULL)  # fmt: skip
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
