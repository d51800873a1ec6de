"""sreport (basic): cluster utilization, user topusage, cluster AccountUtilizationByUser.

Usage comes from shoal-dbd's hourly CPU-seconds per association; the period defaults to yesterday,
as Slurm's does. `-t minutes|hours|percent`, `-T cpu,gres/gpu`, `-P/-p`, `-n`, `start=`/`end=` (Slurm's
time forms). Cluster utilization's Down/PLND Down come from node events (DOWN/DRAIN; powered down),
Planned from jobs that waited while eligible, capped by the idle time.
"""

from __future__ import annotations

import datetime
import sys
import time
from collections import defaultdict
from collections.abc import Sequence

from cli.common import CommandError, run_main
from shoal import version_line
from shoal.v1 import accounting_pb2 as pb

PROG = "sreport"
REPORTS = {
    ("cluster", "utilization"): "cluster_utilization",
    ("user", "topusage"): "user_topusage",
    ("cluster", "accountutilizationbyuser"): "account_utilization_by_user",
}
UNITS = {"minutes": ("CPU Minutes", 60), "hours": ("CPU Hours", 3600), "seconds": ("CPU Seconds", 1)}


def _day_start(ts: int) -> int:
    d = datetime.datetime.fromtimestamp(ts).replace(hour=0, minute=0, second=0, microsecond=0)
    return int(d.timestamp())


def period(start: int, end: int) -> tuple[int, int]:
    """The hours a report covers, as 22.05 rounds them: both ends down to the hour, at least one hour."""
    start, end = start - start % 3600, end - end % 3600
    return start, max(end, start + 3600)


# 22.05's column widths; a longer value or title is cut to them (Allocated prints as "Allocate")
WIDTHS = {"Cluster": 9, "Login": 9, "Proper Name": 15, "Account": 15, "TRES Name": 14}
WIDTH = 8


def table(names: Sequence[str], rows: Sequence[Sequence[str]], header: bool) -> list[str]:
    """Fixed-width lines: every column right-aligned in its width, each followed by a space."""
    widths = [WIDTHS.get(n, WIDTH) for n in names]

    def line(values: Sequence[str]) -> str:
        return "".join(v[:w].rjust(w) + " " for v, w in zip(values, widths, strict=True))

    lines = [line(names), line(["-" * w for w in widths])] if header else []
    return lines + [line(r) for r in rows]


def _amount(seconds: int, unit: str, total: int) -> str:
    if unit == "percent":
        return f"{100.0 * seconds / total:.2f}%" if total else "0.00%"
    return str(round(seconds / UNITS[unit][1]))


_HEADERS = {
    "cluster_utilization": ["Cluster", "Allocated", "Down", "PLND Down", "Idle", "Planned", "Reported"],
    "user_topusage": ["Cluster", "Login", "Proper Name", "Account", "Used", "Energy"],
    "account_utilization_by_user": ["Cluster", "Account", "Login", "Proper Name", "Used", "Energy"],
}
TRES = {"cpu": ("cpu_seconds", "cpu"), "gres/gpu": ("gpu_seconds", "gpu")}  # -T name -> (usage field, key)


