"""CPU per second of an idle shoal cluster's daemons (issue 19): what ctld and dbd spend with no jobs.

Starts a local cluster shaped like the reference one (bench/vs_slurm.py's), lets it settle, then reads
each daemon's process time (/proc/PID/stat, all threads) over `--seconds` of idleness.

    python bench/idle_cpu.py [--settle 10] [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vs_slurm import daemons, start_shoal, stop_shoal  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settle", type=float, default=10.0, help="seconds after start before measuring")
    ap.add_argument("--seconds", type=float, default=60.0, help="idle seconds measured")
    args = ap.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="idle_cpu."))
    try:
        start_shoal(directory)
        time.sleep(args.settle)
        found = daemons("shoal", directory)
        before = {pid: _cpu_s(pid) for pid in found}
        start = time.monotonic()
        time.sleep(args.seconds)
        elapsed = time.monotonic() - start
        per_role: dict[str, float] = {}
        for pid, role in found.items():
            per_role[role] = per_role.get(role, 0.0) + _cpu_s(pid) - before[pid]
    finally:
        stop_shoal(directory)
    print(f"idle CPU over {elapsed:.0f} s (load {os.getloadavg()[0]:.1f}):")
    for role in ("ctld", "dbd", "node daemon", "agent + runner"):
        if role in per_role:
            print(f"  {role:15s} {per_role[role] / elapsed * 1e3:7.2f} ms CPU per second")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
