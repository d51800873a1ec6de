"""topology.conf (Slurm's topology/tree): a tree of switches, leaf switches holding nodes.

Read when slurm.conf says `TopologyPlugin=topology/tree`, from the file beside slurm.conf.
Leaf switches list `Nodes=` (hostlists), upper switches list `Switches=`; LinkSpeed is kept for
`scontrol show topology` only. Errors cite "file:line".
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from shoal.conf.errors import ConfigError
from shoal.conf.reader import ConfLine, parse_config_text, read_config_file
from shoal.conf.values import Values

_KEYS = ("SwitchName", "Switches", "Nodes", "LinkSpeed")
_KEYS_LOWER = {key.lower() for key in _KEYS}


@dataclass(frozen=True)
class SwitchConf:
    """One switch: a leaf holds `nodes`, an upper switch holds `switches`."""

    name: str
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_speed: int = 1
    level: int = 0  # 0 for a leaf; one more than its highest child otherwise
    source: str = ""


@dataclass(frozen=True)
class TopologyConf:
    """The switch tree, in file order, with each node's path from its top switch."""

    path: str
    switches: tuple[SwitchConf, ...] = ()
    warnings: tuple[str, ...] = ()
    _parent: dict[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)
    _leaf: dict[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        for switch in self.switches:
            for child in switch.switches:
                self._parent[child] = switch.name
            for node in switch.nodes:
                self._leaf[node] = switch.name

    def switch(self, name: str) -> SwitchConf | None:
        return next((s for s in self.switches if s.name == name), None)

    def leaf_of(self, node: str) -> str | None:
        return self._leaf.get(node)

    def nodes_under(self, name: str) -> tuple[str, ...]:
        """Every node below switch `name`, in file order."""
        found = self.switch(name)
        if found is None:
            return ()
        nodes = list(found.nodes)
        for child in found.switches:
            nodes.extend(self.nodes_under(child))
        return tuple(nodes)

    def address(self, node: str) -> tuple[str, str]:
        """SLURM_TOPOLOGY_ADDR and SLURM_TOPOLOGY_ADDR_PATTERN of `node`: ("s2.s0.n1", "switch.switch.node")."""
        path: list[str] = []
        switch = self._leaf.get(node)
        while switch is not None:
            path.insert(0, switch)
            switch = self._parent.get(switch)
        return ".".join([*path, node]), ".".join(["switch"] * len(path) + ["node"])


def load_topology_conf(path: str | os.PathLike[str], known_nodes: Iterable[str]) -> TopologyConf:
    """Read topology.conf; a missing file is a ConfigError."""
    name = os.fspath(path)
    return _build(name, read_config_file(name), frozenset(known_nodes))


def parse_topology_conf(text: str, known_nodes: Iterable[str], path: str = "topology.conf") -> TopologyConf:
    """topology.conf from text (tests)."""
    return _build(path, parse_config_text(path, text), frozenset(known_nodes))


def _build(path: str, lines: Iterable[ConfLine], known: frozenset[str]) -> TopologyConf:
    read: list[SwitchConf] = []
    warnings: list[str] = []
    seen: dict[str, str] = {}
    leaf_of: dict[str, str] = {}
    for line in lines:
        settings: dict[str, tuple[str, str]] = {}
        for key, value in line.pairs:
            if key.lower() not in _KEYS_LOWER:
                warnings.append(f"{line.source}: unknown key '{key}' ignored")
                continue
            settings[key.lower()] = (value, line.source)
        values = Values(settings, line.source)
        name = values.text("SwitchName", "")
        if not name:
            raise ConfigError(f"{line.source}: topology.conf line has no SwitchName=")
        if name in seen:
            raise ConfigError(f"{line.source}: switch {name} already defined at {seen[name]}")
        seen[name] = line.source
        nodes = tuple(values.hostnames("Nodes"))
        switches = tuple(values.hostnames("Switches"))
        if nodes and switches:
            raise ConfigError(f"{line.source}: switch {name} has both Nodes= and Switches=")
        for node in nodes:
            if node not in known:
                raise ConfigError(
                    f"{values.source('Nodes')}: switch {name}: node {node} is not in slurm.conf"
                )
            if node in leaf_of:
                raise ConfigError(
                    f"{values.source('Nodes')}: node {node} is in two leaf switches ({leaf_of[node]} and {name})"
                )
            leaf_of[node] = name
        read.append(
            SwitchConf(
                name=name,
                nodes=nodes,
                switches=switches,
                link_speed=values.integer("LinkSpeed", 1),
                source=line.source,
            )
        )
    by_name = {switch.name: switch for switch in read}
    parent: dict[str, str] = {}
    for switch in read:
        for child in switch.switches:
            if child not in by_name:
                raise ConfigError(
                    f"{switch.source}: switch {switch.name}: unknown switch {child} in Switches="
                )
            if child in parent:
                raise ConfigError(
                    f"{switch.source}: switch {child} has two parents ({parent[child]} and {switch.name})"
                )
            parent[child] = switch.name
    levels: dict[str, int] = {}
    for switch in read:
        _level(switch.name, by_name, levels, ())
    missing = sorted(known - leaf_of.keys())
    if read and missing:
        warnings.append(f"{path}: switches lack access to {len(missing)} node(s): {','.join(missing)}")
    built = tuple(
        SwitchConf(s.name, s.nodes, s.switches, s.link_speed, levels[s.name], s.source) for s in read
    )
    return TopologyConf(path, built, tuple(warnings))


def _level(name: str, by_name: dict[str, SwitchConf], levels: dict[str, int], path: tuple[str, ...]) -> int:
    if name in levels:
        return levels[name]
    switch = by_name[name]
    if name in path:
        raise ConfigError(f"{switch.source}: switch {name} is its own ancestor")
    below = [_level(child, by_name, levels, (*path, name)) for child in switch.switches]
    levels[name] = max(below) + 1 if below else 0
    return levels[name]
