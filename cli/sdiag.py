"""sdiag: ctld's statistics (RPCs, scheduling passes, job counts) in 22.05's layout.

`sdiag [-M cluster] [-a] [-r] [-i|-t|-T]`: -M names this cluster (no other: one controller), -r resets the counters (operators only), -i sorts the RPC lists by
message type / uid, -t by total time, -T by average time (default: by count). The counters come
from ctld's GetDiag (ctld/diag.py), through the local agent.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from cli.common import CommandError, ctld, run_main
from cli.options import NO_ARG, Opt, OptionError, parse_argv
from shoal import version_line
from shoal.v1 import controller_pb2 as pb

PROG = "sdiag"
USAGE = "Usage: sdiag [-M cluster] [-aritT]"
HELP = """\
Usage: sdiag [OPTIONS]
  -a, --all           all statistics
  -r, --reset         reset statistics
  -M, --cluster       direct the request to a specific cluster
  -i, --sort-by-id    sort RPCs by id
  -t, --sort-by-time  sort RPCs by total run time
  -T, --sort-by-time2 sort RPCs by average run time
  -V, --version       display current version number

Help options:
  --help          show this help message
  --usage         display brief usage message"""
STARS = "*" * 55


def _when(ts: int) -> str:
    """A time as sdiag prints it: `Tue Dec 01 12:52:04 2026 (1796129524)`, `Unknown (0)` for none."""
    text = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(ts)) if ts else "Unknown"
    return f"{text} ({ts})"


def _ave(total: int, count: int) -> int:
    return total // count if count else 0


def _sorted_rpcs(rows: Sequence[pb.DiagRpc], sort: str) -> list[pb.DiagRpc]:
    if sort == "id":
        return sorted(rows, key=lambda r: (r.type_id, r.name))
    if sort == "time":
        return sorted(rows, key=lambda r: (-r.total_time_us, r.type_id))
    if sort == "time2":
        return sorted(rows, key=lambda r: (-_ave(r.total_time_us, r.count), r.type_id))
    return sorted(rows, key=lambda r: (-r.count, r.type_id))


def _sorted_users(rows: Sequence[pb.DiagUser], sort: str) -> list[pb.DiagUser]:
    if sort == "id":
        return sorted(rows, key=lambda r: r.uid)
    if sort == "time":
        return sorted(rows, key=lambda r: (-r.total_time_us, r.uid))
    if sort == "time2":
        return sorted(rows, key=lambda r: (-_ave(r.total_time_us, r.count), r.uid))
    return sorted(rows, key=lambda r: (-r.count, r.uid))


def render(d: pb.GetDiagResponse, sort: str = "count", latency_us: int = 0) -> list[str]:
    """sdiag's lines for one GetDiag answer (22.05's sections; lines shoal has no counter for read 0)."""
    lines = [
        STARS,
        f"sdiag output at {_when(d.now)}",
        f"Data since      {_when(d.since)}",
        STARS,
        f"Server thread count:  {d.server_thread_count}",
        f"Agent queue size:     {d.agent_queue_size}",
        "Agent count:          0",
        "Agent thread count:   0",
        f"DBD Agent queue size: {d.dbd_agent_queue_size}",
        "",
        f"Jobs submitted: {d.jobs_submitted}",
        f"Jobs started:   {d.jobs_started}",
        f"Jobs completed: {d.jobs_completed}",
        f"Jobs canceled:  {d.jobs_canceled}",
        f"Jobs failed:    {d.jobs_failed}",
        "",
        f"Job states ts:  {_when(d.job_states_ts)}",
        f"Jobs pending:   {d.jobs_pending}",
        f"Jobs running:   {d.jobs_running}",
        "",
        "Main schedule statistics (microseconds):",
        f"\tLast cycle:   {d.sched_cycle_last_us}",
        f"\tMax cycle:    {d.sched_cycle_max_us}",
        f"\tTotal cycles: {d.sched_cycles}",
    ]
    if d.sched_cycles:
        lines += [
            f"\tMean cycle:   {d.sched_cycle_sum_us // d.sched_cycles}",
            f"\tMean depth cycle:  {d.sched_depth_sum // d.sched_cycles}",
        ]
    if d.now - d.since > 60:
        lines.append(f"\tCycles per minute: {d.sched_cycles // ((d.now - d.since) // 60)}")
    lines += [
        f"\tLast queue length: {d.sched_queue_len}",
        "",
        "Backfilling stats",
        f"\tTotal backfilled jobs (since last slurm start): {d.bf_backfilled_jobs}",
        f"\tTotal backfilled jobs (since last stats cycle start): {d.bf_backfilled_jobs}",
        "\tTotal backfilled heterogeneous job components: 0",
        f"\tTotal cycles: {d.bf_cycles}",
        f"\tLast cycle when: {_when(d.bf_last_when)}",
        f"\tLast cycle: {d.bf_cycle_last_us}",
        f"\tMax cycle:  {d.bf_cycle_max_us}",
    ]
    n = d.bf_cycles
    if n:
        lines.append(f"\tMean cycle: {d.bf_cycle_sum_us // n}")
    lines += [f"\tLast depth cycle: {d.bf_last_depth}", f"\tLast depth cycle (try sched): {d.bf_last_depth}"]
    if n:
        lines += [f"\tDepth Mean: {d.bf_depth_sum // n}", f"\tDepth Mean (try depth): {d.bf_depth_sum // n}"]
    lines.append(f"\tLast queue length: {d.bf_queue_len}")
    if n:
        lines.append(f"\tQueue length mean: {d.bf_queue_len_sum // n}")
    lines.append("\tLast table size: 1" if n else "\tLast table size: 0")
    if n:
        lines.append("\tMean table size: 1")
    lines += [
        "",
        f"Latency for 1000 calls to gettimeofday(): {latency_us} microseconds",
        "",
        "Remote Procedure Call statistics by message type",
    ]
    for r in _sorted_rpcs(d.rpcs, sort):
        lines.append(
            f"\t{r.name:<40}({r.type_id:5}) count:{r.count:<6} "
            f"ave_time:{_ave(r.total_time_us, r.count):<6} total_time:{r.total_time_us}"
        )
    lines += ["", "Remote Procedure Call statistics by user"]
    for u in _sorted_users(d.users, sort):
        lines.append(
            f"\t{u.name:<15} ({u.uid:8}) count:{u.count:<6} "
            f"ave_time:{_ave(u.total_time_us, u.count):<6} total_time:{u.total_time_us}"
        )
    lines += ["", "Pending RPC statistics", "\tNo pending RPCs"]
    return lines


def _latency_us() -> int:
    """What sdiag measures of this host: 1000 reads of the wall clock, in microseconds."""
    start = time.perf_counter_ns()
    for _ in range(1000):
        time.time()
    return (time.perf_counter_ns() - start) // 1000


def _is_this_cluster(name: str) -> bool:
    """-M: shoal's controller answers for its own cluster only (Slurm's two errors for another name)."""
    local = ctld("GetConfig", pb.GetConfigRequest(), pb.GetConfigResponse).cluster_name
    if name.lower() == local.lower():
        return True
    print(f"{PROG}: error: No cluster '{name}' known by database.", file=sys.stderr)
    print(
        f"{PROG}: error: '{name}' can't be reached now, or it is an invalid entry for --cluster.  "
        "Use 'sacctmgr list clusters' to see available clusters.",
        file=sys.stderr,
    )
    return False


OPTIONS = (  # getopt_long's table, as 22.05's sdiag (-a is accepted and means nothing more here)
    Opt("all", ("all",), "a", NO_ARG),
    Opt("cluster", ("cluster",), "M"),
    Opt("reset", ("reset",), "r", NO_ARG),
    Opt("id", ("sort-by-id",), "i", NO_ARG),
    Opt("time", ("sort-by-time",), "t", NO_ARG),
    Opt("time2", ("sort-by-time2",), "T", NO_ARG),
    Opt("version", ("version",), "V", NO_ARG),
    Opt("help", ("help",), arg=NO_ARG),
    Opt("usage", ("usage",), arg=NO_ARG),
)


def _body(argv: list[str]) -> int:
    try:
        opts, _ = parse_argv(PROG, argv, OPTIONS, stop_at_positional=False)
    except OptionError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return exc.exit_code
    reset, sort, cluster = False, "count", ""
    for parsed in opts:
        dest = parsed.opt.dest
        if dest == "cluster":
            cluster = parsed.value or ""
        elif dest == "reset":
            reset = True
        elif dest in ("id", "time", "time2"):
            sort = dest
        elif dest == "version":
            print(version_line())
            return 0
        elif dest == "help":
            print(HELP)
            return 0
        elif dest == "usage":
            print(USAGE)
            return 0
    if cluster and not _is_this_cluster(cluster):
        return 1
    if reset:
        try:
            ctld("ResetDiag", pb.ResetDiagRequest(), pb.GetDiagResponse)
        except CommandError as exc:
            print(f"slurm_reset_statistics: {exc.message}", file=sys.stderr)
            return 255
        print("Reset scheduling statistics")
        return 0
    try:
        answer = ctld("GetDiag", pb.GetDiagRequest(), pb.GetDiagResponse)
    except CommandError as exc:
        print(f"slurm_get_statistics: {exc.message}", file=sys.stderr)
        return 1
    for line in render(answer, sort, _latency_us()):
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_main(PROG, lambda: _body(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
