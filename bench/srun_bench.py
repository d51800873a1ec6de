"""srun figures on a local emulated cluster: `srun -N4 -n16 true` latency inside and outside an
allocation, and 100 MB of one task's stdout through srun (MB/s).

python bench/srun_bench.py [--runs N]   (starts and stops its own 4-node cluster)
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    srun = [sys.executable, "-m", "cli.srun"]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "c"
        subprocess.run([sys.executable, "-m", "cli.shoal_admin", "up", "--dir", str(d), "--nodes", "4",
                        "--cpus-per-node", "4", "--base-addr", "127.91.0.2", "--no-check"], check=True,
                       stdout=subprocess.DEVNULL)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(d / "slurm.conf")
        try:
            outside = [timed([*srun, "-N4", "-n16", "true"], env) for _ in range(args.runs)]
            script = Path(tmp) / "inside.sh"
            script.write_text(f"#!/bin/bash\nfor i in $(seq {args.runs}); do s=$(date +%s.%N); "
                              f"{' '.join(srun)} -N4 -n16 true; e=$(date +%s.%N); echo $s $e; done\n")
            out = Path(tmp) / "inside.out"
            subprocess.run([sys.executable, "-m", "cli.sbatch", "-W", "-N4", "-n16", "-o", str(out), str(script)],
                           env=env, check=True, stdout=subprocess.DEVNULL)
            inside = [float(e) - float(s) for s, e in (ln.split() for ln in out.read_text().split("\n") if ln)]
            size = 100 * 1024 * 1024
            start = time.perf_counter()
            proc = subprocess.run([*srun, "-n1", "head", "-c", str(size), "/dev/zero"], env=env, check=True,
                                  stdout=subprocess.PIPE)
            seconds = time.perf_counter() - start
            assert len(proc.stdout) == size, len(proc.stdout)
        finally:
            subprocess.run([sys.executable, "-m", "cli.shoal_admin", "down", "--dir", str(d)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"srun -N4 -n16 true, inside an allocation: median {statistics.median(inside):.3f}s (n={len(inside)})")
    print(f"srun -N4 -n16 true, new allocation:       median {statistics.median(outside):.3f}s (n={len(outside)})")
    print(f"100 MB of stdout through srun: {size / seconds / 1e6:.0f} MB/s ({seconds:.2f}s, all bytes received)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
