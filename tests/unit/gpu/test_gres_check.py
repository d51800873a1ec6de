"""A registering node's GPUs against its slurm.conf Gres=: the drain reason names the difference."""

from __future__ import annotations

import pytest

from ctld.gpus import gres_difference
from shoal.conf import parse_gres
from shoal.v1 import cluster_pb2


def reported(*types: str) -> list[cluster_pb2.GpuDevice]:
    return [cluster_pb2.GpuDevice(index=i, type=t) for i, t in enumerate(types)]


CASES = [
    ("gpu:h100:8", reported(*["h100"] * 8), []),
    ("gpu:8", reported(*["a100"] * 8), []),
    ("gpu:h100:8", reported(*["h100"] * 4), ["gres/gpu count reported lower than configured (4 < 8)"]),
    (
        "gpu:h100:8",
        reported(*["a100"] * 8),
        ["gres/gpu:h100 count reported lower than configured (0 < 8; found gpu:a100:8)"],
    ),
    ("gpu:h100:4,gpu:a100:4", reported(*["h100"] * 4, *["a100"] * 4), []),
]


@pytest.mark.parametrize(
    ("conf", "devices", "want"), CASES, ids=["match", "untyped", "fewer", "wrong-type", "mixed"]
)
def test_gres_difference(conf: str, devices: list[cluster_pb2.GpuDevice], want: list[str]) -> None:
    assert gres_difference(parse_gres(conf), devices) == want
