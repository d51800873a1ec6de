"""ctld's CPU per held submission on a live cluster, split by thread (issue 19).

    python bench/held_cpu.py [--held 500] [--py-spy PATH]

Starts a fresh 4-node shoal cluster (as bench/vs_slurm.py does), sends 20 `sbatch -H --wrap=true` to
warm it, then `--held` more one after another, and prints ctld's CPU per submission from
/proc/PID/stat and per thread from /proc/PID/task/*/stat. Python does not name its OS threads, so
the threads are grouped by the names `py-spy dump` reports when `--py-spy` points at one (else by
their OS name: grpc's C threads only). 100 Hz ticks: +-0.02 ms a submission over 500.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_slurm import _cpu_s, start_shoal, stop_shoal  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def thread_ticks(pid: str) -> dict[str, tuple[str, int]]:
    """tid -> (OS thread name, user + system ticks so far)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            out[task.name] = ((task / "comm").read_text().strip(), int(fields[11]) + int(fields[12]))
        except OSError:
            pass  # the thread ended meanwhile
    return out


def python_names(py_spy: str, pid: str) -> dict[str, str]:
    """tid -> Python thread name (a pool's workers share one: the _N suffix dropped)."""
    if not py_spy:
        return {}
    dump = subprocess.run([py_spy, "dump", "-p", pid], capture_output=True, text=True, check=False).stdout
    found = re.findall(r'Thread (\S+) \(\w+\): "([^"]+)"', dump)
    return {str(int(t, 16)) if t.startswith("0x") else t: re.sub(r"_\d+$", "", n) for t, n in found}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--held", type=int, default=500)
    ap.add_argument("--py-spy", default="", help="a py-spy binary, to name the Python threads")
    args = ap.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="held_cpu."))
    work = tempfile.mkdtemp(prefix="held_cpu.work.")
    os.chmod(work, 0o1777)
    try:
        cli, env = start_shoal(directory)
        full_env = {**os.environ, **env}
        pidfile = str(directory / "run" / "ctld.pid")
        pid = Path(pidfile).read_text().split()[0]

        def sbatch(n: int) -> None:
            for _ in range(n):
                cmd = [str(cli / "sbatch"), "-H", "--wrap=true"]
                subprocess.run(cmd, env=full_env, cwd=work, stdout=subprocess.DEVNULL, check=False)

        sbatch(20)
        time.sleep(2)
        before, cpu0, t0 = thread_ticks(pid), _cpu_s(pidfile), time.monotonic()
        sbatch(args.held)
        wall, cpu, after = time.monotonic() - t0, _cpu_s(pidfile) - cpu0, thread_ticks(pid)
        names = python_names(args.py_spy, pid)
        by_name: collections.Counter[str] = collections.Counter()
        for tid, (os_name, ticks) in after.items():
            by_name[names.get(tid, os_name)] += ticks - before.get(tid, ("", 0))[1]
        per = ", ".join(f"{k} {1000 * v / TICK / args.held:.2f}" for k, v in by_name.most_common() if v)
        print(
            f"held x{args.held}: {args.held / wall:.1f} jobs/s, ctld CPU {1000 * cpu / args.held:.2f} ms a "
            f"submission, load {os.getloadavg()[0]:.1f}\n  by thread, ms a submission: {per}"
        )
    finally:
        stop_shoal(directory)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
