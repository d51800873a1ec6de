"""sinfo: partitions and nodes the way Slurm 22.05 prints them.

Nodes of a partition that print the same (same state, same reason ...) share one row; -N gives one row per
node and partition. The grouping and every column are pure functions of PartitionInfo/NodeInfo messages,
so tests build messages directly. No grpc: the controller is reached through the local agent.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from cli import fmt
from cli.options import OptionError, refuse_as_getopt
from shoal import version_line
from shoal.timefmt import format_limit_sinfo, format_timestamp
from shoal.v1 import cluster_pb2

if TYPE_CHECKING:
    from cli.common import CommandError

PROG = "sinfo"

DEFAULT_FORMAT = "%#P %.5a %.10l %.6D %.6t %N"
LONG_FORMAT = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
NODE_FORMAT = "%#N %.6D %.#P %6t"
NODE_LONG_FORMAT = "%#N %.6D %.#P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"
SUMMARIZE_FORMAT = "%#P %.5a %.10l %.16F %N"
REASONS_FORMAT = "%20E %9u %19H %N"
REASONS_LONG_FORMAT = "%20E %12U %19H %6t %N"

HEADERS: dict[str, str] = {
    "a": "AVAIL", "A": "NODES(A/I)", "b": "ACTIVE_FEATURES", "B": "MAX_CPUS_PER_NODE", "c": "CPUS",
    "C": "CPUS(A/I/O/T)", "d": "TMP_DISK", "D": "NODES", "e": "FREE_MEM", "E": "REASON",
    "f": "AVAIL_FEATURES", "F": "NODES(A/I/O/T)", "g": "GROUPS", "G": "GRES", "h": "OVERSUBSCRIBE",
    "H": "TIMESTAMP", "I": "PRIO_JOB_FACTOR", "l": "TIMELIMIT", "L": "DEFAULTTIME", "m": "MEMORY",
    "M": "PREEMPT_MODE", "n": "HOSTNAMES", "N": "NODELIST", "o": "NODE_ADDR", "O": "CPU_LOAD",
    "p": "PRIO_TIER", "P": "PARTITION", "r": "ROOT", "R": "PARTITION", "s": "JOB_SIZE",
    "S": "ALLOCNODES", "t": "STATE", "T": "STATE", "u": "USER", "U": "USER", "v": "VERSION",
    "V": "CLUSTER", "w": "WEIGHT", "X": "SOCKETS", "Y": "CORES", "Z": "THREADS", "z": "S:C:T",
    "gresused": "GRES_USED", "allocmem": "ALLOCMEM",
}  # fmt: skip

LONG_NAMES: dict[str, str] = {
    "partition": "P", "partitionname": "R", "available": "a", "time": "l", "defaulttime": "L",
    "nodes": "D", "statecompact": "t", "statelong": "T", "nodelist": "N", "nodehost": "n",
    "nodeaddr": "o", "gres": "G", "gresused": "gresused", "cpus": "c", "cpusstate": "C",
    "cpusload": "O", "memory": "m", "freemem": "e", "allocmem": "allocmem", "reason": "E",
    "features": "f", "features_act": "b", "weight": "w", "sockets": "X", "cores": "Y", "threads": "Z",
    "socketcorethread": "z", "nodeaiot": "F", "nodeai": "A", "size": "s", "root": "r",
    "oversubscribe": "h", "groups": "g", "prioritytier": "p", "priorityjobfactor": "I",
    "timestamp": "H", "user": "u", "userlong": "U", "tmpdisk": "d", "version": "v", "cluster": "V",
    "preemptmode": "M", "allocnodes": "S", "maxcpuspernode": "B",
}  # fmt: skip

# Columns summed or listed over a row's nodes; every other column's value decides the grouping.
AGGREGATE = frozenset({"D", "N", "n", "o", "C", "F", "A", "O", "e", "allocmem"})
# Numeric node columns: grouped by value only with -e/--exact, else shown as "min+" over the row.
CONFIGURED = frozenset({"c", "m", "d", "w", "z", "X", "Y", "Z"})


class Group:
    """One output row: a partition (None for -R) and the nodes shown in it."""

    def __init__(
        self, partition: cluster_pb2.PartitionInfo | None, nodes: list[cluster_pb2.NodeInfo] | None = None
    ) -> None:
        self.partition = partition
        self.nodes: list[cluster_pb2.NodeInfo] = nodes if nodes is not None else []


# --- node states -------------------------------------------------------------------------------


def _is_other(node: cluster_pb2.NodeInfo) -> bool:
    """Down, drained, not responding or unknown: neither allocated nor idle (the O of A/I/O/T)."""
    base = node.base_state
    if base in ("DOWN", "UNKNOWN", "FUTURE") or node.not_responding:
        return True
    return node.drain and base == "IDLE"


_BASE_WORDS = {"IDLE": "idle", "ALLOCATED": "alloc", "MIXED": "mix", "UNKNOWN": "unk", "FUTURE": "futr"}


def _draining(node: cluster_pb2.NodeInfo) -> bool:
    """Drained with jobs still on it (allocated, mixed or completing): DRAINING; without: DRAINED."""
    base = node.base_state or node.state.split("+")[0]
    return node.drain and (base in ("ALLOCATED", "MIXED") or node.completing)


def _state_words(node: cluster_pb2.NodeInfo) -> tuple[str, str, str]:
    """(compact, long, suffix) of sinfo's %t and %T, as 22.05 prints them (measured on it):
    idle/idle, mix/mixed, drain/drained, drng/draining, comp/completing ...; a reboot pending is "@"
    (drng@, mix@ -- an idle node waiting for its reboot too -- alloc@), "boot"/"reboot" for a drained
    idle or DOWN one, "boot^" once issued; "*" when the node does not respond."""
    base = node.base_state or node.state.split("+")[0]
    plain = "*" if node.not_responding else ""
    suffix = plain or ("^" if node.reboot_issued else "@" if node.reboot_requested else "")
    if node.reboot_issued:
        return "boot", "reboot", suffix
    if base == "DOWN":
        return ("boot", "reboot", plain) if node.reboot_requested else ("down", "down", suffix)
    if node.drain:
        if _draining(node):
            return "drng", "draining", suffix
        return ("boot", "reboot", plain) if node.reboot_requested else ("drain", "drained", suffix)
    if node.completing:
        return "comp", "completing", suffix
    if node.maint and base == "IDLE":
        return "maint", "maint", suffix
    if node.reboot_requested and base == "IDLE":
        return "mix", "mixed", suffix
    return _BASE_WORDS.get(base, base.lower()[:5]), base.lower(), suffix


def node_state_compact(node: cluster_pb2.NodeInfo) -> str:
    """sinfo %t: idle, alloc, mix, down, drain, drng, comp, boot, unk ... with its suffix (* @ ^)."""
    compact, _, suffix = _state_words(node)
    return compact + suffix


def node_state_long(node: cluster_pb2.NodeInfo) -> str:
    """sinfo %T: idle, allocated, mixed, down, drained, draining, completing, reboot ... with its suffix."""
    _, long, suffix = _state_words(node)
    return long + suffix


_STATE_TESTS: dict[str, Callable[[cluster_pb2.NodeInfo], bool]] = {
    "idle": lambda n: n.base_state == "IDLE" and not n.drain,
    "alloc": lambda n: n.base_state == "ALLOCATED",
    "allocated": lambda n: n.base_state == "ALLOCATED",
    "mix": lambda n: n.base_state == "MIXED",
    "mixed": lambda n: n.base_state == "MIXED",
    "down": lambda n: n.base_state == "DOWN",
    "drain": lambda n: n.drain,
    "drained": lambda n: n.drain and not _draining(n),
    "draining": _draining,
    "drng": _draining,
    "comp": lambda n: n.completing,
    "completing": lambda n: n.completing,
    "unk": lambda n: n.base_state == "UNKNOWN",
    "unknown": lambda n: n.base_state == "UNKNOWN",
    "futr": lambda n: n.base_state == "FUTURE",
    "future": lambda n: n.base_state == "FUTURE",
    "maint": lambda n: n.maint,
    "boot": lambda n: n.reboot_requested or n.reboot_issued,
    "reboot": lambda n: n.reboot_requested or n.reboot_issued,
    "reboot_requested": lambda n: n.reboot_requested,
    "reboot_issued": lambda n: n.reboot_issued,
    "no_respond": lambda n: n.not_responding,
    "resp": lambda n: not n.not_responding,
}


def parse_node_states(text: str) -> list[Callable[[cluster_pb2.NodeInfo], bool]]:
    """`-t idle,drain` -> tests (a node matches any); ValueError names a bad state."""
    tests: list[Callable[[cluster_pb2.NodeInfo], bool]] = []
    for word in text.replace("&", ",").split(","):
        word = word.strip().lower()
        if not word:
            continue
        if word == "all":
            return []
        test = _STATE_TESTS.get(word)
        if test is None:
            raise ValueError(f"Invalid node state specified: {word}")
        tests.append(test)
    return tests


# --- values ------------------------------------------------------------------------------------


def _range(values: Sequence[int | float], text: Callable[[int | float], str] = str) -> str:
    lo, hi = min(values), max(values)
    return text(lo) if lo == hi else f"{text(lo)}-{text(hi)}"


def _min_plus(values: Sequence[str]) -> str:
    """Differing configured values print as the smallest with "+" (sinfo without -e)."""
    distinct = set(values)
    if len(distinct) == 1:
        return values[0]
    try:
        return str(min(int(v) for v in distinct)) + "+"
    except ValueError:
        return sorted(distinct)[0] + "+"


def _cpus_aiot(nodes: Iterable[cluster_pb2.NodeInfo]) -> str:
    alloc = idle = other = total = 0
    for node in nodes:
        total += node.cpus
        if _is_other(node):
            alloc += node.alloc_cpus
            other += node.cpus - node.alloc_cpus
        else:
            alloc += node.alloc_cpus
            idle += node.cpus - node.alloc_cpus
    return f"{alloc}/{idle}/{other}/{total}"


def _nodes_aiot(nodes: Sequence[cluster_pb2.NodeInfo], with_other: bool = True) -> str:
    alloc = sum(1 for n in nodes if not _is_other(n) and n.base_state in ("ALLOCATED", "MIXED"))
    other = sum(1 for n in nodes if _is_other(n))
    idle = len(nodes) - alloc - other
    if not with_other:
        return f"{alloc}/{idle}"
    return f"{alloc}/{idle}/{other}/{len(nodes)}"


def _hostlist(names: Iterable[str]) -> str:
    from shoal.hostlist import collect

    return collect(names)


def _part_value(part: cluster_pb2.PartitionInfo | None, key: str) -> str:
    if part is None:
        return "n/a"
    if key == "P":
        return part.name + ("*" if part.is_default else "")
    if key == "R":
        return part.name
    if key == "a":
        return {"UP": "up", "DOWN": "down", "DRAIN": "drain", "INACTIVE": "inact"}.get(
            part.state, part.state.lower()
        )
    if key == "l":
        return format_limit_sinfo(part.max_time_min)
    if key == "L":
        return format_limit_sinfo(part.default_time_min)
    if key == "s":
        return f"{part.min_nodes or 1}-{part.max_nodes if part.max_nodes else 'infinite'}"
    if key == "r":
        return "no"
    if key == "h":
        return part.oversubscribe or "NO"
    if key == "g":
        groups = part.allow_groups or "ALL"
        return "all" if groups == "ALL" else groups
    if key == "p":
        return str(part.priority_tier)
    if key == "I":
        return str(part.priority_job_factor)
    if key == "S":
        return "all"
    if key == "M":
        return part.preempt_mode or "OFF"
    if key == "B":
        return "UNLIMITED"
    return ""


_PARTITION_KEYS = frozenset("PRalLsrhgpISMB")


# One node's value of each per-node column (a table built once: sinfo looks these up per node and key).
_NODE_VALUES: dict[str, Callable[[cluster_pb2.NodeInfo], str]] = {
    "b": lambda n: ",".join(n.features) or "(null)",
    "c": lambda n: str(n.cpus),
    "d": lambda n: str(n.tmp_disk_mb),
    "E": lambda n: n.reason or "none",
    "f": lambda n: ",".join(n.features) or "(null)",
    "G": lambda n: n.gres or "(null)",
    "gresused": lambda n: n.gres_used or ("gpu:0(IDX:N/A)" if n.gres else "(null)"),
    "H": lambda n: format_timestamp(n.reason_time, unknown="Unknown"),
    "m": lambda n: str(n.real_memory_mb),
    "t": node_state_compact,
    "T": node_state_long,
    "u": lambda n: _user(n),
    "U": lambda n: f"{_user(n)}({n.reason_uid})" if n.reason else "Unknown",
    "v": lambda n: n.version or "N/A",
    "V": lambda n: "N/A",
    "w": lambda n: str(n.weight),
    "X": lambda n: str(n.sockets),
    "Y": lambda n: str(n.cores_per_socket),
    "Z": lambda n: str(n.threads_per_core),
    "z": lambda n: f"{n.sockets}:{n.cores_per_socket}:{n.threads_per_core}",
}


def _node_value(node: cluster_pb2.NodeInfo, key: str) -> str:
    """A column's value for a single node (aggregates handled by group_value)."""
    getter = _NODE_VALUES.get(key)
    return getter(node) if getter else ""


