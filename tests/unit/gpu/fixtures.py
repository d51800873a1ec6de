"""Nodes built through the real path: fake NVML description -> noded discovery -> ctld's snapshot GPUs."""

from __future__ import annotations

from ctld.gpus import snapshot_gpus
from ctld.sched.model import Gpu, Node
from noded.gpu.discovery import node_gpus, to_proto
from noded.gpu.fake_nvml import FakeNvml
from shoal.conf import GresConf


def described_gpus(description: str) -> tuple[Gpu, ...]:
    devices = [to_proto(g) for g in node_gpus("n1", GresConf(""), FakeNvml.load(description))]
    return snapshot_gpus(devices, {d.index: d.type for d in devices})


def described_node(name: str, description: str) -> Node:
    nvml = FakeNvml.load(description)
    d = nvml.description
    return Node(
        name=name,
        cpus=int(d["cpus"]),
        real_memory_mb=int(d["real_memory_mb"]),
        gpus=described_gpus(description),
        sockets=int(d["sockets"]),
        cores_per_socket=int(d["cores_per_socket"]),
        threads_per_core=int(d["threads_per_core"]),
    )
