"""The what-if page: the site's own history (dbd, as the asking user) replayed by `shoal sim`.

restd writes the history as an `sacct -P` export, runs `shoal sim` once per policy in a child
process (it never imports the scheduler: daemons stay apart), and draws the results as SVG. A run
takes seconds, so it goes in the background; the page polls until the figures for that history
are ready, and they are kept until the history changes.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from restd.web.svg import Series, cdf_points, line_chart, scaled, time_unit, utilization_points
from shoal.v1 import accounting_pb2

log = logging.getLogger("shoal.restd")
Json = dict[str, Any]

HISTORY_DAYS = 30
POLICIES = ("conf", "fcfs", "easy", "shoal")  # the site's slurm.conf first, then what it could be
FIELDS = ("start_time", "end_time", "alloc_cpus", "alloc_nodes", "time_limit_min", "state", "partition")
HEADER = "JobID|Submit|Start|End|AllocCPUS|NNodes|Timelimit|State|Partition"
SIM_TIMEOUT = 300.0
SUMMARY = (
    ("jobs", "jobs", "{:d}"),
    ("utilization", "utilization", "{:.3f}"),
    ("mean_wait", "mean wait s", "{:.0f}"),
    ("p95_wait", "p95 wait s", "{:.0f}"),
    ("avg_bounded_slowdown", "avg bounded slowdown", "{:.2f}"),
    ("max_wait", "max wait s", "{:d}"),
    ("makespan", "makespan s", "{:d}"),
)


def history_query(cluster: str, now: float) -> accounting_pb2.JobQuery:
    return accounting_pb2.JobQuery(
        clusters=[cluster], start=int(now) - HISTORY_DAYS * 86400, fields=list(FIELDS)
    )


def _stamp(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(seconds)) if seconds > 0 else "Unknown"


def sacct_text(rows: Sequence[dict[str, object]]) -> tuple[str, int]:
    """The history as `sacct -a -X -P -o JobID,...,Partition` prints it; (text, jobs that ran)."""
    lines = [HEADER]
    ran = 0
    for row in rows:
        number = _numbers(row)
        start, end = number("start_time"), number("end_time")
        ran += start > 0 and end > 0
        limit = number("time_limit_min")
        lines.append(
            "|".join(
                (
                    str(number("job_id")),
                    _stamp(number("submit_time")),
                    _stamp(start),
                    _stamp(end),
                    str(number("alloc_cpus")),
                    str(number("alloc_nodes")),
                    str(limit) if limit > 0 else "UNLIMITED",
                    str(row.get("state", "")),
                    str(row.get("partition", "")),
                )
            )
        )
    return "\n".join(lines) + "\n", ran


def _numbers(row: dict[str, object]) -> Callable[[str], int]:
    def number(name: str) -> int:
        value = row.get(name, 0)
        return value if isinstance(value, int) else 0

    return number


class WhatIf:
    """Background `shoal sim` runs, one set per history (keyed by its text), the latest kept."""

    def __init__(self, conf: str, capacity: int) -> None:
        self.conf = conf
        self.capacity = capacity
        self._key = ""
        self._result: Json | None = None
        self._task: asyncio.Task[None] | None = None

    def status(self, history: str, ran: int) -> Json:
        if not ran:
            return {
                "state": "empty",
                "message": f"No job ran to its end in the last {HISTORY_DAYS} days: nothing to replay.",
            }
        key = hashlib.sha256(history.encode()).hexdigest()
        if key == self._key and self._result is not None:
            return self._result
        if self._task is None or self._task.done():
            self._key, self._result = key, None
            self._task = asyncio.get_running_loop().create_task(self._run(key, history))
        return {"state": "running", "message": f"Replaying {ran} jobs under {len(POLICIES)} policies ..."}

    async def _run(self, key: str, history: str) -> None:
        try:
            result = await self._simulate(history)
        except Exception as exc:  # noqa: BLE001 - the page says it failed; the log says why
            log.exception("what-if replay failed")
            result = {"state": "error", "message": f"shoal sim failed: {exc}"}
        if key == self._key:
            self._result = result

    async def _simulate(self, history: str) -> Json:
        with tempfile.TemporaryDirectory(prefix="shoal-whatif-") as tmp:
            trace = Path(tmp) / "history.txt"
            trace.write_text(history)
            runs = []
            for policy in POLICIES:
                out_csv = Path(tmp) / f"{policy}.csv"
                summary = await _sim(trace, self.conf, policy, out_csv)
                runs.append((policy, summary, _results(out_csv)))
        return render(runs, self.capacity)


async def _sim(trace: Path, conf: str, policy: str, out_csv: Path) -> Json:
    argv = [sys.executable, "-P", "-m", "cli.shoal_sim", str(trace), "--no-progress", "--json"]
    argv += ["--conf", conf, "--policy", policy, "--csv", str(out_csv)]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), SIM_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"no answer within {SIM_TIMEOUT:.0f}s") from None
    if proc.returncode:
        raise RuntimeError(
            err.decode(errors="replace").strip().splitlines()[-1]
            if err.strip()
            else f"exit {proc.returncode}"
        )
    summary: Json = json.loads(out)
    return summary


def _results(path: Path) -> list[tuple[int, int, int, int]]:
    """(start, end, cpus, wait) of each replayed job, from `shoal sim --csv`."""
    with path.open(newline="") as stream:
        return [
            (int(r["start"]), int(r["end"]), int(r["cpus"]), int(r["wait"])) for r in csv.DictReader(stream)
        ]


def render(runs: Sequence[tuple[str, Json, list[tuple[int, int, int, int]]]], capacity: int) -> Json:
    """The page's figures: one summary row per policy and two charts (pure)."""
    table = [
        {"policy": label, **{key: fmt.format(summary.get(key, 0)) for key, _, fmt in SUMMARY}}
        for label, summary, _ in runs
    ]
    busy = [(label, utilization_points([(s, e, c) for s, e, c, _ in r], capacity)) for label, _, r in runs]
    waited = [(label, cdf_points([float(w) for *_, w in r])) for label, _, r in runs if r]
    span, span_size = time_unit(max((x for _, p in busy for x, _ in p), default=0.0))
    wait, wait_size = time_unit(max((x for _, p in waited for x, _ in p), default=0.0))
    utilization = [Series(label, scaled(points, span_size)) for label, points in busy]
    waits = [Series(label, scaled(points, wait_size)) for label, points in waited]
    return {
        "state": "ready",
        "columns": ["policy", *(title for _, title, _ in SUMMARY)],
        "keys": ["policy", *(key for key, _, _ in SUMMARY)],
        "table": table,
        "plots": [
            line_chart(
                "Utilization (busy CPUs / all)", span, "utilization", utilization, step=True, y_max=1.0
            ),
            line_chart(
                "Waits: fraction of jobs started within",
                f"wait ({wait})",
                "jobs",
                waits,
                step=True,
                y_max=1.0,
            ),
        ],
    }