def _user(node: cluster_pb2.NodeInfo) -> str:
    if not node.reason:
        return "Unknown"
    if node.reason_user:
        return node.reason_user
    import pwd

    try:
        return pwd.getpwuid(node.reason_uid).pw_name
    except KeyError:
        return str(node.reason_uid)


def group_value(group: Group, key: str) -> str:
    """The text of one column for one row."""
    nodes = group.nodes
    if key in _PARTITION_KEYS:
        return _part_value(group.partition, key)
    if key == "D":
        return str(len(nodes))
    if key == "N":
        return _hostlist(n.name for n in nodes)
    if key == "n":
        return _hostlist(n.hostname or n.name for n in nodes)
    if key == "o":
        return _hostlist(n.addr or n.name for n in nodes)
    if key == "C":
        return _cpus_aiot(nodes)
    if key == "F":
        return _nodes_aiot(nodes)
    if key == "A":
        return _nodes_aiot(nodes, with_other=False)
    if not nodes:
        return ""
    if key == "O":
        return _range([n.hardware.cpu_load for n in nodes], lambda v: f"{v:.2f}")
    if key == "e":
        return _range([n.hardware.free_mem_mb for n in nodes])
    if key == "allocmem":
        return _range([n.alloc_mem_mb for n in nodes])
    if key in CONFIGURED:
        return _min_plus([_node_value(n, key) for n in nodes])
    return _node_value(nodes[0], key)


