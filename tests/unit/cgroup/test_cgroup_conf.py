"""cgroup.conf through the shared reader: Slurm's defaults, values, errors with file:line."""

from __future__ import annotations

import pytest

from shoal.conf import ConfigError
from shoal.conf.cgroup import load_cgroup_conf, parse_cgroup_conf


def test_missing_file_constrains_nothing(tmp_path: object) -> None:
    conf = load_cgroup_conf(f"{tmp_path}/cgroup.conf")
    assert not conf.enabled and conf.plugin == "autodetect"


def test_values() -> None:
    conf = parse_cgroup_conf(
        "CgroupPlugin=cgroup/v2\nConstrainCores=yes ConstrainRAMSpace=yes AllowedRAMSpace=90\n"
        "ConstrainSwapSpace=yes AllowedSwapSpace=10 ConstrainDevices=yes MinRAMSpace=64\nBogus=1\n"
    )
    assert (conf.plugin, conf.constrain_cores, conf.constrain_ram_space, conf.allowed_ram_space) == (
        "cgroup/v2",
        True,
        True,
        90.0,
    )
    assert (
        conf.constrain_swap_space,
        conf.allowed_swap_space,
        conf.constrain_devices,
        conf.min_ram_space_mb,
    ) == (True, 10.0, True, 64)
    assert conf.warnings == ("cgroup.conf:4: unknown key 'Bogus' ignored",)


@pytest.mark.parametrize(
    "text",
    ["CgroupPlugin=cgroup/v3", "ConstrainCores=maybe", "AllowedRAMSpace=lots"],
    ids=["plugin", "flag", "percent"],
)
def test_bad_values_name_the_line(text: str) -> None:
    with pytest.raises(ConfigError, match=r"cgroup.conf:1: invalid value"):
        parse_cgroup_conf(text)
