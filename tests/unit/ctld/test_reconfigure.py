"""ctld/reconfigure.py on the real controller and store: what a reconfigure applies to nodes and jobs,
and what it refuses with nothing changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld.controller import Controller
from ctld.errors import SlurmError
from ctld.store import StateStore
from shoal.conf import load_slurm_conf
from tests.unit.ctld.harness import Clock, Harness, RecordingNodes, cluster, job


def harness(tmp_path: Path, text: str) -> Harness:
    conf = tmp_path / "slurm.conf"
    conf.write_text(text)
    recorder, clock = RecordingNodes(), Clock()
    state = tmp_path / "state"
    h = Harness(
        Controller(load_slurm_conf(conf), StateStore(state), b"k" * 32, recorder, clock=clock),
        recorder,
        clock,
        state,
    )
    for node in h.ctl.cfg.nodes:
        h.register(node.name)
    return h


def base(tmp_path: Path) -> str:
    return (
        cluster()
        .nodes(2)
        .partition("batch", "n[1-2]", Default="YES")
        .partition("old", "n2")
        .text(tmp_path / "state")
    )


def rewrite(h: Harness, old: str, new: str) -> None:
    conf = Path(h.ctl.cfg.path)
    text = conf.read_text()
    assert old in text
    conf.write_text(text.replace(old, new))


def test_node_weight_features_and_gres_are_taken_and_every_node_is_told(tmp_path: Path) -> None:
    h = harness(tmp_path, base(tmp_path))
    rewrite(
        h, "NodeName=n2 CPUs=4 RealMemory=8000", "NodeName=n2 CPUs=4 RealMemory=8000 Weight=7 Features=fast"
    )
    h.ctl.reconfigure()
    info = h.ctl.nodes["n2"].info
    assert (info.weight, list(info.features), h.ctl.nodes["n2"].available) == (7, ["fast"], True)
    assert sorted(h.nodes.reconfigured) == ["n1", "n2"]
    assert h.node_state("n2") == "IDLE"  # registration and responsiveness are kept


def test_a_pending_job_of_a_removed_partition_ends_node_fail(tmp_path: Path) -> None:
    h = harness(tmp_path, base(tmp_path))
    pending = h.submit(job().held())
    h.ctl.jobs[pending].partition = "old"  # as if submitted with -p old
    rewrite(h, "PartitionName=old Nodes=n2\n", "")
    outcome = h.ctl.reconfigure()
    assert outcome.failed_jobs == (pending,)
    assert h.state(pending) == "NODE_FAIL"
    assert "old" not in [p.name for p in h.ctl.cfg.partitions]


def test_removing_a_partition_that_runs_a_job_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    h = harness(tmp_path, base(tmp_path))
    running = h.submit(job().cpus(1))
    h.ctl.jobs[running].partition = "old"
    h.schedule()
    assert h.state(running) == "RUNNING"
    rewrite(h, "PartitionName=old Nodes=n2\n", "")
    rewrite(h, "KillWait=5", "KillWait=9")
    with pytest.raises(SlurmError, match="PartitionName=old removed while it runs jobs"):
        h.ctl.reconfigure()
    assert (h.ctl.cfg.kill_wait, h.ctl.nodes["n2"].info.partitions[:]) == (5, ["batch", "old"])
    assert "old" in h.ctl.state.partitions


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("ClusterName=t", "ClusterName=u", "ClusterName changed (t -> u)"),
        ("SlurmctldHost=localhost", "SlurmctldHost=head", "SlurmctldHost changed"),
        (
            "NodeName=n2 CPUs=4 RealMemory=8000",
            "NodeName=n2 NodeAddr=10.0.0.9 CPUs=4 RealMemory=8000",
            "NodeAddr of node n2 changed (n2 -> 10.0.0.9)",
        ),
        (
            "NodeName=n2 CPUs=4 RealMemory=8000\n",
            "NodeName=n2 CPUs=4 RealMemory=8000\nNodeName=n3 CPUs=4\n",
            "NodeName set changed (n3 added)",
        ),
    ],
)
def test_what_needs_a_restart_is_refused_by_name(tmp_path: Path, old: str, new: str, named: str) -> None:
    h = harness(tmp_path, base(tmp_path))
    rewrite(h, old, new)
    rewrite(h, "MinJobAge=300", "MinJobAge=30")
    with pytest.raises(SlurmError) as err:
        h.ctl.reconfigure()
    assert named in err.value.message
    assert h.ctl.cfg.min_job_age == 300
    assert h.nodes.reconfigured == []


def test_a_broken_gres_conf_is_refused_with_its_file_and_line(tmp_path: Path) -> None:
    h = harness(tmp_path, base(tmp_path))
    (tmp_path / "gres.conf").write_text("# gpus\nNodeName=n1 Name=gpu Count=many\n")
    with pytest.raises(SlurmError) as err:
        h.ctl.reconfigure()
    assert err.value.message.startswith(f"{tmp_path / 'gres.conf'}:2: ")
