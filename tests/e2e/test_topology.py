"""topology/tree end to end: 8 nodes on 2 leaf switches x 4; a 4-node job lands on one switch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster, start_cluster, stop_cluster

TOPOLOGY = """\
SwitchName=s0 Nodes=node[1-4]
SwitchName=s1 Nodes=node[5-8]
SwitchName=top Switches=s[0-1]
"""


@pytest.fixture(scope="module")
def topo_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("topo")
    topology = directory.parent / f"{directory.name}-topology.conf"
    topology.write_text(TOPOLOGY)
    c = start_cluster(directory, nodes=8, cpus=2, mem=2000, up_args=("--topology", str(topology)))
    yield c
    stop_cluster(c)


def test_scontrol_show_topology(topo_cluster: Cluster) -> None:
    assert topo_cluster.ok("scontrol", "show", "topology").splitlines() == [
        "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=node[1-4]",
        "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=node[5-8]",
        "SwitchName=top Level=1 LinkSpeed=1 Nodes=node[1-8] Switches=s[0-1]",
    ]
    assert topo_cluster.ok("scontrol", "show", "topology", "node6").splitlines() == [
        "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=node[5-8]",
        "SwitchName=top Level=1 LinkSpeed=1 Nodes=node[1-8] Switches=s[0-1]",
    ]


def test_four_node_job_lands_on_one_switch(topo_cluster: Cluster, tmp_path: Path) -> None:
    c = topo_cluster
    filler = c.submit("-n2", "-D", str(tmp_path), "--wrap", "sleep 30")  # fills node1 (2 CPUs)
    c.wait_state(filler, {"RUNNING"})
    assert c.job_field(filler, "%N") == "node1"
    script = (
        "echo $SLURM_JOB_NODELIST $SLURM_TOPOLOGY_ADDR $SLURM_TOPOLOGY_ADDR_PATTERN\n"
        "srun -l printenv SLURM_TOPOLOGY_ADDR | sort\n"
    )
    big = c.submit("-N4", "--switches=1@1:00", "-D", str(tmp_path), "-o", "big.out", "--wrap", script)
    assert c.wait_state(big, {"COMPLETED", "FAILED"}) == "COMPLETED", (tmp_path / "big.out").read_text()
    lines = (tmp_path / "big.out").read_text().splitlines()
    # node1 is busy, so s0 has only 3 free nodes: the job takes all of s1 rather than span both
    assert lines == [
        "node[5-8] top.s1.node5 switch.switch.node",
        "0: top.s1.node5",
        "1: top.s1.node6",
        "2: top.s1.node7",
        "3: top.s1.node8",
    ]
    assert "   Switches=1@00:01:00\n" in c.ok("scontrol", "show", "job", str(big))
    c.run("scancel", str(filler))


def test_switch_wait_is_capped_by_max_switch_wait(topo_cluster: Cluster, tmp_path: Path) -> None:
    held = topo_cluster.submit("-H", "-N2", "--switches=2@10", "-D", str(tmp_path), "--wrap", "true")
    assert "   Switches=2@00:05:00\n" in topo_cluster.ok("scontrol", "show", "job", str(held))
    topo_cluster.ok("scancel", str(held))