def build(
    report: str,
    resp: pb.ReportResponse,
    unit: str,
    cluster: str,
    tres: Sequence[str] = ("cpu",),
    tres_column: bool = False,
) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a report; one row group per TRES, with a "TRES Name" column after -T."""
    header: list[str] = []
    rows: list[list[str]] = []
    for name in tres:
        header, part = _build_one(report, resp, unit, cluster, name)
        if tres_column and report == "cluster_utilization":
            header = [header[0], "TRES Name", *header[1:]]
            part = [[r[0], name, *r[1:]] for r in part]
        elif tres_column:  # 22.05: "TRES Name" before Used, and no Energy column
            header = [*header[:-2], "TRES Name", header[-2]]
            part = [[*r[:-2], name, r[-2]] for r in part]
        rows.extend(part)
    return header, rows


def _build_one(
    report: str, resp: pb.ReportResponse, unit: str, cluster: str, tres: str
) -> tuple[list[str], list[list[str]]]:
    field, key = TRES[tres]
    since = resp.cluster_since - resp.cluster_since % 3600
    if not resp.cluster_since or resp.end <= since:  # no hour of the period was recorded: no row, as 22.05
        return _HEADERS[report], []
    span = max(1, resp.end - max(resp.start, since))
    capacity = (resp.cluster_gpus if key == "gpu" else resp.cluster_cpus) * span
    usage = [(r.fields["account"], r.fields["user"], int(r.fields.get(field, "0") or 0)) for r in resp.rows]
    used = sum(u for _, _, u in usage)
    if report == "cluster_utilization":
        down, pdown = resp.totals[f"down_{key}"], resp.totals[f"plnd_down_{key}"]
        total = capacity or (used + down + pdown)
        free = max(0, total - used - down - pdown)
        planned = min(resp.totals[f"planned_{key}"], free)  # waiting jobs count only where CPUs were idle
        idle = free - planned
        return (
            _HEADERS[report],
            [[cluster, *(_amount(v, unit, total) for v in (used, down, pdown, idle, planned, total))]],
        )
    if report == "user_topusage":
        per_user: dict[tuple[str, str], int] = defaultdict(int)
        for account, user, seconds in usage:
            per_user[(user, account)] += seconds
        ranked = sorted(per_user.items(), key=lambda kv: -kv[1])[:10]
        return (
            _HEADERS[report],
            [[cluster, u, u, a, _amount(s, unit, capacity or used), "0"] for (u, a), s in ranked],
        )
    per_account: dict[str, int] = defaultdict(int)
    for account, _, seconds in usage:
        per_account[account] += seconds
    rows = [[cluster, "root", "", "", _amount(used, unit, capacity or used), "0"]]
    for account in sorted(per_account):
        rows.append([cluster, account, "", "", _amount(per_account[account], unit, capacity or used), "0"])
        for acc, user, seconds in sorted(usage):
            if acc == account:
                rows.append([cluster, account, user, user, _amount(seconds, unit, capacity or used), "0"])
    return _HEADERS[report], rows


TITLES = {
    "cluster_utilization": "Cluster Utilization",
    "user_topusage": "Top 10 Users",
    "account_utilization_by_user": "Cluster/Account/User Utilization",
}


def render(
    report: str,
    names: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    start: int,
    end: int,
    unit: str,
    tres: bool,
    parsable: str,
    header: bool,
) -> list[str]:
    """The lines sreport prints: the title block (also above -P/-p output, as 22.05; -n drops it with
    the column titles), then the table."""
    from shoal.timefmt import format_timestamp

    lines: list[str] = []
    if header:
        secs = "" if report == "cluster_utilization" else f" ({end - start} secs)"
        label = "Percentage of Total" if unit == "percent" else UNITS[unit][0]
        if tres:
            label = label.replace("CPU", "TRES", 1)
        rule = "-" * 80
        lines += [
            rule,
            f"{TITLES[report]} {format_timestamp(start)} - {format_timestamp(end - 1)}{secs}",
            f"Usage reported in {label}",
            rule,
        ]
    if not parsable:
        return lines + table(names, rows, header)
    end_mark = "|" if parsable == "p" else ""
    if header:
        lines.append("|".join(names) + end_mark)
    return lines + ["|".join(row) + end_mark for row in rows]


def main(argv: list[str] | None = None) -> int:
    def body() -> int:
        from shoal.timefmt import parse_datetime

        words = list(sys.argv[1:] if argv is None else argv)
        unit, parsable, header = "minutes", "", True
        now = int(time.time())
        start, end = _day_start(now) - 86400, _day_start(now)
        cluster = ""
        tres: list[str] = []
        rest = []
        while words:
            word = words.pop(0)
            if word in ("-V", "--version"):
                print(version_line())
                return 0
            if word in ("-t", "--time-format") and words:
                unit = words.pop(0).lower()
            elif word.startswith("-t") and len(word) > 2:
                unit = word[2:].lower()
            elif word in ("-T", "--tres") and words:
                tres.extend(words.pop(0).split(","))
            elif word.startswith("--tres="):
                tres.extend(word.split("=", 1)[1].split(","))
            elif word in ("-P", "--parsable2"):
                parsable = "P"
            elif word in ("-p", "--parsable"):
                parsable = "p"
            elif word in ("-n", "--noheader"):
                header = False
            elif "=" in word:
                key, _, value = word.partition("=")
                try:
                    if key.lower() in ("start", "starttime"):
                        start = parse_datetime(value, now)
                    elif key.lower() in ("end", "endtime"):
                        end = parse_datetime(value, now)
                    elif key.lower() in ("cluster", "clusters"):
                        cluster = value
                except ValueError as exc:
                    raise CommandError(f"Invalid time: {value}") from exc
            else:
                rest.append(word.lower())
        start, end = period(start, end)
        unit = {"hour": "hours", "minute": "minutes", "percent": "percent", "seconds": "seconds"}.get(
            unit, unit
        )
        if unit not in (*UNITS, "percent"):
            raise CommandError(f"Unknown time format '{unit}'")
        tres = [t.lower() for t in tres if t]
        if "all" in tres:
            tres = list(TRES)
        for name in tres:
            if name not in TRES:
                raise CommandError(f"Unknown TRES '{name}' (shoal reports cpu and gres/gpu)")
        report = REPORTS.get(tuple(rest[:2]))  # type: ignore[arg-type]
        if report is None:
            raise CommandError(
                "Not a valid report: use 'cluster utilization', 'user topusage' or "
                "'cluster AccountUtilizationByUser'"
            )
        from shoal.agent.client import AgentError, call

        try:
            resp = call(
                "/shoal.v1.Accounting/Report",
                pb.ReportRequest(report=report, start=start, end=end, cluster=cluster or _cluster()),
                pb.ReportResponse,
                target="dbd",
            )
        except AgentError as exc:
            raise CommandError(exc.message) from exc
        names, rows = build(
            report, resp, unit, cluster or _cluster(), tres or ("cpu",), tres_column=bool(tres)
        )
        for line in render(
            report,
            names,
            rows,
            start=start,
            end=end,
            unit=unit,
            tres=bool(tres),
            parsable=parsable,
            header=header,
        ):
            sys.stdout.write(line + "\n")
        return 0

    return run_main(PROG, body)


def _cluster() -> str:
    """ClusterName from slurm.conf (a cheap scan, as the agent client reads AgentSocket)."""
    import os

    path = os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, sep, value = line.split("#", 1)[0].strip().partition("=")
                if sep and key.strip().lower() == "clustername":
                    return value.strip()
    except OSError:
        pass
    return ""


if __name__ == "__main__":
    raise SystemExit(main())