# --- grouping ----------------------------------------------------------------------------------


class NodeFilter:
    """What -p/-n/-t/-r/-d/-R/-a select."""

    def __init__(
        self,
        *,
        partitions: set[str] | None = None,
        nodes: set[str] | None = None,
        state_tests: list[Callable[[cluster_pb2.NodeInfo], bool]] | None = None,
        responding_only: bool = False,
        dead_only: bool = False,
        reasons_only: bool = False,
        show_hidden: bool = False,
    ) -> None:
        self.partitions = partitions
        self.nodes = nodes
        self.state_tests = state_tests or []
        self.responding_only = responding_only
        self.dead_only = dead_only
        self.reasons_only = reasons_only
        self.show_hidden = show_hidden


def _keep_node(node: cluster_pb2.NodeInfo, flt: NodeFilter) -> bool:
    if flt.nodes is not None and node.name not in flt.nodes:
        return False
    if flt.state_tests and not any(test(node) for test in flt.state_tests):
        return False
    if flt.responding_only and node.not_responding:
        return False
    dead = node.not_responding or node.base_state == "DOWN"
    if flt.dead_only and not dead:
        return False
    return not (flt.reasons_only and not (node.drain or node.base_state == "DOWN" or node.not_responding))


def group_nodes(
    partitions: Sequence[cluster_pb2.PartitionInfo],
    nodes: Sequence[cluster_pb2.NodeInfo],
    keys: Sequence[str],
    flt: NodeFilter | None = None,
    *,
    node_oriented: bool = False,
    exact: bool = False,
) -> list[Group]:
    """Rows: per partition (in the controller's order), nodes printing the same values share a row.

    -N makes one row per node and partition; -R (flt.reasons_only) groups across partitions.
    """
    from shoal.hostlist import expand

    flt = flt or NodeFilter()
    by_name = {n.name: n for n in nodes}
    split = {k for k in keys if k not in AGGREGATE and (exact or k not in CONFIGURED)}
    pairs: list[tuple[cluster_pb2.PartitionInfo | None, cluster_pb2.NodeInfo]] = []
    expanded: dict[str, list[str]] = {}  # partitions often name the same nodes: expand each list once
    for part in partitions:
        if flt.partitions is not None and part.name not in flt.partitions:
            continue
        if (part.hidden or part.unavailable) and not flt.show_hidden and flt.partitions is None:
            continue
        names = expanded.get(part.nodes)
        if names is None:
            names = expanded[part.nodes] = expand(part.nodes)
        for name in names:
            node = by_name.get(name)
            if node is not None and _keep_node(node, flt):
                pairs.append((part, node))
    if node_oriented:
        order = {n.name: i for i, n in enumerate(nodes)}
        pairs.sort(key=lambda pn: order[pn[1].name])
        return [Group(part, [node]) for part, node in pairs]

    # Without a partition column a row is what it shows: a node of two partitions that shows the same
    # values in both is one node of one row (22.05: `sinfo -o "%N %G"` is node[1-4] once, not again
    # node[1-2] for debug); a partition's own columns (%l, %a ...) still part rows by their values.
    by_partition = any(k in ("P", "R") for k in keys)
    rows: list[Group] = []
    index: dict[tuple[object, ...], Group] = {}
    seen: set[tuple[tuple[object, ...], str]] = set()
    for pair_part, node in pairs:
        row_part = None if flt.reasons_only else pair_part
        part_name = row_part.name if row_part is not None and by_partition else ""
        key = (part_name, *(group_value(Group(row_part, [node]), k) for k in sorted(split)))
        if (key, node.name) in seen:
            continue
        seen.add((key, node.name))
        group = index.get(key)
        if group is None:
            group = Group(row_part)
            index[key] = group
            rows.append(group)
        group.nodes.append(node)
    return rows


