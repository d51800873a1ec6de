"""`shoal sim TRACE`: replay a workload trace through shoal's scheduler core and report the figures.

It loads ctld.sim only when it runs (the one import across the daemon/command line DESIGN.md allows).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctld.sim.machine import Machine
    from ctld.sim.run import Outcome
    from ctld.sim.swf import Trace

PROG = "shoal sim"
COLUMNS = (
    ("jobs", "jobs", "{:d}"),
    ("utilization", "util", "{:.3f}"),
    ("mean_wait", "mean wait s", "{:.0f}"),
    ("median_wait", "median wait s", "{:.0f}"),
    ("p95_wait", "p95 wait s", "{:.0f}"),
    ("avg_bounded_slowdown", "avg bsld", "{:.2f}"),
    ("max_wait", "max wait s", "{:d}"),
    ("makespan", "makespan s", "{:d}"),
    ("jobs_per_second", "jobs/s", "{:.0f}"),
)


def _parser() -> argparse.ArgumentParser:
    from ctld.sim.run import POLICIES  # the one list (ctld/sched/policy.py), loaded when `shoal sim` runs

    p = argparse.ArgumentParser(prog=PROG, description="Replay an SWF trace through shoal's scheduler.")
    p.add_argument(
        "trace", help="SWF trace (plain or .gz), an `sacct -P` export, or lublin:N[:SEED] for a synthetic one"
    )
    p.add_argument("--format", choices=("auto", "swf", "sacct"), default="auto", help="the trace's format")
    p.add_argument("--conf", help="slurm.conf: its nodes, partitions and scheduler settings")
    p.add_argument("--policy", choices=POLICIES, help="queue policy (default: conf with --conf, else easy)")
    p.add_argument(
        "--backfill-rule",
        choices=("easy", "strict"),
        default="easy",
        help="easy: textbook EASY; strict: backfill only jobs that end before the first reservation (RLScheduler)",
    )
    p.add_argument(
        "--sched-params",
        metavar="OPT=N,...",
        help="SchedulerParameters (numeric ones: bf_*, default_queue_depth, shoal_*) set over the policy's",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--csv", metavar="FILE", help="write one line per job")
    p.add_argument("--plot", metavar="DIR", help="write PNG plots (needs matplotlib)")
    p.add_argument(
        "--windows", metavar="NxSIZE", help="N windows of SIZE consecutive jobs, each on an empty machine"
    )
    p.add_argument("--seed", type=int, default=1, help="seed for --windows and synthetic traces")
    p.add_argument("--compare", nargs="+", metavar="CONF_OR_POLICY", help="also run these, side by side")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _windows(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    found = re.fullmatch(r"\s*(\d+)\s*[x×X*]\s*(\d+)\s*", text)
    if not found or int(found.group(1)) < 1 or int(found.group(2)) < 1:
        raise ValueError(f"--windows must look like 10x1024, not {text!r}")
    return int(found.group(1)), int(found.group(2))


def _trace(spec: str, seed: int, form: str = "auto") -> Trace:
    from ctld.sim.sacct import looks_like_sacct, read_sacct
    from ctld.sim.swf import read_swf

    if spec.startswith("lublin:") and form == "auto":
        from ctld.sim.generator import lublin_trace

        parts = spec.split(":")
        return lublin_trace(int(parts[1]), int(parts[2]) if len(parts) > 2 else seed)
    if form == "sacct" or (form == "auto" and looks_like_sacct(spec)):
        return read_sacct(spec)
    return read_swf(spec)


def _runs(args: argparse.Namespace, trace: Trace) -> list[tuple[str, Machine, str]]:
    """(label, machine, policy) for the main run and each --compare entry."""
    from ctld.sim.machine import conf_machine
    from ctld.sim.run import POLICIES, default_machine, with_config, with_sched_params

    default = default_machine(trace)
    base = conf_machine(args.conf) if args.conf else default
    runs = [
        (
            args.policy or ("conf" if args.conf else "easy"),
            base,
            args.policy or ("conf" if args.conf else "easy"),
        )
    ]
    for item in args.compare or ():
        if item in POLICIES:
            runs.append((item, base, item))
        else:
            runs.append((os.path.basename(item), conf_machine(item), "conf"))
    if args.backfill_rule == "strict":
        runs = [(label, with_config(machine, bf_strict=True), policy) for label, machine, policy in runs]
    if args.sched_params:
        runs = [
            (label, with_sched_params(machine, args.sched_params), policy) for label, machine, policy in runs
        ]
    return runs


class _Bar:
    """A one-line progress bar on stderr for long runs on a terminal."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total < 2000:
            return
        percent = done * 100 // max(1, total)
        if percent != self.shown:
            self.shown = percent
            bar = "#" * (percent // 4)
            print(f"\r{self.label:>10} [{bar:<25}] {percent:3d}%", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled and self.shown >= 0:
            print("\r" + " " * 50 + "\r", end="", file=sys.stderr, flush=True)


def _table(trace: Trace, outcomes: list[Outcome]) -> str:
    width = max(16, *(len(o.label) for o in outcomes))
    head = f"{'':<{width}}" + "".join(f"{title:>15}" for _, title, _ in COLUMNS)
    lines = [f"trace {trace.name}: {len(trace.jobs)} jobs, {trace.max_procs} processors", head]
    if int(trace.header.get("Unreplayable", "0")):
        lines.insert(
            1, f"({trace.header['Unreplayable']} jobs that never ran or never ended are not replayed)"
        )
    for o in outcomes:
        values = o.summary.as_dict()
        lines.append(
            f"{o.label:<{width}}" + "".join(f"{fmt.format(values[key]):>15}" for key, _, fmt in COLUMNS)
        )
        if o.summary.skipped:
            lines.append(f"{'':<{width}}  ({o.summary.skipped} jobs larger than the machine were skipped)")
        if o.summary.timeouts:
            lines.append(
                f"{'':<{width}}  ({o.summary.timeouts} jobs ran past their time limit: ended there, TIMEOUT)"
            )
    return "\n".join(lines)


def _write_csv(path: str, outcome: Outcome) -> None:
    with open(path, "w", newline="") as stream:
        out = csv.writer(stream)
        out.writerow(["id", "submit", "start", "end", "cpus", "nodes", "wait", "state"])
        for r in outcome.results:
            state = "TIMEOUT" if r.timed_out else "COMPLETED"
            out.writerow([r.job_id, r.submit, r.start, r.end, r.cpus, r.nodes, r.wait, state])


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage and "shoal sim: error: ..." (or --help)
        if exc.code in (0, None):
            raise
        return 1
    try:
        windows = _windows(args.windows)
        trace = _trace(args.trace, args.seed, args.format)
        runs = _runs(args, trace)
    except (OSError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # ConfigError, TraceError: their message names file:line
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    from ctld.sim.run import evaluate

    outcomes = []
    for label, machine, policy in runs:
        bar = _Bar(label, sys.stderr.isatty() and not args.no_progress and not args.json)
        outcomes.append(evaluate(trace, machine, policy, windows, args.seed, bar, label))
        bar.close()
    if args.csv:
        _write_csv(args.csv, outcomes[0])
    if args.plot:
        try:
            from ctld.sim.plot import write_plots
        except ImportError:
            print(f"{PROG}: error: --plot needs matplotlib (pip install 'shoal[plot]')", file=sys.stderr)
            return 1
        write_plots(args.plot, outcomes[0], trace)
    if args.json:
        data: dict[str, object] = {
            "trace": trace.name,
            "policy": outcomes[0].label,
            **outcomes[0].summary.as_dict(),
        }
        if len(outcomes) > 1:
            data["compare"] = [{"label": o.label, **o.summary.as_dict()} for o in outcomes[1:]]
        print(json.dumps(data, sort_keys=True))
    else:
        print(_table(trace, outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
