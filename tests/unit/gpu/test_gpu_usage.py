"""GPU usage accounting: the fake NVML reports set values; the sampler keeps each job's peak and mean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.sacct import Row, parse_format, render
from noded.gpu.fake_nvml import USAGE_ENV, FakeNvml, NVMLError
from noded.gpu.usage import NOT_AVAILABLE, GpuSampler, GpuUsage, read_gpu
from shoal.acct_records import JobRec, StepRec


def _set_usage(path: Path, usage: dict[int, tuple[int, int]]) -> None:
    path.write_text(
        json.dumps({str(m): {"utilization": u, "memory_used_mb": mb} for m, (u, mb) in usage.items()})
    )


def test_fake_nvml_reports_the_description_values_then_the_override_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    description = FakeNvml.load("dgx_h100").description
    description["gpus"][1].update(utilization=35, memory_used_mb=2048)
    nvml = FakeNvml(description)
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    assert nvml.nvmlDeviceGetUtilizationRates(handle).gpu == 35
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    assert memory.used == 2048 << 20 and memory.free == memory.total - memory.used

    override = tmp_path / "usage.json"
    _set_usage(override, {1: (90, 4096)})
    monkeypatch.setenv(USAGE_ENV, str(override))
    assert nvml.nvmlDeviceGetUtilizationRates(handle).gpu == 90
    assert nvml.nvmlDeviceGetMemoryInfo(handle).used == 4096 << 20
    other = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetUtilizationRates(other).gpu == 0


def test_sampler_keeps_peak_and_mean_per_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    override = tmp_path / "usage.json"
    monkeypatch.setenv(USAGE_ENV, str(override))
    sampler = GpuSampler(FakeNvml.load("dgx_h100"))
    for usage in ({2: (20, 1000), 3: (40, 3000)}, {2: (60, 5000), 3: (80, 2000)}):
        _set_usage(override, usage)
        sampler.sample(7, [2, 3])
        sampler.sample(8, [5])
    # job 7: utilization over its GPUs and samples (20+40+60+80)/4, peak 80; the busiest GPU's memory
    assert sampler.usage(7) == GpuUsage(util_avg=50, util_max=80, mem_max_mb=5000)
    assert sampler.usage(8) == GpuUsage()  # sampled, but its GPU was idle
    assert sampler.usage(9) == GpuUsage()  # never sampled
    sampler.sample(7, [42])  # a GPU NVML does not know counts for nothing
    assert sampler.usage(7).util_avg == 50
    sampler.forget(7)
    assert sampler.usage(7) == GpuUsage()


def test_sacct_prints_gpu_terms_in_tres_usage_columns() -> None:
    job = JobRec(job_id=5, cluster="c")
    batch = StepRec(
        job_id=5,
        step_id=-4,
        name="batch",
        cpu_time_s=65,
        max_rss_kb=2048,
        gpu_util_avg=40,
        gpu_util_max=75,
        gpu_mem_max_mb=3000,
    )
    plain = StepRec(job_id=5, step_id=0, name="true", cpu_time_s=1, max_rss_kb=100)
    idle = StepRec(job_id=5, step_id=1, name="idle")
    fields = parse_format("JobID,TRESUsageInMax,TRESUsageInAve")
    rows = [Row(job, s, job_id="5") for s in (batch, plain, idle)]
    assert render(rows, fields, parsable="p", header=False, now=0) == [
        "5.batch|cpu=00:01:05,energy=0,mem=2048K,gres/gpumem=3000M,gres/gpuutil=75|"
        "cpu=00:01:05,energy=0,mem=2048K,gres/gpumem=3000M,gres/gpuutil=40|",
        "5.0|cpu=00:00:01,energy=0,mem=100K|cpu=00:00:01,energy=0,mem=100K|",
        "5.1||energy=0|",
    ]


def test_every_gpu_is_read_each_value_on_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Temperature, power (NVML's milliwatts as watts) and ECC errors from the fake; a sensor the GPU
    lacks (null in the override: NVML_ERROR_NOT_SUPPORTED) is NOT_AVAILABLE, its other values still read."""
    override = tmp_path / "usage.json"
    override.write_text(
        json.dumps(
            {
                "0": {
                    "utilization": 37,
                    "memory_used_mb": 1024,
                    "temperature_c": 61,
                    "power_w": 312,
                    "ecc_errors": 2,
                },
                "1": {"power_w": None, "temperature_c": None},
            }
        )
    )
    monkeypatch.setenv(USAGE_ENV, str(override))
    readings = GpuSampler(FakeNvml.load("dgx_h100")).read()
    assert sorted(readings) == list(range(8))
    first = readings[0]
    assert (first.name, first.uuid[:4], first.memory_total_mb) == ("NVIDIA H100 80GB HBM3", "GPU-", 81559)
    assert (
        first.utilization,
        first.memory_used_mb,
        first.temperature_c,
        first.power_w,
        first.ecc_errors,
    ) == (
        37,
        1024,
        61,
        312,
        2,
    )
    second = readings[1]
    assert (second.power_w, second.temperature_c) == (NOT_AVAILABLE, NOT_AVAILABLE)
    assert (second.utilization, second.memory_used_mb, second.ecc_errors) == (0, 0, 0)


class _OldDriver(FakeNvml):
    """A real pynvml on a GPU that supports none of the optional queries: NVMLError_NotSupported is a
    subclass of pynvml.NVMLError, as here."""

    class NVMLError_NotSupported(NVMLError):  # noqa: N801, N818 - pynvml's name
        def __init__(self) -> None:
            super().__init__(3)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:  # noqa: N802
        raise self.NVMLError_NotSupported()

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int) -> int:  # noqa: N802
        raise self.NVMLError_NotSupported()

    def __getattribute__(self, name: str) -> Any:
        if name == "nvmlDeviceGetTemperature":  # an older pynvml: no such call
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_not_supported_fields_of_a_real_driver_and_a_missing_call() -> None:
    nvml = _OldDriver(FakeNvml.load("pcie_a100").description)
    reading = read_gpu(nvml, nvml.nvmlDeviceGetHandleByIndex(0), 0, now=5)
    assert (reading.power_w, reading.ecc_errors, reading.temperature_c) == (NOT_AVAILABLE,) * 3
    assert reading.memory_total_mb > 0 and reading.sampled_at == 5
