"""Per-GPU state (beyond Slurm): OpenMetrics on /metrics/gpus and JSON on /shoal/v1/gpus.

Pure functions of ctld's GetLiveUsage answer: each node's GPUs as its last ping said (noded reads
them through NVML), the job holding each by ctld's allocation, and the idle flag of that job
(SchedulerParameters shoal_gpu_idle_*). Under PrivateData=jobs ctld leaves out another user's job
and user for a user's token (the GPU is then only `allocated`); /metrics/gpus is read as restd's own
user, and only root or SlurmUser may scrape it unless ignore_private_data (restd/metrics_http.py).
A value NVML could not give on a GPU (-1) is left out of the metrics and is null in the JSON. The names carry a `shoal_` prefix: none is among Slurm's 197.
"""

from __future__ import annotations

from typing import Any

from restd.metrics import MIB, Family
from shoal.v1 import cluster_pb2, controller_pb2

# The JSON document's schema (JSON Schema draft 4), the contract with the web view; a test validates
# the endpoint's answers against it.
_INT_OR_NULL = {"type": ["integer", "null"]}
GPUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["gpus"],
    "properties": {
        "gpus": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": [
                    "node",
                    "index",
                    "uuid",
                    "name",
                    "utilization",
                    "memory_used_mb",
                    "memory_total_mb",
                    "temperature_c",
                    "power_w",
                    "ecc_errors",
                    "allocated",
                    "job_id",
                    "user",
                    "idle",
                    "idle_since",
                ],
                "properties": {
                    "node": {"type": "string"},
                    "index": {"type": "integer", "minimum": 0},
                    "uuid": {"type": "string"},
                    "name": {"type": "string"},
                    "utilization": {"type": ["integer", "null"], "minimum": 0, "maximum": 100},
                    "memory_used_mb": _INT_OR_NULL,
                    "memory_total_mb": _INT_OR_NULL,
                    "temperature_c": _INT_OR_NULL,
                    "power_w": _INT_OR_NULL,
                    "ecc_errors": _INT_OR_NULL,
                    "allocated": {"type": "boolean"},
                    "job_id": _INT_OR_NULL,
                    "user": {"type": ["string", "null"]},
                    "idle": {"type": "boolean"},
                    "idle_since": _INT_OR_NULL,
                },
            },
        }
    },
}


def _known(value: int) -> int | None:
    return value if value >= 0 else None


def _labels(gpu: cluster_pb2.GpuState) -> dict[str, str]:
    return {
        "node": gpu.node,
        "gpu": str(gpu.index),
        "uuid": gpu.uuid,
        "job": str(gpu.job_id) if gpu.job_id else "",
        "user": gpu.user,
    }


def gpu_families(resp: controller_pb2.GetLiveUsageResponse) -> list[Family]:
    """/metrics/gpus: one sample per GPU and metric; ECC errors a counter, the rest gauges."""
    util = Family("shoal_gpu_utilization_ratio")
    used = Family("shoal_gpu_memory_used_bytes")
    total = Family("shoal_gpu_memory_total_bytes")
    temperature = Family("shoal_gpu_temperature_celsius")
    power = Family("shoal_gpu_power_watts")
    ecc = Family("shoal_gpu_ecc_errors", kind="counter")
    allocated = Family("shoal_gpu_allocated")
    idle = Family("shoal_gpu_idle")
    idle_since = Family("shoal_gpu_idle_since_seconds")
    for gpu in resp.gpus:
        labels = _labels(gpu)
        if gpu.utilization >= 0:
            util.add(gpu.utilization / 100, **labels)
        if gpu.memory_used_mb >= 0:
            used.add(gpu.memory_used_mb * MIB, **labels)
        if gpu.memory_total_mb >= 0:
            total.add(gpu.memory_total_mb * MIB, **labels)
        if gpu.temperature_c >= 0:
            temperature.add(gpu.temperature_c, **labels)
        if gpu.power_w >= 0:
            power.add(gpu.power_w, **labels)
        if gpu.ecc_errors >= 0:
            ecc.add(gpu.ecc_errors, **labels)
        allocated.add(1 if gpu.allocated or gpu.job_id else 0, **labels)
        idle.add(1 if gpu.idle else 0, **labels)
        if gpu.idle:
            idle_since.add(gpu.idle_since, **labels)
    return [util, used, total, temperature, power, ecc, allocated, idle, idle_since]


def gpus_json(resp: controller_pb2.GetLiveUsageResponse) -> dict[str, Any]:
    """/shoal/v1/gpus: every GPU, node and index order (GPUS_SCHEMA)."""
    return {
        "gpus": [
            {
                "node": gpu.node,
                "index": gpu.index,
                "uuid": gpu.uuid,
                "name": gpu.name,
                "utilization": _known(gpu.utilization),
                "memory_used_mb": _known(gpu.memory_used_mb),
                "memory_total_mb": _known(gpu.memory_total_mb),
                "temperature_c": _known(gpu.temperature_c),
                "power_w": _known(gpu.power_w),
                "ecc_errors": _known(gpu.ecc_errors),
                "allocated": gpu.allocated or bool(gpu.job_id),
                "job_id": gpu.job_id or None,
                "user": gpu.user or None,
                "idle": gpu.idle,
                "idle_since": gpu.idle_since or None,
            }
            for gpu in resp.gpus
        ]
    }
