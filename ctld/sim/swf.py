"""Standard Workload Format traces (plain or gzip): header keys and one record per job.

Fields are 1-based as in the SWF definition; -1 means unknown. A job's processors are the larger of
fields 5 (allocated) and 8 (requested); its estimate is field 9 (requested time), else its run time.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field
from typing import TextIO


class TraceError(Exception):
    """A trace that cannot be read: str() is "<file>:<line>: <what is wrong>"."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    job_id: int
    submit: int  # seconds since the trace's start
    run: int  # seconds (0 when the trace says -1 or less)
    procs: int
    estimate: int  # seconds: requested time, else the run time
    user: int = -1
    status: int = -1
    nodes: int = 0  # nodes it ran on, when the input says (sacct's NNodes); 0: any
    partition: str = ""  # where it ran, when the input says (sacct's Partition)


@dataclass
class Trace:
    name: str
    jobs: list[TraceJob]
    header: dict[str, str] = field(default_factory=dict)

    @property
    def max_procs(self) -> int:
        """The machine size: MaxProcs, else MaxNodes, else the largest job."""
        for key in ("MaxProcs", "MaxNodes"):
            value = self.header.get(key, "").split()
            if value and value[0].isdigit() and int(value[0]) > 0:
                return int(value[0])
        return max((j.procs for j in self.jobs), default=1)

    @property
    def max_nodes(self) -> int:
        value = self.header.get("MaxNodes", "").split()
        return int(value[0]) if value and value[0].isdigit() else self.max_procs


def open_text(path: str | os.PathLike[str]) -> TextIO:
    """A trace file as text, gunzipped when it is gzip (by its magic bytes, not its name)."""
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def read_swf(path: str | os.PathLike[str]) -> Trace:
    """Read an SWF trace; header lines are `; Key: value`, job lines have 18 fields."""
    name = os.fspath(path)
    header: dict[str, str] = {}
    jobs: list[TraceJob] = []
    with open_text(path) as stream:
        for lineno, line in enumerate(stream, 1):
            text = line.strip()
            if not text:
                continue
            if text.startswith(";"):
                key, sep, value = text.lstrip("; \t").partition(":")
                if sep and key.strip() and " " not in key.strip():
                    header.setdefault(key.strip(), value.strip())
                continue
            jobs.append(_job(text, name, lineno))
    jobs.sort(key=lambda j: (j.submit, j.job_id))
    return Trace(name=os.path.basename(name), jobs=jobs, header=header)


def _job(text: str, name: str, lineno: int) -> TraceJob:
    fields = text.split()
    if len(fields) < 9:
        raise TraceError(f"{name}:{lineno}: expected 18 fields, found {len(fields)}")
    try:
        values = [int(float(f)) for f in fields[:18]]
    except ValueError:
        raise TraceError(f"{name}:{lineno}: fields must be numbers") from None
    values += [-1] * (18 - len(values))
    run = max(0, values[3])
    procs = max(values[4], values[7])
    requested = values[8]
    return TraceJob(
        job_id=values[0],
        submit=max(0, values[1]),
        run=run,
        procs=procs,
        estimate=requested if requested > 0 else run,
        user=values[11],
        status=values[10],
    )
