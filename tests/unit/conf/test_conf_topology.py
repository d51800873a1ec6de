"""topology.conf: the switch tree of topology/tree, read beside slurm.conf; errors cite file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.conf import ConfigError, load_slurm_conf, parse_topology_conf

NODES = [f"n{i}" for i in range(1, 9)]

TWO_LEAVES = """\
# two leaf switches under one spine
SwitchName=s0 Nodes=n[1-4] LinkSpeed=100
SwitchName=s1 Nodes=n[5-8]
SwitchName=spine Switches=s[0-1]
"""


def test_tree_levels_and_paths() -> None:
    topo = parse_topology_conf(TWO_LEAVES, NODES)
    assert [(s.name, s.level, s.link_speed) for s in topo.switches] == [
        ("s0", 0, 100),
        ("s1", 0, 1),
        ("spine", 1, 1),
    ]
    assert topo.switch("s0") is not None and topo.switch("s0").nodes == ("n1", "n2", "n3", "n4")  # type: ignore[union-attr]
    assert topo.nodes_under("spine") == tuple(NODES)
    assert topo.address("n6") == ("spine.s1.n6", "switch.switch.node")
    assert topo.warnings == ()


def test_node_outside_every_switch_is_a_warning_and_its_own_address() -> None:
    topo = parse_topology_conf("SwitchName=s0 Nodes=n[1-7]\n", NODES)
    assert topo.address("n8") == ("n8", "node")
    assert topo.warnings == ("topology.conf: switches lack access to 1 node(s): n8",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "SwitchName=s0 Nodes=n[1-4]\nSwitchName=top Switches=s[0-1]\n",
            "topology.conf:2: switch top: unknown switch s1 in Switches=",
        ),
        (
            "SwitchName=s0 Nodes=n[1-4]\nSwitchName=s1 Nodes=n[4-5]\n",
            "topology.conf:2: node n4 is in two leaf switches (s0 and s1)",
        ),
        ("SwitchName=s0 Nodes=n[1-9]\n", "topology.conf:1: switch s0: node n9 is not in slurm.conf"),
        (
            "SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n",
            "topology.conf:2: switch s0 already defined at topology.conf:1",
        ),
        ("Nodes=n1\n", "topology.conf:1: topology.conf line has no SwitchName="),
        (
            "SwitchName=s0 Nodes=n1 Switches=s1\nSwitchName=s1 Nodes=n2\n",
            "topology.conf:1: switch s0 has both Nodes= and Switches=",
        ),
        ("SwitchName=a Switches=b\nSwitchName=b Switches=a\n", "switch a is its own ancestor"),
        (
            "SwitchName=s0 Nodes=n1 LinkSpeed=fast\n",
            "topology.conf:1: invalid value for LinkSpeed: 'fast' (expected an integer)",
        ),
    ],
    ids=[
        "unknown-switch",
        "node-in-two-leaves",
        "unknown-node",
        "duplicate",
        "no-name",
        "nodes-and-switches",
        "cycle",
        "bad-speed",
    ],
)
def test_bad_lines(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_topology_conf(text, NODES)
    assert message in str(err.value)


SLURM_CONF = """\
ClusterName=c
NodeName=n[1-8] CPUs=4 RealMemory=1000
PartitionName=batch Nodes=ALL Default=YES
"""


def test_read_beside_slurm_conf_only_with_topology_tree(tmp_path: Path) -> None:
    (tmp_path / "topology.conf").write_text(TWO_LEAVES)
    conf = tmp_path / "slurm.conf"
    conf.write_text(SLURM_CONF)
    assert load_slurm_conf(conf).topology is None
    conf.write_text(SLURM_CONF + "TopologyPlugin=topology/tree\n")
    topo = load_slurm_conf(conf).topology
    assert topo is not None and [s.name for s in topo.switches] == ["s0", "s1", "spine"]


def test_topology_tree_without_the_file_is_an_error(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(SLURM_CONF + "TopologyPlugin=topology/tree\n")
    with pytest.raises(ConfigError, match="topology.conf: cannot read configuration file"):
        load_slurm_conf(conf)