# 22.05's numeric node states, which `-S t` orders by: the base state, then its flags (so a drained
# node sorts above a mixed one, and "-t", the default, lists it first)
_STATE_NUMBERS = {"UNKNOWN": 0, "DOWN": 1, "IDLE": 2, "ALLOCATED": 3, "MIXED": 5, "FUTURE": 6}
_STATE_FLAGS = (
    ("drain", 0x200),
    ("completing", 0x400),
    ("not_responding", 0x800),
    ("maint", 0x8000),
    ("reboot_requested", 0x10000),
    ("reboot_issued", 0x100000),
)
DEFAULT_SORT = "#P,-t"
DEFAULT_NODE_SORT = "N"


def _state_number(node: cluster_pb2.NodeInfo) -> int:
    number = _STATE_NUMBERS.get(node.base_state or node.state.split("+")[0], 0)
    for name, flag in _STATE_FLAGS:
        if getattr(node, name):
            number |= flag
    return number


def _natural(name: str) -> tuple[object, ...]:
    """node9 before node10."""
    import re

    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _sort_value(group: Group, key: str, configured: bool, order: dict[str, int]) -> tuple[object, ...]:
    if key in ("P", "R"):
        name = group.partition.name if group.partition is not None else ""
        return (order.get(name, len(order)),) if configured else (name,)
    if key in ("t", "T"):
        return (_state_number(group.nodes[0]),) if group.nodes else (0,)
    if key in ("N", "n", "o"):
        return _natural(group.nodes[0].name) if group.nodes else ()
    text = group_value(group, key).rstrip("+")
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def sort_rows(rows: list[Group], spec: str, partitions: Sequence[cluster_pb2.PartitionInfo]) -> list[Group]:
    """-S/--sort: fields as in -o (`+` ascending, the default, `-` descending; `#P` partitions in
    slurm.conf's order), the first field deciding first. The default "#P,-t" (-N: "N") as 22.05."""
    order = {p.name: i for i, p in enumerate(partitions)}
    out = list(rows)
    for item in reversed([i.strip() for i in spec.split(",") if i.strip()]):
        descending = item.startswith("-")
        item = item.lstrip("+-")
        configured = item.startswith("#")
        key = item.lstrip("#")
        key = LONG_NAMES.get(key.lower(), key) if len(key) > 1 else key
        out.sort(key=lambda g: _sort_value(g, key, configured, order), reverse=descending)
    return out


