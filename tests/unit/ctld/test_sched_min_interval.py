"""SchedulerParameters sched_min_interval: the least time between two scheduling cycles (22.05's
meaning and default, 2 microseconds), as ctld's scheduler loop reads it."""

from __future__ import annotations

import pytest

from ctld.sched_config import sched_min_interval_s
from shoal.conf.slurm import parse_slurm_conf


@pytest.mark.parametrize(
    ("words", "seconds"),
    [
        ((), 0.000002),
        (("sched_min_interval=500000",), 0.5),
        (("bf_window=60", "sched_min_interval=0"), 0.0),
        (("sched_min_interval=soon",), 0.000002),
    ],
    ids=["22.05's default, 2 us", "half a second", "0: no throttle", "not a number: the default"],
)
def test_sched_min_interval(words: tuple[str, ...], seconds: float, tmp_path) -> None:  # type: ignore[no-untyped-def]
    params = f"SchedulerParameters={','.join(words)}\n" if words else ""
    cfg = parse_slurm_conf(
        f"ClusterName=t\nSlurmctldHost=h\nStateSaveLocation={tmp_path}\n{params}"
        "NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1\n"
    )
    assert sched_min_interval_s(cfg) == pytest.approx(seconds)
