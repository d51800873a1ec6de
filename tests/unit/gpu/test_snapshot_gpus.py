"""ctld's scheduler view of a node's GPUs follows what the node reports, also when the same report
message is changed in place (a node re-registering with new hardware), and when types are changed."""

from __future__ import annotations

from ctld.gpus import snapshot_gpus
from noded.gpu.discovery import node_gpus, to_proto
from noded.gpu.fake_nvml import FakeNvml
from shoal.conf import GresConf
from shoal.v1 import cluster_pb2


def _reported(description: str) -> cluster_pb2.NodeHardware:
    hardware = cluster_pb2.NodeHardware()
    hardware.gpus.extend(to_proto(g) for g in node_gpus("n1", GresConf(""), FakeNvml.load(description)))
    return hardware


def test_a_node_that_reports_other_gpus_is_seen_with_them() -> None:
    hardware = _reported("dgx_h100")
    types = {d.index: d.type for d in hardware.gpus}
    before = snapshot_gpus(hardware.gpus, types)
    assert {g.link_group for g in before} == {0}  # one NVSwitch fabric
    assert snapshot_gpus(hardware.gpus, types) == before  # asked again: the same answer

    for device in hardware.gpus:  # re-registered: the same message, NVLink gone, other CPUs
        del device.nvlink_peers[:]
        device.cpu_affinity = "0-3"
    after = snapshot_gpus(hardware.gpus, types)
    assert {g.link_group for g in after} == {-1}
    assert all(g.cpus == frozenset(range(4)) for g in after)

    retyped = snapshot_gpus(hardware.gpus, {d.index: "a100" for d in hardware.gpus})
    assert {g.type for g in retyped} == {"a100"}

    del hardware.gpus[4:]
    assert [g.index for g in snapshot_gpus(hardware.gpus, types)] == [0, 1, 2, 3]
