"""ctld's SubmitJob in one process: CPU per held submission with N jobs already in memory, and its profile.

    python bench/submit_path.py [--queued 5000] [--submits 300] [--profile] [--array 0 [--array-reps 1]]

The real Controller and SQLite state store (tests/unit/ctld/harness.py; the node agents are data),
accounting on with AccountingStorageEnforce=associations,limits,qos and an association/QOS cache as
dbd would push it (MaxSubmitJobs set, so the submit-time limit checks run). `--queued` held jobs are
submitted first; then `--submits` held `sbatch -H --wrap=true`-like jobs (a 41-variable environment)
are timed one by one (process CPU) and, with `--profile`, profiled with cProfile. `--array N` also
times one N-task array submission. No dbd runs: the records queue in the store as they would while
dbd is away. Figures go to bench/README.md (issue 19).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from shoal.v1 import accounting_pb2 as pb  # noqa: E402
from tests.unit.ctld.harness import Harness, JobBuilder, cluster, job  # noqa: E402


def assoc(**fields: Any) -> pb.Association:
    """An association with no limit but those given (-1: none, as dbd sends them)."""
    none = {"grp_jobs": -1, "grp_submit_jobs": -1, "max_jobs": -1, "max_submit_jobs": -1}
    return pb.Association(**{**none, "max_wall_min": -1, "grp_wall_min": -1, **fields})


def limits() -> pb.GetLimitsResponse:
    """root's association under account `bench`, with limits high enough never to refuse."""
    return pb.GetLimitsResponse(
        version=1,
        changed=True,
        associations=[
            assoc(id=1, account="root"),
            assoc(id=2, account="bench", parent="root", grp_submit_jobs=1_000_000),
            assoc(id=3, account="bench", user="root", max_submit_jobs=1_000_000),
        ],
        qos=[
            pb.Qos(
                name="normal",
                max_submit_per_user=1_000_000,
                usage_factor=1.0,
                max_wall_min=-1,
                grp_jobs=-1,
                max_jobs_per_user=-1,
                grp_wall_min=-1,
            )
        ],
        users=[pb.AcctUser(name="root", default_account="bench")],
    )


def spec(held: bool = True) -> JobBuilder:
    b = job().name("bench").time(10)
    if held:
        b = b.held()
    b.spec.environment.update({f"VAR_{i}": f"value-{i}-" + "x" * 20 for i in range(41)})
    return b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queued", type=int, default=5000, help="held jobs in memory before timing")
    ap.add_argument("--submits", type=int, default=300, help="held submissions timed")
    ap.add_argument("--profile", action="store_true", help="cProfile the timed submissions")
    ap.add_argument("--array", type=int, default=0, help="also time one array of this many tasks")
    ap.add_argument("--array-reps", type=int, default=1, help="submit that array this many times")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="submit_path.") as tmp:
        builder = (
            cluster()
            .nodes(4, cpus=16, mem=64000, gpus=8)
            .set(
                AccountingStorageType="accounting_storage/slurmdbd",
                AccountingStorageEnforce="associations,limits,qos",
                MaxJobCount=max(10000, 2 * (args.queued + args.submits + args.array * args.array_reps)),
                MaxArraySize=max(1001, args.array + 1),
            )
        )
        h = Harness.of(builder, Path(tmp))
        h.ctl.accounting.push(limits())
        held = spec()
        t0 = time.process_time()
        for _ in range(args.queued):
            h.submit(held)
        fill = time.process_time() - t0
        profiler = cProfile.Profile() if args.profile else None
        times = []
        for _ in range(args.submits):
            if profiler:
                profiler.enable()
            t = time.process_time()
            h.submit(held)
            times.append(time.process_time() - t)
            if profiler:
                profiler.disable()
        print(
            f"# {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.2f}; "
            f"{args.queued} held jobs queued first ({1000 * fill / max(1, args.queued):.2f} ms CPU each)"
        )
        print(
            f"held submit with {args.queued}..{args.queued + args.submits} jobs in memory: "
            f"median {1000 * statistics.median(times):.3f} ms CPU, mean {1000 * statistics.mean(times):.3f} ms "
            f"({args.submits} submissions)"
        )
        if args.array:
            arr = job().name("bench_array").time(1)
            arr.spec.array = f"0-{args.array - 1}"
            spent = []
            for _ in range(args.array_reps):
                t = time.process_time()
                h.submit(arr)
                spent.append(1000 * (time.process_time() - t))
            print(
                f"one {args.array}-task array submission: {spent[0]:.1f} ms CPU"
                + (
                    f" (x{len(spent)}: min {min(spent):.1f}, median {statistics.median(spent):.1f})"
                    if len(spent) > 1
                    else ""
                )
            )
        if profiler:
            stats = pstats.Stats(profiler)
            stats.sort_stats("cumulative").print_stats(30)
            stats.sort_stats("tottime").print_stats(20)
        h.ctl.store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
