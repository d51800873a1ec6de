"""`shoal up --set`: a default key is replaced in place (new DIR) or changed in the existing slurm.conf."""

from __future__ import annotations

from pathlib import Path

from cli.shoal_admin import SCHEDULING_DEFAULTS, merge_settings, update_settings


def test_set_replaces_the_default_key_whatever_its_case_and_adds_the_rest() -> None:
    top = [("ClusterName", "shoal"), *SCHEDULING_DEFAULTS]
    merged = merge_settings(top, ["schedulertype=sched/builtin", "PreemptType=preempt/qos",
                                  "PartitionName=x Nodes=node1"])
    keys = [k.lower() for k, _v in merged]
    assert keys.count("schedulertype") == 1
    assert ("SchedulerType", "sched/builtin") in merged
    assert merged[-2:] == [("PreemptType", "preempt/qos"), ("PartitionName=x Nodes=node1", "")]


def test_set_on_an_existing_conf_changes_that_line_and_keeps_node_lines_last(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=shoal\nSchedulerType=sched/backfill\nKillWait=5\n"
                    "NodeName=node1 NodeAddr=127.0.0.2\nPartitionName=batch Nodes=node1 Default=YES\n")
    changes = update_settings(conf, ["SchedulerType=sched/builtin", "KillWait=5", "MinJobAge=10",
                                     "PartitionName=batch Nodes=node1 Default=YES MaxTime=10"])
    assert changes == ["SchedulerType=sched/builtin (was SchedulerType=sched/backfill)", "MinJobAge=10 (added)",
                       "PartitionName=batch Nodes=node1 Default=YES MaxTime=10 "
                       "(was PartitionName=batch Nodes=node1 Default=YES)"]
    assert conf.read_text().splitlines() == [
        "ClusterName=shoal", "SchedulerType=sched/builtin", "KillWait=5", "MinJobAge=10",
        "NodeName=node1 NodeAddr=127.0.0.2", "PartitionName=batch Nodes=node1 Default=YES MaxTime=10"]
    assert update_settings(conf, ["KillWait=5"]) == []
