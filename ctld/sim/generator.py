"""A seeded synthetic workload in the spirit of Lublin & Feitelson (JPDC 2003).

Simplified: a share of serial jobs; parallel sizes from a two-stage uniform over log2(size) with a
preference for powers of two; run times from a hyper-gamma whose mix leans towards long runs as
jobs grow; gamma inter-arrival times thinned by a daily cycle. Same seed, same trace.
"""

from __future__ import annotations

import math
import random

from ctld.sim.swf import Trace, TraceJob

SERIAL = 0.24
POWER_OF_TWO = 0.75
DAY = 86_400


def lublin_trace(count: int, seed: int = 1, procs: int = 256) -> Trace:
    rng = random.Random(seed)
    top = max(1.0, math.log2(procs))
    jobs: list[TraceJob] = []
    now = 0.0
    for job_id in range(1, count + 1):
        size = _size(rng, top, procs)
        run = _runtime(rng, size, procs)
        now += _gap(rng, now)
        jobs.append(
            TraceJob(
                job_id=job_id, submit=int(now), run=run, procs=size, estimate=run, user=1 + rng.randrange(64)
            )
        )
    header = {"MaxProcs": str(procs), "MaxNodes": str(procs), "Note": f"shoal lublin generator seed={seed}"}
    return Trace(name=f"lublin:{count}:{seed}", jobs=jobs, header=header)


def _size(rng: random.Random, top: float, procs: int) -> int:
    if rng.random() < SERIAL:
        return 1
    low, mid = 0.8, top * 0.6
    exponent = rng.uniform(low, mid) if rng.random() < 0.86 else rng.uniform(mid, top)
    if rng.random() < POWER_OF_TWO:
        exponent = round(exponent)
    return max(1, min(procs, int(round(2**exponent))))


def _runtime(rng: random.Random, size: int, procs: int) -> int:
    share_long = 0.3 + 0.5 * math.log2(max(1, size)) / max(1.0, math.log2(procs))
    if rng.random() < share_long:
        seconds = rng.gammavariate(12.0, 0.8)  # e^x: hours
    else:
        seconds = rng.gammavariate(4.2, 0.94)  # e^x: minutes
    return max(1, min(int(math.exp(seconds)), 36 * 3600))


def _gap(rng: random.Random, now: float) -> float:
    hour = (now % DAY) / 3600
    busy = 0.55 + 0.45 * math.sin((hour - 8) / 24 * 2 * math.pi)
    return rng.gammavariate(10.2, 0.45) ** 2 / max(0.2, busy)