def auto_widths(fields: Sequence[fmt.Field], rows: Sequence[Group]) -> dict[str, int]:
    """Widths for `%#P` and `%#N`: wide enough for every value, never narrower than Slurm's minimum."""
    widths: dict[str, int] = {}
    for key, minimum in (("P", 9), ("N", 9)):
        if any(f.key == key and f.width == fmt.AUTO_WIDTH for f in fields):
            widths[key] = max([minimum, *(len(group_value(r, key)) for r in rows)])
    return widths


def render_rows(rows: Sequence[Group], fields: Sequence[fmt.Field], header: bool = True) -> list[str]:
    resolved = fmt.resolve_auto_widths(list(fields), auto_widths(fields, rows))
    lines: list[str] = []
    if header:
        lines.append(fmt.render(resolved, lambda key: HEADERS.get(key, key.upper())))
    for row in rows:
        lines.append(fmt.render(resolved, lambda key, row=row: group_value(row, key)))  # type: ignore[misc]
    return lines


def render_sinfo(
    partitions: Sequence[cluster_pb2.PartitionInfo],
    nodes: Sequence[cluster_pb2.NodeInfo],
    fields: Sequence[fmt.Field],
    flt: NodeFilter | None = None,
    *,
    node_oriented: bool = False,
    exact: bool = False,
    header: bool = True,
    sort: str | None = None,
) -> list[str]:
    """The whole of sinfo's output for these partitions and nodes, rows in `sort`'s order (None: the
    default; -R keeps the order its reasons came in)."""
    keys = [f.key for f in fields if f.key]
    rows = group_nodes(partitions, nodes, keys, flt, node_oriented=node_oriented, exact=exact)
    if sort is None and not (flt and flt.reasons_only):
        sort = DEFAULT_NODE_SORT if node_oriented else DEFAULT_SORT
    if sort:
        rows = sort_rows(rows, sort, partitions)
    return render_rows(rows, fields, header)


