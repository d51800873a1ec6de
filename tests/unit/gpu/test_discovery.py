"""GPU discovery on the shipped fake NVML descriptions and from gres.conf."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from noded.gpu.discovery import gres_conf_gpus, load_backend, node_gpus, type_name
from noded.gpu.fake_nvml import FakeNvml, builtin_names
from shoal.conf import GresConf, parse_gres_conf


def test_both_descriptions_ship() -> None:
    assert {"dgx_h100", "pcie_a100"} <= set(builtin_names())


def test_dgx_h100_discovery() -> None:
    gpus = node_gpus("n1", GresConf(""), FakeNvml.load("dgx_h100"))
    assert [g.index for g in gpus] == list(range(8))
    assert {g.type for g in gpus} == {"h100"}
    assert len({g.uuid for g in gpus}) == 8
    # NVSwitch: every GPU reaches every other one
    assert all(set(g.nvlink_peers) == set(range(8)) - {g.index} for g in gpus)
    assert [g.numa_node for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[0].cpus == tuple(range(56)) and gpus[7].cpus == tuple(range(56, 112))
    assert gpus[0].pcie_switch == gpus[1].pcie_switch != gpus[2].pcie_switch
    assert gpus[3].file == "/dev/nvidia3" and gpus[3].memory_mb == 81559 and not gpus[3].mig


def test_pcie_discovery_links_are_pairs_across_switches() -> None:
    gpus = node_gpus("n1", GresConf(""), FakeNvml.load("pcie_a100"))
    assert {g.type for g in gpus} == {"a100"}
    assert {g.index: g.nvlink_peers for g in gpus} == {
        0: (2,),
        1: (3,),
        2: (0,),
        3: (1,),
        4: (6,),
        5: (7,),
        6: (4,),
        7: (5,),
    }
    assert gpus[0].links == {2: 12}
    assert [g.numa_node for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[5].cpus == tuple(range(32, 64))


@pytest.mark.parametrize(
    ("spec", "links"),
    [
        ("pcie_a100:4", {0: (2,), 1: (3,), 2: (0,), 3: (1,)}),
        ("pcie_a100:3", {0: (2,), 1: (), 2: (0,)}),  # 1's partner (3) is gone: no link left
        ("pcie_a100:1", {0: ()}),
        ("dgx_h100:4", {i: tuple(j for j in range(4) if j != i) for i in range(4)}),  # NVSwitch among the 4
    ],
    ids=["a100-4", "a100-3", "a100-1", "h100-4"],
)
def test_a_description_trimmed_to_its_first_gpus(spec: str, links: dict[int, tuple[int, ...]]) -> None:
    nvml = FakeNvml.load(spec)
    gpus = node_gpus("n1", GresConf(""), nvml)
    assert nvml.nvmlDeviceGetCount() == len(links)
    assert {g.index: g.nvlink_peers for g in gpus} == links
    whole = node_gpus("n1", GresConf(""), FakeNvml.load(spec.split(":")[0]))
    # the kept GPUs as the whole description has them: NUMA node, CPU affinity, UUID, PCIe switch
    same = [(g.uuid, g.numa_node, g.cpus, g.pcie_switch, g.type) for g in whole[: len(links)]]
    assert [(g.uuid, g.numa_node, g.cpus, g.pcie_switch, g.type) for g in gpus] == same


@pytest.mark.parametrize("spec", ["dgx_h100:0", "dgx_h100:9"], ids=["none", "more-than-it-has"])
def test_a_trimmed_description_needs_that_many_gpus(spec: str) -> None:
    with pytest.raises(ValueError, match="the description has 8 GPUs"):
        FakeNvml.load(spec)


def test_a_path_with_a_colon_is_still_a_path(tmp_path: Path) -> None:
    path = tmp_path / "odd:2"
    path.write_text(
        json.dumps(
            {
                "gpus": [
                    {
                        "name": "NVIDIA L40S",
                        "uuid": "u",
                        "minor": 0,
                        "memory_mb": 1,
                        "pci_bus_id": "00000000:01:00.0",
                    }
                ]
            }
        )
    )
    assert FakeNvml.load(str(path)).nvmlDeviceGetCount() == 1


@pytest.mark.parametrize(
    ("model", "slurm_type"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A100 80GB PCIe", "a100"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA GeForce RTX 4090", "rtx_4090"),
        ("NVIDIA L40S", "l40s"),
    ],
    ids=["h100", "a100-sxm", "a100-pcie", "tesla", "geforce", "l40s"],
)
def test_type_name(model: str, slurm_type: str) -> None:
    assert type_name(model) == slurm_type


GRES_FORMS = [
    (
        "NodeName=dgx-h100-[01-32] Name=gpu Type=h100 File=/dev/nvidia[0-7] Cores=0-111",
        "dgx-h100-07",
        [("h100", i, f"/dev/nvidia{i}", 112) for i in range(8)],
    ),
    (
        "NodeName=n[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-55\n"
        "NodeName=n[1-2] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=56-111",
        "n2",
        [("h100", i, f"/dev/nvidia{i}", 56) for i in range(8)],
    ),
    ("Name=gpu Count=2", "any", [("", 0, "", 0), ("", 1, "", 0)]),
    ("NodeName=other Name=gpu Type=a100 Count=4", "n1", []),
]


@pytest.mark.parametrize(
    ("text", "node", "want"), GRES_FORMS, ids=["dgx-range", "split-cores", "count-only", "other-node"]
)
def test_gres_conf_forms(text: str, node: str, want: list[tuple[str, int, str, int]]) -> None:
    conf = parse_gres_conf(text)
    gpus = gres_conf_gpus([line for line in conf.for_node(node) if line.name == "gpu"])
    assert [(g.type, g.index, g.file, len(g.cpus)) for g in gpus] == want


def test_gres_conf_links() -> None:
    conf = parse_gres_conf(
        "NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia0 Links=-1,2\n"
        "NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia1 Links=2,-1\n"
    )
    gpus = node_gpus("n1", conf, None)
    assert [g.nvlink_peers for g in gpus] == [(1,), (0,)]


def test_autodetect_off_uses_gres_conf_even_with_nvml() -> None:
    conf = parse_gres_conf("AutoDetect=off\nNodeName=n1 Name=gpu Type=h100 File=/dev/nvidia[0-1]\n")
    gpus = node_gpus("n1", conf, FakeNvml.load("dgx_h100"))
    assert [(g.index, g.uuid) for g in gpus] == [(0, ""), (1, "")]


def test_gres_conf_files_name_detected_devices(tmp_path: object) -> None:
    conf = parse_gres_conf("NodeName=n1 Name=gpu Type=h100 File=/tmp/fake/nvidia[0-7]\n")
    gpus = node_gpus("n1", conf, FakeNvml.load("dgx_h100"))
    assert [g.file for g in gpus] == [f"/tmp/fake/nvidia{i}" for i in range(8)]
    assert gpus[0].uuid.startswith("GPU-")


def test_backend_falls_back_to_fake_then_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHOAL_FAKE_NVML", raising=False)
    if load_backend() is not None:
        pytest.skip("a real NVML driver is present: it wins over the fake")
    monkeypatch.setenv("SHOAL_FAKE_NVML", "pcie_a100")
    nvml = load_backend()
    assert isinstance(nvml, FakeNvml) and nvml.nvmlDeviceGetCount() == 8
