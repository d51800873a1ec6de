"""What ctld serves to configless nodes: the files beside slurm.conf and its Includes, only when enabled."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.configless import DISABLED, config_files
from ctld.errors import SlurmError
from shoal.conf import load_slurm_conf

BASE = """ClusterName=c
SlurmctldHost=head(10.253.0.1)
NodeName=gpu[1-2] CPUs=2
PartitionName=batch Nodes=gpu[1-2] Default=YES
"""


def _write(tmp_path: Path, top: str, files: dict[str, str] | None = None) -> Path:
    for name, text in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    conf = tmp_path / "slurm.conf"
    conf.write_text(top + BASE)
    return conf


def test_served_only_when_enabled(tmp_path: Path) -> None:
    cfg = load_slurm_conf(_write(tmp_path, ""))
    with pytest.raises(SlurmError) as err:
        config_files(cfg)
    assert err.value.message == DISABLED == "ConfigLess mode is disabled in slurm configuration."


def test_slurm_conf_its_siblings_and_includes_by_relative_name(tmp_path: Path) -> None:
    conf = _write(
        tmp_path,
        "SlurmctldParameters=idle_on_node_suspend,enable_configless\nInclude conf.d/*.conf\n",
        {
            "gres.conf": "",
            "cgroup.conf": "ConstrainCores=yes\n",
            "conf.d/extra.conf": "MinJobAge=30\n",
            "slurmdbd.conf": "StoragePass=secret\n",
        },
    )
    files = config_files(load_slurm_conf(conf))
    assert sorted(files) == ["cgroup.conf", "conf.d/extra.conf", "gres.conf", "slurm.conf"]
    assert files["slurm.conf"] == conf.read_text()
    assert files["conf.d/extra.conf"] == "MinJobAge=30\n"
    # topology.conf is absent here, and slurmdbd.conf (the database password) is never served
