"""Takeover of the backup shoal-ctld under a 4-way submit storm: kill -9 the primary, print the takeover
time as the clients see it (the kill to the first submission acknowledged after it) and jobs/s before
and after. Figures, not a test: nothing here asserts a time (the e2e test checks the behaviour).

    python bench/ha_takeover.py [--seconds 15] [--lease 3] [--clients 4]

Needs MariaDB at 127.0.0.1:3306 (root, no password), as `shoal up --ha` does.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def _sbatch(env: dict[str, str], cwd: str) -> int | None:
    out = subprocess.run(
        ["sbatch", "--parsable", "-H", "--wrap", "true", "-o", "/dev/null"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip().isdigit() else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--seconds", type=float, default=15.0, help="storm before the kill, and after the takeover"
    )
    p.add_argument("--lease", type=float, default=3.0, help="ShoalLeaseTimeout")
    p.add_argument("--clients", type=int, default=4)
    args = p.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="shoal-ha-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    up = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.shoal_admin",
            "up",
            "--dir",
            str(directory),
            "--ha",
            "--nodes",
            "2",
            "--no-accounting",
            "--no-restd",
            "--no-check",
            "--set",
            f"ShoalLeaseTimeout={args.lease:g}",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    env["SLURM_CONF"] = str(directory / "slurm.conf")
    acked: list[tuple[float, int]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            job = _sbatch(env, str(directory))
            if job is not None:
                with lock:
                    acked.append((time.monotonic(), job))

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    try:
        start = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        primary = int((directory / "run" / "ctld-head1.pid").read_text())
        killed = time.monotonic()
        os.kill(primary, signal.SIGKILL)
        while not any(t > killed for t, _ in acked):
            time.sleep(0.05)
        resumed = min(t for t, _ in acked if t > killed)
        time.sleep(args.seconds)
        end = time.monotonic()
    finally:
        stop.set()
        for t in threads:
            t.join()
        listed = subprocess.run(
            ["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True
        ).stdout.split()
        subprocess.run(
            [sys.executable, "-m", "cli.shoal_admin", "down", "--dir", str(directory)],
            env=env,
            capture_output=True,
        )
        _drop_database(directory)
    before = sum(1 for t, _ in acked if t <= killed) / (killed - start)
    after = sum(1 for t, _ in acked if t >= resumed) / (end - resumed)
    ids = [j for _, j in acked]
    print(f"clients: {args.clients}, ShoalLeaseTimeout={args.lease:g}s")
    print(f"jobs/s before the kill: {before:.1f}")
    print(f"takeover (kill -9 to the first acknowledged submission): {resumed - killed:.2f} s")
    print(f"jobs/s after the takeover: {after:.1f}")
    print(
        f"acknowledged: {len(ids)}, duplicates: {len(ids) - len(set(ids))}, "
        f"lost: {len(set(map(str, ids)) - set(listed))}"
    )
    return 0


def _drop_database(directory: Path) -> None:
    import pymysql

    from cli import local_ha

    conn = pymysql.connect(host=local_ha.DB_HOST, port=local_ha.DB_PORT, user="root", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{local_ha.database(directory)}`")
    finally:
        conn.close()


if __name__ == "__main__":
    raise SystemExit(main())