# --- command line ------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{PROG}: {message}", file=sys.stderr)
        print(f'Try "{PROG} --help" for more information', file=sys.stderr)
        raise SystemExit(1)


USAGE = (
    "Usage: sinfo [-abdelNRrsTv] [-i seconds] [-t states] [-p partition] [-n nodes]\n"
    "             [-S fields] [-o format] [-O Format] [--usage] [--help]\n"
)

HELP = """Usage: sinfo [OPTIONS]
  -a, --all                  show hidden partitions too
  -d, --dead                 only nodes that are down or not responding
  -e, --exact                group only nodes whose CPUs, memory ... are identical
  -h, --noheader             print no header line
  -i, --iterate=seconds      print again every so many seconds
  -l, --long                 the long format, with a date line
  -n, --nodes=NODES          only these nodes (hostlist)
  -N, --Node                 one line per node (and partition)
  -o, --format=format        columns as %-specifiers ("%#P %.5a %.10l %.6D %.6t %N")
  -O, --Format=format        columns by name ("Partition,NodeList:30,StateCompact")
  -p, --partition=PARTITION  only these partitions
  -r, --responding           only responding nodes
  -R, --list-reasons         why nodes are down or drained
  -s, --summarize            one line per partition: NODES(A/I/O/T)
  -t, --states=STATES        only nodes in these states (idle,alloc,mix,down,drain ...)
  -v, --verbose              say more
  -V, --version              print the version and exit

Help options:
  --help                     show this help message
  --usage                    show a short usage message
"""


