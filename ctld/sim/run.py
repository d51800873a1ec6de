"""One replay of a trace under a policy: the whole trace, or the baseline protocol's windows."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctld.sched.model import Config
from ctld.sched.policy import POLICIES, policy_config, promoted_priority, promotes_oldest
from ctld.sim.engine import JobResult, Progress, Simulation
from ctld.sim.machine import Machine, job_request, pool_machine
from ctld.sim.metrics import Summary, combine, summarize
from ctld.sim.swf import Trace, TraceJob
from ctld.sim.windows import start_indices

__all__ = ["POLICIES", "Outcome", "default_machine", "evaluate", "replay", "with_config", "with_sched_params"]

# The sim's own policies plan far ahead at one-second resolution and test the whole queue they see.
SIM_DEFAULTS = Config(bf_window_min=10**7, bf_resolution_s=1, bf_max_job_test=100, max_job_test=100)


@dataclass(frozen=True, slots=True)
class Outcome:
    label: str
    summary: Summary
    results: list[JobResult]


def default_machine(trace: Trace) -> Machine:
    return pool_machine(trace.max_procs, SIM_DEFAULTS)


def replay(
    jobs: Sequence[TraceJob], machine: Machine, policy: str, progress: Progress | None = None
) -> tuple[list[JobResult], int, float]:
    """Start an empty machine, replay `jobs`; (results, jobs skipped as too large, wall seconds)."""
    knobs: dict[str, Any] = dict(machine.knobs)  # Config's integer fields (sched_config.numeric_parameters)
    config = replace(policy_config(policy, machine.config), **knobs)
    fits = [j for j in jobs if 0 < j.procs <= machine.cpus] if machine.cpus else list(jobs)
    sim = Simulation(
        machine.nodes,
        machine.partitions,
        config,
        lambda tj: job_request(tj, policy, machine),
        promote=promoted_priority if promotes_oldest(policy) else None,
    )
    started = time.perf_counter()
    results = sim.run(fits, progress)
    if machine.pool:
        for r in results:
            r.nodes = r.cpus  # each processor of the pool is one one-CPU node
    return results, len(jobs) - len(fits), time.perf_counter() - started


def evaluate(
    trace: Trace,
    machine: Machine,
    policy: str,
    windows: tuple[int, int] | None = None,
    seed: int = 1,
    progress: Progress | None = None,
    label: str = "",
) -> Outcome:
    """The whole trace, or `windows` = (count, size) windows of consecutive jobs drawn with `seed`
    as the published baselines drew theirs (windows.py)."""
    if windows is None:
        results, skipped, wall = replay(trace.jobs, machine, policy, progress)
        return Outcome(label or policy, summarize(results, machine.cpus, skipped, wall), results)
    count, size = windows
    parts: list[Summary] = []
    everything: list[JobResult] = []
    wall = 0.0
    for first in start_indices(seed, len(trace.jobs), size, count):
        window = trace.jobs[first : first + size]
        results, skipped, took = replay(window, machine, policy, progress)
        wall += took
        parts.append(summarize(results, machine.cpus, skipped, took, until_last_start=True))
        everything.extend(results)
    return Outcome(label or policy, combine(parts, wall), everything)


def with_config(machine: Machine, **changes: int | str | bool) -> Machine:
    return replace(machine, config=replace(machine.config, **changes))  # type: ignore[arg-type]


def with_sched_params(machine: Machine, text: str) -> Machine:
    """The machine with SchedulerParameters (`shoal_starve_wait=1440,...`, numeric ones) set over
    whatever policy it runs: what-if for a slurm.conf change. ValueError names a bad option."""
    from ctld.sched_config import numeric_parameters

    return replace(machine, knobs=tuple(numeric_parameters(text).items()))
