"""`scontrol show config` against the whole output of the real Slurm 22.05.8 of this machine.

data/realslurm_slurm.conf is its slurm.conf and data/scontrol_show_config_2205.txt what its
`scontrol show config` printed (boot 08:54:56, next job id 574).
"""

from __future__ import annotations

import calendar
import pwd
from pathlib import Path

import pytest

from cli.show import format_config
from ctld.show_config import config_entries
from shoal.conf.slurm import load_slurm_conf
from shoal.v1 import controller_pb2

DATA = Path(__file__).parent / "data"
BOOT = calendar.timegm((2026, 12, 1, 8, 54, 56, 0, 0, 0))
# Debian's build directory, not Slurm's documented default; the path the file was read from
DIFFERENT = {"PluginDir": "/usr/local/lib/slurm", "SLURM_CONF": str(DATA / "realslurm_slurm.conf")}


pytestmark = pytest.mark.usefixtures("utc")  # the captures print UTC times


def _shown(conf: Path, now: int = BOOT) -> list[str]:
    cfg = load_slurm_conf(conf)
    resp = controller_pb2.GetConfigResponse(now=now)
    for key, value in config_entries(cfg, BOOT, 574):
        resp.entries.add(key=key, value=value)
    return format_config(resp).splitlines()


def test_every_key_in_2205s_order_with_its_values() -> None:
    real = (DATA / "scontrol_show_config_2205.txt").read_text().splitlines()
    shown = _shown(DATA / "realslurm_slurm.conf", calendar.timegm((2026, 12, 1, 9, 54, 55, 0, 0, 0)))
    assert shown[0] == real[0]  # "Configuration data as of ..."
    body = real[1 : real.index("")]  # then a blank line and "Slurmctld(primary) at vm is UP"
    assert [line.split(" = ")[0].strip() for line in shown[1:]] == [
        line.split(" = ")[0].strip() for line in body
    ]
    try:
        slurm_uid = pwd.getpwnam("slurm").pw_uid
    except KeyError:
        slurm_uid = -1
    for mine, theirs in zip(shown[1:], body, strict=True):
        key = theirs.split(" = ")[0].strip()
        if key in DIFFERENT:
            assert mine.split(" = ", 1)[1] == DIFFERENT[key]
        elif key == "SlurmUser" and slurm_uid != 64030:
            assert mine.split(" = ", 1)[1].startswith("slurm")
        else:
            assert mine.rstrip() == theirs.rstrip()


def test_keys_the_file_leaves_out_show_slurms_defaults(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=tiny\nSlurmctldHost=head(10.0.0.1)\nNodeName=n1 CPUs=2\n"
        "PartitionName=p Nodes=n1 Default=YES\n"
    )
    shown = {line.split(" = ")[0].strip(): line.split(" = ", 1)[1] for line in _shown(conf)[1:]}
    assert shown["ClusterName"] == "tiny"
    assert shown["SlurmctldHost[0]"] == "head(10.0.0.1)"
    assert shown["DefMemPerNode"] == "UNLIMITED" and "DefMemPerCPU" not in shown
    assert shown["AccountingStorageType"] == "accounting_storage/none"
    assert shown["PriorityType"] == "priority/basic"
    assert shown["KillWait"] == "30 sec"
    assert shown["MailProg"] == "/bin/mail"
    assert shown["MaxNodeCount"] == "1"
    assert shown["SelectTypeParameters"] == "CR_CORE_MEMORY"


def test_scheduler_parameters_show_as_written(tmp_path: Path) -> None:
    """sched_min_interval and bf_max_job_array_resv, which shoal now reads, show as the file gives them."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=tiny\nSlurmctldHost=head\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=n1 Default=YES\n"
        "SchedulerParameters=sched_min_interval=500000,bf_max_job_array_resv=5\n"
    )
    shown = {line.split(" = ")[0].strip(): line.split(" = ", 1)[1] for line in _shown(conf)[1:]}
    assert shown["SchedulerParameters"] == "sched_min_interval=500000,bf_max_job_array_resv=5"