def _parser() -> _Parser:
    p = _Parser(prog=PROG, add_help=False, allow_abbrev=False)
    p.add_argument("-a", "--all", action="store_true")
    p.add_argument("-d", "--dead", action="store_true")
    p.add_argument("-e", "--exact", action="store_true")
    p.add_argument("-h", "--noheader", action="store_true")
    p.add_argument("-i", "--iterate", type=int)
    p.add_argument("-l", "--long", action="store_true")
    p.add_argument("-n", "--nodes")
    p.add_argument("-N", "--Node", action="store_true")
    p.add_argument("-o", "--format")
    p.add_argument("-O", "--Format")
    p.add_argument("-p", "--partition")
    p.add_argument("-r", "--responding", action="store_true")
    p.add_argument("-R", "--list-reasons", action="store_true")
    p.add_argument("-s", "--summarize", action="store_true")
    p.add_argument("-S", "--sort")
    p.add_argument("-t", "--states", "--state")
    p.add_argument("-T", "--reservation", action="store_true")
    p.add_argument("-M", "--clusters")
    p.add_argument("--local", action="store_true")
    p.add_argument("--federation", action="store_true")
    p.add_argument("--noconvert", action="store_true")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("-V", "--version", action="store_true")
    p.add_argument("--help", action="store_true")
    p.add_argument("--usage", action="store_true")
    return p


# Built once, when the module is imported: the command runner imports the commands before it forks
# a child per call, so every child parses with this parser instead of building its own (building
# one is ~1 ms of a fresh fork's CPU, most of it copy-on-write faults). parse_args leaves it as is.
PARSER = _parser()


def choose_format(args: argparse.Namespace) -> list[fmt.Field]:
    """Options first, then SINFO_FORMAT, then the default of the chosen mode."""
    if args.format is not None:
        text = args.format
    elif args.Format is not None:
        return fmt.parse_long_format(args.Format, LONG_NAMES)
    elif args.list_reasons:
        text = REASONS_LONG_FORMAT if args.long else REASONS_FORMAT
    elif args.summarize:
        text = SUMMARIZE_FORMAT
    elif args.Node:
        text = NODE_LONG_FORMAT if args.long else NODE_FORMAT
    elif args.long:
        text = LONG_FORMAT
    else:
        text = os.environ.get("SINFO_FORMAT") or DEFAULT_FORMAT
    return fmt.parse_format(text, HEADERS.keys())


