"""A site's own history as a trace: `sacct -P` (parsable2) output, read by its header line.

Export it with `sacct -a -X -P -S START -E END -o JobID,Submit,Start,End,AllocCPUS,NNodes,Timelimit,
State,Partition` (Slurm or shoal). Submit, Start and End are required, and AllocCPUS (or NCPUS);
NNodes, Timelimit, State, Partition and User are used when present. Only jobs that ran (a Start and
an End) can be replayed: the others are counted in the header's `Unreplayable`. Job ids are sacct's
when all are plain numbers (no array or step ids), else 1..N in the file's order. Times are local, as
sacct prints them; the trace starts at the first submit. A job's estimate is its time limit in
seconds, or its run time when the limit is UNLIMITED or Partition_Limit.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

from ctld.sim.swf import Trace, TraceError, TraceJob, open_text
from shoal.timefmt import UNLIMITED, parse_time_limit

REQUIRED = ("submit", "start", "end")


def looks_like_sacct(path: str | os.PathLike[str]) -> bool:
    """Whether the file's first non-blank line is a parsable sacct header (JobID|...|Submit|...)."""
    with open_text(path) as stream:
        for line in stream:
            if line.strip():
                names = [n.strip().lower() for n in line.split("|")]
                return "jobid" in names and "submit" in names
    return False


def read_sacct(path: str | os.PathLike[str]) -> Trace:
    name = os.fspath(path)
    rows: list[tuple[int, dict[str, str]]] = []
    columns: list[str] = []
    with open_text(path) as stream:
        for lineno, line in enumerate(stream, 1):
            text = line.rstrip("\n")
            if not text.strip():
                continue
            values = text.split("|")
            if not columns:
                columns = [v.strip().lower() for v in values]
                missing = [c for c in REQUIRED if c not in columns]
                if "alloccpus" not in columns and "ncpus" not in columns:
                    missing.append("alloccpus")
                if missing:
                    raise TraceError(
                        f"{name}:{lineno}: sacct export lacks the column(s) {', '.join(missing)}"
                    )
                continue
            rows.append((lineno, dict(zip(columns, values, strict=False))))
    jobs: list[TraceJob] = []
    unreplayable = 0
    parsed = [(lineno, row, _times(row, name, lineno)) for lineno, row in rows]
    origin = min((t[0] for _, _, t in parsed if t is not None), default=0)
    users: dict[str, int] = {}
    ids: list[str] = []
    for lineno, row, times in parsed:
        if times is None:
            unreplayable += 1
            continue
        submit, start, end = times
        cpus = _int(row.get("alloccpus", row.get("ncpus", "")), name, lineno)
        if cpus <= 0:
            unreplayable += 1
            continue
        run = max(0, end - start)
        limit = _limit_s(row.get("timelimit", ""), name, lineno)
        user = row.get("user", "")
        ids.append(row.get("jobid", "").strip())
        jobs.append(
            TraceJob(
                job_id=len(jobs) + 1,
                submit=submit - origin,
                run=run,
                procs=cpus,
                estimate=limit if limit > 0 else run,
                user=users.setdefault(user, len(users) + 1) if user else -1,
                status=1 if row.get("state", "COMPLETED").startswith("COMPLETED") else 0,
                nodes=_int(row.get("nnodes", "0") or "0", name, lineno),
                partition=row.get("partition", ""),
            )
        )
    if all(i.isdigit() for i in ids) and len(set(ids)) == len(ids):
        jobs = [replace(job, job_id=int(i)) for job, i in zip(jobs, ids, strict=True)]
    jobs.sort(key=lambda j: (j.submit, j.job_id))
    header = {"Format": "sacct", "Unreplayable": str(unreplayable)}
    return Trace(name=os.path.basename(name), jobs=jobs, header=header)


def _times(row: dict[str, str], name: str, lineno: int) -> tuple[int, int, int] | None:
    """(submit, start, end) epoch seconds; None for a job that has not both started and ended."""
    values = []
    for key in REQUIRED:
        text = row.get(key, "").strip()
        if text in ("", "Unknown", "None"):
            return None
        try:
            values.append(int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))))
        except ValueError:
            raise TraceError(
                f"{name}:{lineno}: {key} {text!r} is not a time like 2026-11-29T21:39:47"
            ) from None
    return values[0], values[1], values[2]


def _int(text: str, name: str, lineno: int) -> int:
    try:
        return int(text.strip() or 0)
    except ValueError:
        raise TraceError(f"{name}:{lineno}: {text!r} is not a number") from None


def _limit_s(text: str, name: str, lineno: int) -> int:
    """A Timelimit cell in seconds; 0 when there is none to plan with."""
    text = text.strip()
    if text in ("", "Partition_Limit", "NONE"):
        return 0
    try:
        minutes = parse_time_limit(text)
    except ValueError:
        raise TraceError(f"{name}:{lineno}: Timelimit {text!r} is not a time limit") from None
    return 0 if minutes == UNLIMITED else minutes * 60
