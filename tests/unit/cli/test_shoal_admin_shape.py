"""`shoal up --realslurm-shape` writes the reference Slurm cluster's slurm.conf (tests/compat replays against it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import shoal_admin
from shoal.conf import load_slurm_conf


def _args(argv: list[str]) -> object:
    args = shoal_admin._parser().parse_args(["up", *argv])
    if args.realslurm_shape:
        shoal_admin.apply_realslurm_shape(args)
    return args


def test_realslurm_shape_is_the_reference_cluster(tmp_path: Path) -> None:
    args = _args(["--realslurm-shape", "--no-accounting", "--set", "KillWait=2"])
    cfg = load_slurm_conf(str(shoal_admin.write_config(args, tmp_path)))  # type: ignore[arg-type]
    assert cfg.cluster_name == "realslurm"
    assert [n.name for n in cfg.nodes] == ["node1", "node2", "node3", "node4"]
    assert {(n.cpus, n.real_memory) for n in cfg.nodes} == {(16, 64000)}
    parts = {p.name: p for p in cfg.partitions}
    assert parts["batch"].nodes == ("node1", "node2", "node3", "node4") and parts["batch"].is_default
    assert parts["debug"].nodes == ("node1", "node2") and parts["debug"].priority_job_factor == 2
    assert cfg.def_mem_per_cpu == 1000
    assert cfg.kill_wait == 2  # a --set line still wins over the shape
    assert "gpu:h100:8" in (tmp_path / "slurm.conf").read_text()
    assert args.accounts == shoal_admin.REALSLURM_ACCOUNTS  # type: ignore[attr-defined]


def test_partition_lines_replace_the_default_partitions(tmp_path: Path) -> None:
    args = _args(
        [
            "--nodes",
            "2",
            "--no-accounting",
            "--partition",
            "PartitionName=only Nodes=node[1-2] Default=YES State=UP",
        ]
    )
    cfg = load_slurm_conf(str(shoal_admin.write_config(args, tmp_path)))  # type: ignore[arg-type]
    assert [p.name for p in cfg.partitions] == ["only"]


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--gpus-per-node", "8"], "SHOAL_FAKE_NVML=dgx_h100\n"),
        (["--gpus-per-node", "4"], "SHOAL_FAKE_NVML=dgx_h100:4\n"),
        (["--gpus-per-node", "1", "--gpu-type", "a100"], "SHOAL_FAKE_NVML=pcie_a100:1\n"),
        (["--gpus-per-node", "4", "--gpu-type", "l40s"], ""),  # no description of that type
        (["--gpus-per-node", "16"], ""),  # more GPUs than the description has
        (["--gpus-per-node", "2", "--fake-nvml", "pcie_a100:2"], "SHOAL_FAKE_NVML=pcie_a100:2\n"),
        ([], ""),
    ],
    ids=["h100-8", "h100-4", "a100-1", "no-description", "too-many", "chosen", "no-gpus"],
)
def test_the_fake_nvml_of_shoal_up(tmp_path: Path, argv: list[str], env: str) -> None:
    shoal_admin.write_config(_args(["--no-accounting", "--no-cgroups", *argv]), tmp_path)  # type: ignore[arg-type]
    assert (tmp_path / "noded.env").read_text() == env


class _ReusingKernel:
    """Stands in for the socket module: bind to port 0 hands out `ports` in turn, as a kernel may hand
    out a port again once the socket that checked it is closed."""

    SOL_SOCKET = 1
    SO_REUSEADDR = 2

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.gethostname = lambda: "host"

    def socket(self) -> _ReusingKernel:
        return self

    def __enter__(self) -> _ReusingKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def setsockopt(self, *args: object) -> None:
        return None

    def bind(self, addr: tuple[str, int]) -> None:
        self.bound = addr[1] or self.ports.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.bound)


def test_dbd_never_gets_the_port_chosen_for_ctld(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither daemon listens while `shoal up` writes the config, so the kernel may offer ctld's port
    again for dbd; taking it made dbd fail 'address in use' and sacctmgr talk to ctld (CI, stop 26)."""
    monkeypatch.setattr(shoal_admin, "socket", _ReusingKernel([40001, 40002, 40001, 40001, 40003]))
    args = _args(["--nodes", "1"])
    cfg = load_slurm_conf(str(shoal_admin.write_config(args, tmp_path)))  # type: ignore[arg-type]
    assert (cfg.slurmctld_port, cfg.slurmd_port) == (40001, 40002)
    assert cfg.accounting_storage_port == 40003
    assert "DbdPort=40003" in (tmp_path / "slurmdbd.conf").read_text()