def build_filter(args: argparse.Namespace) -> NodeFilter:
    flt = NodeFilter(
        responding_only=args.responding,
        dead_only=args.dead,
        reasons_only=args.list_reasons,
        show_hidden=args.all,
    )
    partition = args.partition if args.partition is not None else os.environ.get("SINFO_PARTITION")
    if partition:
        flt.partitions = {p.strip() for p in partition.split(",") if p.strip()}
    if args.nodes:
        from shoal.hostlist import expand

        flt.nodes = set(expand(args.nodes))
    if args.states:
        flt.state_tests = parse_node_states(args.states)
    return flt


def _query() -> tuple[list[cluster_pb2.PartitionInfo], list[cluster_pb2.NodeInfo], int]:
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    try:  # nodes and partitions in one round trip
        nodes = ctld(
            "GetNodes", controller_pb2.GetNodesRequest(with_partitions=True), controller_pb2.GetNodesResponse
        )
    except CommandError as exc:
        raise _LoadError(f"{_refused_load(exc)}: {exc.message}") from exc
    now = nodes.now
    if not now:
        import time

        now = int(time.time())
    return list(nodes.partitions), list(nodes.nodes), now


def _refused_load(exc: CommandError) -> str:
    """Which of 22.05's two loads failed, for its message: sinfo loads the partitions first, so under
    PrivateData=nodes alone the refusal is slurm_load_node's (one more call, only on a failure)."""
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    if "permission denied" not in exc.message.lower():
        return "slurm_load_partitions"
    try:
        ctld("GetPartitions", controller_pb2.GetPartitionsRequest(), controller_pb2.GetPartitionsResponse)
    except CommandError:
        return "slurm_load_partitions"
    return "slurm_load_node"


class _LoadError(Exception):
    """The controller could not be read; the message is printed as is (Slurm's perror style)."""


def _run(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        words = refuse_as_getopt(PROG, PARSER, words)
        if "--" in words:  # 22.05's sinfo reads no operand and ignores any (`sinfo foo` lists all)
            words = words[: words.index("--")]
    except OptionError as exc:
        sys.stderr.write("".join(line + "\n" for line in exc.lines))
        return exc.exit_code
    args = PARSER.parse_args(words)
    if args.help:
        sys.stdout.write(HELP)
        return 0
    if args.usage:
        sys.stdout.write(USAGE)
        return 0
    if args.version:
        print(version_line())
        return 0
    try:
        fields = choose_format(args)
        flt = build_filter(args)
    except ValueError as exc:  # FormatError, HostlistError, bad state
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    if args.reservation:
        return _show_reservations(not args.noheader)
    node_oriented = args.Node and not args.summarize and not args.list_reasons
    while True:
        try:
            partitions, nodes, now = _query()
        except _LoadError as exc:
            print(exc, file=sys.stderr)
            return 1
        lines = render_sinfo(
            partitions,
            nodes,
            fields,
            flt,
            node_oriented=node_oriented,
            exact=args.exact,
            header=not args.noheader,
            sort=args.sort,
        )
        if args.long or args.iterate:
            lines.insert(0, fmt.long_date(now))
        sys.stdout.write("".join(line + "\n" for line in lines))
        if not args.iterate:
            return 0
        sys.stdout.write("\n")
        sys.stdout.flush()
        import time

        time.sleep(max(args.iterate, 1))


def _show_reservations(header: bool) -> int:
    """sinfo -T: one line per reservation (cli/reservations.py)."""
    from cli import reservations

    try:
        found = reservations.load()
    except reservations.ReservationError as exc:
        print(*exc.lines, sep="\n", file=sys.stderr)
        return 1
    if not found.reservations:
        print("No reservations in the system")  # as Slurm, with or without -h
        return 0
    reservations.print_lines(reservations.sinfo_lines(found, header))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from cli.common import run_main

    return run_main(PROG, lambda: _run(argv))


if __name__ == "__main__":
    raise SystemExit(main())
