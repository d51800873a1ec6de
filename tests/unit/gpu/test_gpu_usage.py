"""GPU usage accounting: the fake NVML reports set values; the sampler keeps each job's peak and mean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.sacct import Row, parse_format, render
from noded.gpu.fake_nvml import USAGE_ENV, FakeNvml
from noded.gpu.usage import GpuSampler, GpuUsage
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
