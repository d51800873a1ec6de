"""`shoal up --set`: a default key is replaced in place (new DIR) or changed in the existing slurm.conf;
the warning about an interpreter other users cannot start."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cli import shoal_admin
from cli.shoal_admin import SCHEDULING_DEFAULTS, merge_settings, update_settings


def test_set_replaces_the_default_key_whatever_its_case_and_adds_the_rest() -> None:
    top = [("ClusterName", "shoal"), *SCHEDULING_DEFAULTS]
    merged = merge_settings(
        top, ["schedulertype=sched/builtin", "PreemptType=preempt/qos", "PartitionName=x Nodes=node1"]
    )
    keys = [k.lower() for k, _v in merged]
    assert keys.count("schedulertype") == 1
    assert ("SchedulerType", "sched/builtin") in merged
    assert merged[-2:] == [("PreemptType", "preempt/qos"), ("PartitionName=x Nodes=node1", "")]


def test_set_on_an_existing_conf_changes_that_line_and_keeps_node_lines_last(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=shoal\nSchedulerType=sched/backfill\nKillWait=5\n"
        "NodeName=node1 NodeAddr=127.0.0.2\nPartitionName=batch Nodes=node1 Default=YES\n"
    )
    changes = update_settings(
        conf,
        [
            "SchedulerType=sched/builtin",
            "KillWait=5",
            "MinJobAge=10",
            "PartitionName=batch Nodes=node1 Default=YES MaxTime=10",
        ],
    )
    assert changes == [
        "SchedulerType=sched/builtin (was SchedulerType=sched/backfill)",
        "MinJobAge=10 (added)",
        "PartitionName=batch Nodes=node1 Default=YES MaxTime=10 "
        "(was PartitionName=batch Nodes=node1 Default=YES)",
    ]
    assert conf.read_text().splitlines() == [
        "ClusterName=shoal",
        "SchedulerType=sched/builtin",
        "KillWait=5",
        "MinJobAge=10",
        "NodeName=node1 NodeAddr=127.0.0.2",
        "PartitionName=batch Nodes=node1 Default=YES MaxTime=10",
    ]
    assert update_settings(conf, ["KillWait=5"]) == []


def test_an_interpreter_other_users_cannot_reach_is_named_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the warning is root's (a normal user's cluster runs only that user's jobs)")
    for d in (tmp_path, *tmp_path.parents):  # pytest's own directories may be 0700: open the way first
        if str(d) in ("/", "/tmp"):
            break
        d.chmod(d.stat().st_mode | 0o011)
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    python = home / "bin" / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    home.chmod(0o700)
    monkeypatch.setattr(sys, "executable", str(python))
    warning = shoal_admin._interpreter_warning()
    assert warning is not None and f"behind {home} (mode 0700)" in warning and "python3 -m venv" in warning
    home.chmod(0o755)
    assert shoal_admin._interpreter_warning() is None


def test_without_aiohttp_shoal_up_runs_no_restd_and_says_which_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `pip install .` without the restd extra still brings the cluster up, with a note, not a failure."""
    from shoal.conf.slurm import parse_slurm_conf

    cfg = parse_slurm_conf(
        "ClusterName=c\nAuthAltTypes=auth/jwt\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"
    )
    real_find_spec = shoal_admin.importlib.util.find_spec
    monkeypatch.setattr(
        shoal_admin.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "aiohttp" else real_find_spec(name, *a),
    )
    started: list[object] = []
    monkeypatch.setattr(shoal_admin.local_restd, "start", lambda *a: started.append(a))
    assert shoal_admin._start_restd(tmp_path, tmp_path / "slurm.conf", {}, cfg, 0) is None
    assert not started
    assert "pip install 'shoal[restd]'" in capsys.readouterr().err
