"""What a job's GPUs did: utilization and used memory, sampled through NVML while the job runs.

stepd is stdlib-only, so noded's reporter thread samples every running job's GPUs on each of its
scans and keeps, per job, the peak and mean utilization and the peak memory; the totals travel
with the job's completion. Samples live in noded's memory: a noded restart forgets them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuUsage:
    """A job's GPU usage: utilization in percent (over its GPUs), memory in MiB (the busiest GPU's peak)."""

    util_avg: int = 0
    util_max: int = 0
    mem_max_mb: int = 0


@dataclass
class _Totals:
    samples: int = 0
    util_sum: int = 0
    util_max: int = 0
    mem_max_mb: int = 0


class GpuSampler:
    """Per-job peak/mean of NVML's utilization and used memory of the job's GPUs (by minor number)."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._handles: dict[int, Any] | None = None
        self._jobs: dict[int, _Totals] = {}

    def _handle(self, minor: int) -> Any | None:
        if self._handles is None:
            handles = [
                self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(self._nvml.nvmlDeviceGetCount()))
            ]
            self._handles = {int(self._nvml.nvmlDeviceGetMinorNumber(h)): h for h in handles}
        return self._handles.get(minor)

    def sample(self, job_id: int, gpus: Iterable[int]) -> None:
        """One sample of each of the job's GPUs (GPUs NVML does not know are skipped)."""
        totals = self._jobs.setdefault(job_id, _Totals())
        for minor in gpus:
            handle = self._handle(minor)
            if handle is None:
                continue
            try:
                util = int(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                used_mb = int(self._nvml.nvmlDeviceGetMemoryInfo(handle).used) >> 20
            except self._nvml.NVMLError:
                continue
            totals.samples += 1
            totals.util_sum += util
            totals.util_max = max(totals.util_max, util)
            totals.mem_max_mb = max(totals.mem_max_mb, used_mb)

    def usage(self, job_id: int) -> GpuUsage:
        """The job's usage so far (zeros when it was never sampled)."""
        totals = self._jobs.get(job_id)
        if totals is None or not totals.samples:
            return GpuUsage()
        return GpuUsage(round(totals.util_sum / totals.samples), totals.util_max, totals.mem_max_mb)

    def forget(self, job_id: int) -> None:
        """Drop a job once its completion is reported (a requeued run starts afresh)."""
        self._jobs.pop(job_id, None)
