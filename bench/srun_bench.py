"""srun figures on a local emulated cluster: `srun -N4 -n16 true` latency inside and outside an
allocation, and 100 MB of one task's stdout through srun (MB/s).

python bench/srun_bench.py [--runs N]   (starts and stops its own 4-node cluster)
python bench/srun_bench.py --slurm      (the same against real Slurm: /usr/bin/srun and sbatch with
                                         SLURM_CONF=/etc/slurm/slurm.conf, a running cluster of 4+ nodes)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(
    srun: list[str], sbatch: list[str], env: dict[str, str], tmp: Path, runs: int
) -> tuple[list[float], list[float], int, float]:
    """(inside, outside latencies, bytes, seconds for 100 MB) with these srun/sbatch commands."""
    outside = [timed([*srun, "-N4", "-n16", "true"], env) for _ in range(runs)]
    script = tmp / "inside.sh"
    script.write_text(
        f"#!/bin/bash\nfor i in $(seq {runs}); do s=$(date +%s.%N); "
        f"{' '.join(srun)} -N4 -n16 true; e=$(date +%s.%N); echo T $s $e; done\n"
    )
    out = tmp / "inside.out"
    subprocess.run(
        [*sbatch, "-W", "-N4", "-n16", "-o", str(out), str(script)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    pairs = [ln.split() for ln in out.read_text().splitlines() if ln.startswith("T ")]
    inside = [float(e) - float(s) for _, s, e in pairs]
    size = 100 * 1024 * 1024
    start = time.perf_counter()
    proc = subprocess.run(
        [*srun, "-n1", "head", "-c", str(size), "/dev/zero"], env=env, check=True, stdout=subprocess.PIPE
    )
    seconds = time.perf_counter() - start
    return inside, outside, len(proc.stdout), seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--slurm", action="store_true", help="measure the real Slurm on this machine instead")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    size = 100 * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        if args.slurm:
            env["SLURM_CONF"] = "/etc/slurm/slurm.conf"
            inside, outside, got, seconds = measure(
                ["/usr/bin/srun"], ["/usr/bin/sbatch"], env, Path(tmp), args.runs
            )
        else:
            d = Path(tmp) / "c"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "cli.shoal_admin",
                    "up",
                    "--dir",
                    str(d),
                    "--nodes",
                    "4",
                    "--cpus-per-node",
                    "4",
                    "--base-addr",
                    "127.91.0.2",
                    "--no-check",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            env["SLURM_CONF"] = str(d / "slurm.conf")
            try:
                inside, outside, got, seconds = measure(
                    [sys.executable, "-m", "cli.srun"],
                    [sys.executable, "-m", "cli.sbatch"],
                    env,
                    Path(tmp),
                    args.runs,
                )
            finally:
                subprocess.run(
                    [sys.executable, "-m", "cli.shoal_admin", "down", "--dir", str(d)],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
    assert got == size, got
    print(
        f"srun -N4 -n16 true, inside an allocation: median {statistics.median(inside):.3f}s (n={len(inside)})"
    )
    print(
        f"srun -N4 -n16 true, new allocation:       median {statistics.median(outside):.3f}s (n={len(outside)})"
    )
    print(
        f"100 MB of stdout through srun: {size / seconds / 1e6:.0f} MB/s ({seconds:.2f}s, all bytes received)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
