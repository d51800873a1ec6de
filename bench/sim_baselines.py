"""Reproduce the published baselines (../shared/traces/BASELINES.md) with `shoal sim`'s protocol.

Each row: 10 windows of 1,024 consecutive jobs (seed 1: the very windows the published figures
used, ctld/sim/windows.py), empty machine per window, run time as the
estimate, bounded slowdown with a 10 s threshold, utilization up to the last start. Prints a
Markdown table; every row is also `shoal sim TRACE --policy P --windows 10x1024 --seed 1`. NASA has
no published figures (BASELINES.md); it is there to see whether a policy tuned on Lublin holds up.

    python bench/sim_baselines.py [--traces DIR] [--policies fcfs easy sjf] [--backfill-rule strict] [--speed]

`--backfill-rule strict` follows the protocol's own backfill rule (never backfill a job that ends
after the first reservation); the default is textbook EASY.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ctld.sim.run import default_machine, evaluate, with_config
from ctld.sim.swf import read_swf

PUBLISHED = {  # (trace, policy) -> (avg bsld, utilization) from BASELINES.md
    ("lublin_256.swf", "fcfs"): (7273.77, 0.657),
    ("lublin_256.swf", "easy"): (235.82, 0.868),
    ("lublin_256.swf", "sjf"): (73.31, 0.778),
    ("lublin_256_new2.swf", "fcfs"): (7842.47, 0.404),
    ("lublin_256_new2.swf", "easy"): (247.61, 0.587),
    ("lublin_256_new2.swf", "sjf"): (91.99, 0.593),
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--traces", default="/work/shared/traces")
    p.add_argument("--policies", nargs="+", default=["fcfs", "easy", "sjf", "sjbf", "short", "shoal"])
    p.add_argument("--backfill-rule", choices=("easy", "strict"), default="easy")
    p.add_argument("--speed", action="store_true", help="also replay whole traces and report jobs/s")
    args = p.parse_args()
    print(
        "| trace | policy | avg bsld (published) | utilization (published) | max wait s | wall s | command |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in ("lublin_256.swf", "lublin_256_new2.swf", "NASA-iPSC-1993-3.1-cln.swf.gz"):
        trace = read_swf(Path(args.traces) / name)
        machine = default_machine(trace)
        rule = ""
        if args.backfill_rule == "strict":
            machine, rule = with_config(machine, bf_strict=True), " --backfill-rule strict"
        for policy in args.policies:
            started = time.perf_counter()
            s = evaluate(trace, machine, policy, (10, 1024), 1).summary
            wall = time.perf_counter() - started
            bsld, util = PUBLISHED.get((name, policy), ("-", "-"))
            print(
                f"| {name} | {policy} | {s.avg_bounded_slowdown:.2f} ({bsld}) | {s.utilization:.3f} ({util}) |"
                f" {s.max_wait} | {wall:.1f} | `shoal sim {name} --policy {policy} --windows 10x1024 --seed 1{rule}` |",
                flush=True,
            )
    if args.speed:
        print(
            "\n| trace (whole) | policy | jobs | jobs/s (CPU) | CPU s | wall s |\n|---|---|---|---|---|---|"
        )
        for name in ("NASA-iPSC-1993-3.1-cln.swf.gz", "lublin_256.swf", "lublin_256_new2.swf"):
            trace = read_swf(Path(args.traces) / name)
            for policy in ("fcfs", "easy", "sjbf", "short", "shoal"):
                started, cpu = time.perf_counter(), time.process_time()
                s = evaluate(trace, default_machine(trace), policy).summary
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu
                print(
                    f"| {name} | {policy} | {s.jobs} | {s.jobs / cpu:.0f} | {cpu:.1f} | {wall:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
