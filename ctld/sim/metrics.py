"""What a replay produced: utilization, waits, bounded slowdown (threshold 10 s), makespan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ctld.sim.engine import JobResult

BSLD_THRESHOLD = 10  # seconds


@dataclass(frozen=True, slots=True)
class Summary:
    jobs: int
    skipped: int  # larger than the machine: never submitted
    utilization: float
    mean_wait: float
    median_wait: float
    p95_wait: float
    avg_bounded_slowdown: float
    max_wait: int
    makespan: int
    jobs_per_second: float
    timeouts: int = 0  # ended at their time limit (run time past the requested time)

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def bounded_slowdown(r: JobResult) -> float:
    return max(1.0, (r.wait + r.run) / max(r.run, BSLD_THRESHOLD))


def summarize(
    results: Sequence[JobResult], cpus: int, skipped: int, wall_s: float, until_last_start: bool = False
) -> Summary:
    """One replay's figures. Utilization is processor-time used over the span from the first submit
    to the last end (or, `until_last_start`, to the last start, as the RLScheduler protocol)."""
    if not results:
        return Summary(0, skipped, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0.0)
    waits = sorted(r.wait for r in results)
    first = min(r.submit for r in results)
    last = max(r.start for r in results) if until_last_start else max(r.end for r in results)
    span = max(1, last - first)
    used = sum(r.run * r.cpus for r in results)
    return Summary(
        jobs=len(results),
        skipped=skipped,
        utilization=used / (span * max(1, cpus)),
        mean_wait=sum(waits) / len(waits),
        median_wait=_quantile(waits, 0.5),
        p95_wait=_quantile(waits, 0.95),
        avg_bounded_slowdown=sum(bounded_slowdown(r) for r in results) / len(results),
        max_wait=waits[-1],
        makespan=max(r.end for r in results) - first,
        jobs_per_second=len(results) / wall_s if wall_s > 0 else 0.0,
        timeouts=sum(r.timed_out for r in results),
    )


def combine(parts: Sequence[Summary], wall_s: float) -> Summary:
    """Windows of one trace: means of the per-window figures (max wait and makespan: the largest)."""
    n = max(1, len(parts))
    jobs = sum(p.jobs for p in parts)
    return Summary(
        jobs=jobs,
        skipped=sum(p.skipped for p in parts),
        utilization=sum(p.utilization for p in parts) / n,
        mean_wait=sum(p.mean_wait for p in parts) / n,
        median_wait=sum(p.median_wait for p in parts) / n,
        p95_wait=sum(p.p95_wait for p in parts) / n,
        avg_bounded_slowdown=sum(p.avg_bounded_slowdown for p in parts) / n,
        max_wait=max((p.max_wait for p in parts), default=0),
        makespan=max((p.makespan for p in parts), default=0),
        jobs_per_second=jobs / wall_s if wall_s > 0 else 0.0,
        timeouts=sum(p.timeouts for p in parts),
    )


def _quantile(sorted_values: Sequence[int], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[index])
