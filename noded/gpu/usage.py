"""What the GPUs do: every GPU's live state, and each job's utilization and used memory over its run.

stepd is stdlib-only, so noded's reporter thread reads every GPU through NVML on each of its scans
(`GpuSampler.read`): the latest readings answer ctld's pings (the live metrics, idle-GPU detection,
sstat), and per job it keeps the peak and mean utilization and the peak memory, whose totals travel
with the job's completion. A reading NVML cannot give on a GPU (NVMLError_NotSupported, or any other
NVML error for that one call) is NOT_AVAILABLE, the others are still read. Samples live in noded's
memory: a noded restart forgets them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NOT_AVAILABLE = -1


@dataclass(frozen=True)
class GpuReading:
    """One GPU as NVML answered at `sampled_at`; a value it could not give is NOT_AVAILABLE."""

    index: int  # minor number
    uuid: str = ""
    name: str = ""
    utilization: int = NOT_AVAILABLE  # percent
    memory_used_mb: int = NOT_AVAILABLE
    memory_total_mb: int = NOT_AVAILABLE
    temperature_c: int = NOT_AVAILABLE
    power_w: int = NOT_AVAILABLE
    ecc_errors: int = NOT_AVAILABLE  # uncorrected, volatile (since the driver loaded)
    sampled_at: int = 0


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_gpu(nvml: Any, handle: Any, index: int, now: int) -> GpuReading:
    """Every value NVML gives for one GPU, each call on its own (a GPU without a power sensor still
    reports its utilization)."""

    def ask(call: Callable[[], Any]) -> Any | None:
        try:
            return call()
        except (nvml.NVMLError, AttributeError):  # not supported here, or an older pynvml without it
            return None

    def number(value: Any | None, scale: int = 1) -> int:
        return NOT_AVAILABLE if value is None else int(value) // scale

    util = ask(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
    memory = ask(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
    return GpuReading(
        index=index,
        uuid=_text(ask(lambda: nvml.nvmlDeviceGetUUID(handle)) or ""),
        name=_text(ask(lambda: nvml.nvmlDeviceGetName(handle)) or ""),
        utilization=NOT_AVAILABLE if util is None else int(util.gpu),
        memory_used_mb=NOT_AVAILABLE if memory is None else int(memory.used) >> 20,
        memory_total_mb=NOT_AVAILABLE if memory is None else int(memory.total) >> 20,
        temperature_c=number(ask(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))),
        power_w=number(ask(lambda: nvml.nvmlDeviceGetPowerUsage(handle)), 1000),  # NVML: milliwatts
        ecc_errors=number(
            ask(
                lambda: nvml.nvmlDeviceGetTotalEccErrors(
                    handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
                )
            )
        ),
        sampled_at=now,
    )


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

    def read(self, minors: Iterable[int] | None = None) -> dict[int, GpuReading]:
        """The state of these GPUs now (every GPU NVML knows when None; unknown minors are skipped)."""
        self._handle(0)
        assert self._handles is not None
        now = int(time.time())
        wanted = sorted(self._handles) if minors is None else sorted(set(minors) & set(self._handles))
        return {m: read_gpu(self._nvml, self._handles[m], m, now) for m in wanted}

    def sample(
        self, job_id: int, gpus: Iterable[int], readings: Mapping[int, GpuReading] | None = None
    ) -> None:
        """One sample of each of the job's GPUs, from `readings` when given (GPUs NVML does not know,
        or whose utilization or memory it cannot read, are skipped)."""
        totals = self._jobs.setdefault(job_id, _Totals())
        gpus = list(gpus)
        if readings is None:
            readings = self.read(gpus)
        for minor in gpus:
            reading = readings.get(minor)
            if reading is None or reading.utilization < 0 or reading.memory_used_mb < 0:
                continue
            util, used_mb = reading.utilization, reading.memory_used_mb
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
