"""Per-GPU metrics and the web view's JSON from one GetLiveUsage answer: labels, units, what NVML could
not read left out (null in the JSON), the JSON valid against its schema, the counter's _total name."""

from __future__ import annotations

import jsonschema
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from restd.gpus import GPUS_SCHEMA, gpu_families, gpus_json
from restd.metrics import exposition
from shoal.v1 import cluster_pb2, controller_pb2


def _answer() -> controller_pb2.GetLiveUsageResponse:
    common = {"name": "NVIDIA H100 80GB HBM3", "memory_total_mb": 81559, "ecc_errors": 0}
    return controller_pb2.GetLiveUsageResponse(
        gpus=[
            cluster_pb2.GpuState(
                node="n1", index=0, uuid="GPU-0", utilization=37, memory_used_mb=1024, temperature_c=40,
                power_w=120, job_id=12, user="alice", **common,
            ),
            cluster_pb2.GpuState(
                node="n1", index=1, uuid="GPU-1", utilization=0, memory_used_mb=0, temperature_c=-1, power_w=-1,
                job_id=13, user="bob", idle=True, idle_since=1800000000, **common,
            ),
            cluster_pb2.GpuState(
                node="n2", index=0, uuid="GPU-2", utilization=0, memory_used_mb=0, temperature_c=33, power_w=70,
                **common,
            ),
        ]
    )  # fmt: skip


def _samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = exposition(gpu_families(_answer()))
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _labels(node: str, gpu: int, uuid: str, job: str, user: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"node": node, "gpu": str(gpu), "uuid": uuid, "job": job, "user": user}.items()))


def test_each_gpu_a_series_with_node_gpu_uuid_job_and_user() -> None:
    samples = _samples()
    busy, idle, free = (
        _labels("n1", 0, "GPU-0", "12", "alice"),
        _labels("n1", 1, "GPU-1", "13", "bob"),
        _labels("n2", 0, "GPU-2", "", ""),
    )
    assert samples[("shoal_gpu_utilization_ratio", busy)] == 0.37
    assert samples[("shoal_gpu_memory_used_bytes", busy)] == 1024 * 1024 * 1024
    assert samples[("shoal_gpu_memory_total_bytes", free)] == 81559 * 1024 * 1024
    assert samples[("shoal_gpu_temperature_celsius", busy)] == 40
    assert samples[("shoal_gpu_power_watts", busy)] == 120
    assert samples[("shoal_gpu_ecc_errors_total", busy)] == 0
    assert (samples[("shoal_gpu_allocated", busy)], samples[("shoal_gpu_allocated", free)]) == (1, 0)
    assert (samples[("shoal_gpu_idle", idle)], samples[("shoal_gpu_idle", busy)]) == (1, 0)
    assert samples[("shoal_gpu_idle_since_seconds", idle)] == 1800000000
    # NVML could not read them: no sample rather than a made-up value
    assert ("shoal_gpu_temperature_celsius", idle) not in samples
    assert ("shoal_gpu_power_watts", idle) not in samples
    assert all(name.startswith("shoal_gpu_") for name, _ in samples)


def test_the_json_matches_its_schema_and_the_web_views_fields() -> None:
    body = gpus_json(_answer())
    jsonschema.Draft4Validator(GPUS_SCHEMA).validate(body)
    first, second, third = body["gpus"]
    assert first == {
        "node": "n1",
        "index": 0,
        "uuid": "GPU-0",
        "name": "NVIDIA H100 80GB HBM3",
        "utilization": 37,
        "memory_used_mb": 1024,
        "memory_total_mb": 81559,
        "temperature_c": 40,
        "power_w": 120,
        "ecc_errors": 0,
        "allocated": True,
        "job_id": 12,
        "user": "alice",
        "idle": False,
        "idle_since": None,
    }
    assert (second["idle"], second["idle_since"], second["temperature_c"]) == (True, 1800000000, None)
    assert (third["allocated"], third["job_id"], third["user"]) == (False, None, None)


def test_a_gpu_held_by_a_job_the_caller_may_not_see_is_allocated_without_job_or_user() -> None:
    """ctld's answer under PrivateData=jobs: the holder's job and user left out, `allocated` kept."""
    hidden = cluster_pb2.GpuState(node="n1", index=0, uuid="GPU-0", name="H100", allocated=True)
    resp = controller_pb2.GetLiveUsageResponse(gpus=[hidden])
    (shown,) = gpus_json(resp)["gpus"]
    assert (shown["allocated"], shown["job_id"], shown["user"]) == (True, None, None)
    text = exposition(gpu_families(resp))
    allocated = [
        s for f in text_string_to_metric_families(text) for s in f.samples if s.name == "shoal_gpu_allocated"
    ]
    assert [(s.labels["job"], s.labels["user"], s.value) for s in allocated] == [("", "", 1)]
