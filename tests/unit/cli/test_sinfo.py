"""sinfo output against what Slurm 22.05 prints for the same cluster (reference captures 01, 02, 09, 70-72)."""

from __future__ import annotations

import calendar
import os
import subprocess
import sys
from typing import Any

import pytest

from cli import sinfo
from shoal.v1 import cluster_pb2

NOW = calendar.timegm((2026, 11, 29, 21, 40, 1, 0, 0, 0))


pytestmark = pytest.mark.usefixtures("utc")  # the captures print UTC times


def partitions() -> list[cluster_pb2.PartitionInfo]:
    return [
        cluster_pb2.PartitionInfo(name="batch", nodes="node[1-4]", is_default=True, max_time_min=-2, state="UP",
                                  default_time_min=-1, total_nodes=4, total_cpus=64, oversubscribe="NO"),
        cluster_pb2.PartitionInfo(name="debug", nodes="node[1-2]", max_time_min=60, state="UP",
                                  default_time_min=30, total_nodes=2, total_cpus=32, oversubscribe="NO"),
    ]  # fmt: skip


def node(name: str, base: str = "IDLE", alloc_cpus: int = 0, **extra: Any) -> cluster_pb2.NodeInfo:
    parts = ["batch", "debug"] if name in ("node1", "node2") else ["batch"]
    info = cluster_pb2.NodeInfo(
        name=name, addr="127.0.0.1", hostname="vm", state=base, base_state=base, cpus=16, boards=1, sockets=2,
        cores_per_socket=8, threads_per_core=1, real_memory_mb=64000, gres="gpu:h100:8", weight=1,
        alloc_cpus=alloc_cpus, partitions=parts, **extra,
    )  # fmt: skip
    return info


def idle_nodes() -> list[cluster_pb2.NodeInfo]:
    return [node(f"node{i}") for i in range(1, 5)]


def busy_nodes() -> list[cluster_pb2.NodeInfo]:
    return [node("node1", "MIXED", 4), node("node2", "MIXED", 2), node("node3", "ALLOCATED", 16),
            node("node4", "ALLOCATED", 16)]  # fmt: skip


def run(
    fmt_str: str, nodes: list[cluster_pb2.NodeInfo], flt: sinfo.NodeFilter | None = None, **kw: bool
) -> str:
    from cli import fmt

    fields = fmt.parse_format(fmt_str, sinfo.HEADERS.keys())
    return "\n".join(sinfo.render_sinfo(partitions(), nodes, fields, flt, **kw)) + "\n"


def test_default_idle_cluster() -> None:
    assert (
        run(sinfo.DEFAULT_FORMAT, idle_nodes())
        == """\
PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
batch*       up   infinite      4   idle node[1-4]
debug        up    1:00:00      2   idle node[1-2]
"""
    )


def test_default_busy_cluster_groups_by_state() -> None:
    assert (
        run(sinfo.DEFAULT_FORMAT, busy_nodes())
        == """\
PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
batch*       up   infinite      2    mix node[1-2]
batch*       up   infinite      2  alloc node[3-4]
debug        up    1:00:00      2    mix node[1-2]
"""
    )


def test_summarize() -> None:
    assert (
        run(sinfo.SUMMARIZE_FORMAT, idle_nodes())
        == """\
PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST
batch*       up   infinite          0/4/0/4 node[1-4]
debug        up    1:00:00          0/2/0/2 node[1-2]
"""
    )


def test_node_oriented_long() -> None:
    out = run(sinfo.NODE_LONG_FORMAT, busy_nodes(), node_oriented=True).splitlines()
    assert {len(line) for line in out} == {len(out[0])}  # REASON is a padded 20-wide column
    assert (
        [line.rstrip() for line in out]
        == """\
NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE REASON
node1          1    batch*       mixed 16      2:8:1  64000        0      1   (null) none
node1          1     debug       mixed 16      2:8:1  64000        0      1   (null) none
node2          1    batch*       mixed 16      2:8:1  64000        0      1   (null) none
node2          1     debug       mixed 16      2:8:1  64000        0      1   (null) none
node3          1    batch*   allocated 16      2:8:1  64000        0      1   (null) none
node4          1    batch*   allocated 16      2:8:1  64000        0      1   (null) none
""".splitlines()
    )


def test_node_oriented_default() -> None:
    assert run(sinfo.NODE_FORMAT, idle_nodes(), node_oriented=True).splitlines()[:3] == [
        "NODELIST   NODES PARTITION STATE ",
        "node1          1    batch* idle  ",
        "node1          1     debug idle  ",
    ]


def test_gres_and_cpu_state_columns() -> None:
    assert (
        run("%N %c %m %G %T %C", busy_nodes(), node_oriented=True)
        == """\
NODELIST CPUS MEMORY GRES STATE CPUS(A/I/O/T)
node1 16 64000 gpu:h100:8 mixed 4/12/0/16
node1 16 64000 gpu:h100:8 mixed 4/12/0/16
node2 16 64000 gpu:h100:8 mixed 2/14/0/16
node2 16 64000 gpu:h100:8 mixed 2/14/0/16
node3 16 64000 gpu:h100:8 allocated 16/0/0/16
node4 16 64000 gpu:h100:8 allocated 16/0/0/16
"""
    )


def test_long_partition_format() -> None:
    assert (
        run(sinfo.LONG_FORMAT, idle_nodes())
        == """\
PARTITION AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST
batch*       up   infinite 1-infinite   no       NO        all      4        idle node[1-4]
debug        up    1:00:00 1-infinite   no       NO        all      2        idle node[1-2]
"""
    )


def drained_cluster() -> list[cluster_pb2.NodeInfo]:
    return [
        node("node1", "IDLE", drain=True, reason="maintenance", reason_user="root", reason_time=NOW - 60),
        node("node2", "MIXED", 4, drain=True, reason="maintenance", reason_user="root", reason_time=NOW - 60),
        node("node3", "DOWN", not_responding=True, reason="Not responding", reason_user="slurm",
             reason_time=NOW - 30),
        node("node4"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "compact", "long"),
    [
        ({"base": "IDLE"}, "idle", "idle"),
        ({"base": "ALLOCATED"}, "alloc", "allocated"),
        ({"base": "MIXED"}, "mix", "mixed"),
        ({"base": "DOWN"}, "down", "down"),
        ({"base": "IDLE", "drain": True}, "drain", "drained"),
        ({"base": "MIXED", "drain": True}, "drng", "draining"),
        ({"base": "ALLOCATED", "completing": True}, "comp", "completing"),
        ({"base": "UNKNOWN"}, "unk", "unknown"),
        ({"base": "DOWN", "not_responding": True}, "down*", "down*"),
        ({"base": "IDLE", "not_responding": True}, "idle*", "idle*"),
        ({"base": "IDLE", "drain": True, "completing": True}, "drng", "draining"),
        # scontrol reboot, as the real 22.05 showed each (its scontrol State= in the id)
        ({"base": "MIXED", "reboot_requested": True}, "mix@", "mixed@"),
        ({"base": "IDLE", "reboot_requested": True}, "mix@", "mixed@"),
        ({"base": "ALLOCATED", "reboot_requested": True}, "alloc@", "allocated@"),
        ({"base": "MIXED", "drain": True, "reboot_requested": True}, "drng@", "draining@"),
        ({"base": "ALLOCATED", "drain": True, "reboot_requested": True}, "drng@", "draining@"),
        ({"base": "IDLE", "drain": True, "reboot_requested": True}, "boot", "reboot"),
        ({"base": "DOWN", "reboot_requested": True}, "boot", "reboot"),
        ({"base": "DOWN", "reboot_issued": True}, "boot^", "reboot^"),
        ({"base": "DOWN", "drain": True, "reboot_issued": True}, "boot^", "reboot^"),
        ({"base": "MIXED", "reboot_requested": True, "not_responding": True}, "mix*", "mixed*"),
    ],
    ids=[
        "idle",
        "alloc",
        "mix",
        "down",
        "drain",
        "drng",
        "comp",
        "unk",
        "down-noresp",
        "idle-noresp",
        "drng-completing",
        "MIXED+REBOOT_REQUESTED",
        "IDLE+REBOOT_REQUESTED",
        "ALLOCATED+REBOOT_REQUESTED",
        "MIXED+DRAIN+REBOOT_REQUESTED",
        "ALLOCATED+DRAIN+REBOOT_REQUESTED",
        "IDLE+DRAIN+REBOOT_REQUESTED",
        "DOWN+REBOOT_REQUESTED",
        "DOWN+REBOOT_ISSUED",
        "DOWN+DRAIN+REBOOT_ISSUED",
        "MIXED+REBOOT_REQUESTED+NOT_RESPONDING",
    ],  # fmt: skip
)
def test_state_names(flags: dict[str, Any], compact: str, long: str) -> None:
    info = node("node9", str(flags.pop("base")), **flags)
    assert (sinfo.node_state_compact(info), sinfo.node_state_long(info)) == (compact, long)


@pytest.mark.parametrize(
    ("states", "shown"),
    [
        ("boot", ["node2", "node3"]),
        ("reboot", ["node2", "node3"]),
        ("drain", ["node1", "node2"]),
        ("draining", ["node2"]),
        ("drained", ["node1"]),
    ],
    ids=["boot", "reboot", "drain", "draining", "drained"],
)
def test_state_filters_of_drain_and_reboot(states: str, shown: list[str]) -> None:
    nodes = [
        node("node1", "IDLE", drain=True),
        node("node2", "MIXED", 4, drain=True, reboot_requested=True),
        node("node3", "DOWN", reboot_issued=True),
        node("node4"),
    ]
    tests = sinfo.parse_node_states(states)
    assert [n.name for n in nodes if any(t(n) for t in tests)] == shown


def test_states_split_rows_and_count_as_other() -> None:
    """Rows in 22.05's default order "#P,-t": partitions as configured, then the numeric state
    (flags included) decreasing: down* (DOWN|NO_RESPOND), drng (MIXED|DRAIN), drain (IDLE|DRAIN), idle
    (measured: drng above drain)."""
    out = run("%P %t %D %F %N", drained_cluster())
    assert (
        out
        == """\
PARTITION STATE NODES NODES(A/I/O/T) NODELIST
batch* down* 1 0/0/1/1 node3
batch* drng 1 1/0/0/1 node2
batch* drain 1 0/0/1/1 node1
batch* idle 1 0/1/0/1 node4
debug drng 1 1/0/0/1 node2
debug drain 1 0/0/1/1 node1
"""
    )


def test_list_reasons_groups_across_partitions() -> None:
    flt = sinfo.NodeFilter(reasons_only=True)
    assert (
        run(sinfo.REASONS_FORMAT, drained_cluster(), flt)
        == """\
REASON               USER      TIMESTAMP           NODELIST
maintenance          root      2026-11-29T21:39:01 node[1-2]
Not responding       slurm     2026-11-29T21:39:31 node3
"""
    )


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (sinfo.NodeFilter(partitions={"debug"}), ["debug drng node2", "debug drain node1"]),
        (sinfo.NodeFilter(nodes={"node4"}), ["batch* idle node4"]),
        (sinfo.NodeFilter(state_tests=sinfo.parse_node_states("idle,down")), ["batch* down* node3",
                                                                               "batch* idle node4"]),
        (sinfo.NodeFilter(state_tests=sinfo.parse_node_states("drain")), ["batch* drng node2", "batch* drain node1",
                                                                           "debug drng node2", "debug drain node1"]),
        (sinfo.NodeFilter(dead_only=True), ["batch* down* node3"]),
        (sinfo.NodeFilter(responding_only=True, partitions={"batch"}), ["batch* drng node2", "batch* drain node1",
                                                                         "batch* idle node4"]),
    ],
    ids=["partition", "nodes", "states", "drain", "dead", "responding"],
)  # fmt: skip
def test_filters(flt: sinfo.NodeFilter, expected: list[str]) -> None:
    assert run("%P %t %N", drained_cluster(), flt).splitlines()[1:] == expected


def test_bad_state() -> None:
    with pytest.raises(ValueError, match="Invalid node state specified: bogus"):
        sinfo.parse_node_states("idle,bogus")


def test_differing_cpus_print_min_plus_unless_exact() -> None:
    nodes = idle_nodes()
    nodes[3].cpus = 8
    assert run("%P %c %D", nodes).splitlines()[1] == "batch* 8+ 4"
    assert run("%P %c %D", nodes, exact=True).splitlines()[1:3] == ["batch* 16 3", "batch* 8 1"]


def test_hidden_partition_needs_all() -> None:
    parts = partitions()
    parts[1].hidden = True
    from cli import fmt

    fields = fmt.parse_format("%P", sinfo.HEADERS.keys())
    assert sinfo.render_sinfo(parts, idle_nodes(), fields) == ["PARTITION", "batch*"]
    shown = sinfo.render_sinfo(parts, idle_nodes(), fields, sinfo.NodeFilter(show_hidden=True))
    assert shown == ["PARTITION", "batch*", "debug"]


def test_long_names_format() -> None:
    from cli import fmt

    fields = fmt.parse_long_format("Partition:10,StateCompact:.6,NodeList,Gres", sinfo.LONG_NAMES)
    assert sinfo.render_sinfo(partitions(), idle_nodes(), fields)[:2] == [
        "PARTITION  STATE" + "NODELIST".ljust(20) + "GRES".ljust(20),
        "batch*      idle" + "node[1-4]".ljust(20) + "gpu:h100:8".ljust(20),
    ]


def test_wide_partition_name_widens_the_column() -> None:
    from cli import fmt

    parts = partitions()
    parts[1].name = "a-very-long-partition"
    fields = fmt.parse_format(sinfo.DEFAULT_FORMAT, sinfo.HEADERS.keys())
    assert sinfo.render_sinfo(parts, idle_nodes(), fields) == [
        "PARTITION".ljust(21) + " AVAIL  TIMELIMIT  NODES  STATE NODELIST",
        "batch*".ljust(21) + "    up   infinite      4   idle node[1-4]",
        "a-very-long-partition    up    1:00:00      2   idle node[1-2]",
    ]


def _sinfo(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SHOAL_AGENT_SOCKET": "/nonexistent/shoal-agent.sock"}
    return subprocess.run([sys.executable, "-m", "cli.sinfo", *args], capture_output=True, text=True, env=env,
                          timeout=30)  # fmt: skip


def test_dead_controller() -> None:
    proc = _sinfo()
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "slurm_load_partitions: Unable to contact slurm controller (connect failure)\n"


def test_option_errors_and_help() -> None:
    bad = _sinfo("-t", "bogus")
    assert (bad.returncode, bad.stderr) == (1, "sinfo: error: Invalid node state specified: bogus\n")
    unknown = _sinfo("--bogus")
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert "--summarize" in _sinfo("--help").stdout
    assert _sinfo("-V").stdout.startswith("slurm 22.05")


# 22.05 (captured 2026-12-01): getopt's words, then the hint; exit 1
GETOPT_REFUSALS = [
    (["--bogus"], "sinfo: unrecognized option '--bogus'"),
    (["-Z"], "sinfo: invalid option -- 'Z'"),
    (["-s", "-Z"], "sinfo: invalid option -- 'Z'"),
    (["-Zs"], "sinfo: invalid option -- 'Z'"),
    (["--bogus=3"], "sinfo: unrecognized option '--bogus=3'"),
    (["-p"], "sinfo: option requires an argument -- 'p'"),
    (["--partition"], "sinfo: option '--partition' requires an argument"),
    (["--summarize=3"], "sinfo: option '--summarize' doesn't allow an argument"),
]


@pytest.mark.parametrize(("argv", "line"), GETOPT_REFUSALS, ids=[" ".join(a) for a, _ in GETOPT_REFUSALS])
def test_option_refusals_in_getopts_words(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sinfo._run(argv) == 1
    assert capsys.readouterr() == ("", f'{line}\nTry "sinfo --help" for more information\n')


def test_help_imports_no_grpc() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.sinfo", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    imported = {
        line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }
    assert proc.returncode == 0
    assert not {m for m in imported if m.split(".")[0] in {"grpc", "sqlalchemy", "ctld", "noded", "dbd"}}


def test_one_parser_reads_one_command_line_after_another() -> None:
    """The parser is built once per process (the runner's forks share it): a command line leaves
    nothing behind for the next one."""
    first = sinfo.PARSER.parse_args(["-N", "-l", "-p", "debug", "-t", "idle", "-o", "%N"])
    second = sinfo.PARSER.parse_args([])
    assert (first.Node, first.long, first.partition, first.states) == (True, True, "debug", "idle")
    assert vars(second) == vars(sinfo._parser().parse_args([]))


def scenario_249_nodes() -> list[cluster_pb2.NodeInfo]:
    """node1 idle, node2 mixed (3 GPUs used), node3 allocated (all 8), node4 drained."""
    return [
        node("node1", gres_used="gpu:h100:0(IDX:N/A)"),
        node("node2", "MIXED", 1, gres_used="gpu:h100:3(IDX:0-2)"),
        node("node3", "ALLOCATED", 16, gres_used="gpu:h100:8(IDX:0-7)"),
        node("node4", drain=True, reason="sorttest", gres_used="gpu:h100:0(IDX:N/A)"),
    ]


def test_rows_sort_as_2205_by_default_and_with_sort() -> None:
    """Scenario 249 (22.05): "#P,-t" by default (partitions as configured, the numeric state
    decreasing: drain, mix, alloc, idle); -S t ascending; -S -N node names decreasing; -N -S -t."""
    nodes = scenario_249_nodes()
    assert run("%P %t %N", nodes) == (
        "PARTITION STATE NODELIST\nbatch* drain node4\nbatch* mix node2\nbatch* alloc node3\n"
        "batch* idle node1\ndebug mix node2\ndebug idle node1\n"
    )
    batch = sinfo.NodeFilter(partitions={"batch"})
    assert run("%P %t %N", nodes, batch, sort="t").splitlines()[1:] == [  # type: ignore[arg-type]
        "batch* idle node1",
        "batch* alloc node3",
        "batch* mix node2",
        "batch* drain node4",
    ]
    assert run("%N %t", nodes, sort="-N").splitlines()[1:] == [  # type: ignore[arg-type]
        "node4 drain",
        "node3 alloc",
        "node2 mix",
        "node1 idle",
    ]
    assert run("%N %t", nodes, batch, node_oriented=True, sort="-t").splitlines()[1:] == [  # type: ignore[arg-type]
        "node4 drain",
        "node2 mix",
        "node3 alloc",
        "node1 idle",
    ]


def test_without_a_partition_column_a_node_is_one_row_of_one_partition() -> None:
    """Scenario 249 (22.05): `sinfo -o "%N %t"` lists node1 and node2 once, not again for debug; a
    partition's own column (%l) still parts the rows by its value."""
    nodes = scenario_249_nodes()
    assert run("%N %t", nodes).splitlines()[1:] == ["node4 drain", "node2 mix", "node3 alloc", "node1 idle"]
    assert run("%D %G", idle_nodes()).splitlines()[1:] == ["4 gpu:h100:8"]
    assert run("%N %l", idle_nodes()).splitlines()[1:] == ["node[1-4] infinite", "node[1-2] 1:00:00"]


def test_a_sort_value_may_start_with_a_dash_as_getopt_takes_it() -> None:
    """22.05's getopt takes the word after -S whatever it starts with: `sinfo -S -N`, `squeue -S -t`."""
    from cli import options, squeue

    assert options.refuse_as_getopt("sinfo", sinfo.PARSER, ["-S", "-N", "-o", "%N"]) == [
        "--sort=-N",
        "--format=%N",
    ]
    args, _ = squeue.parse_command_line(["-S", "-t", "-u", "alice"])
    assert (args.sort, args.user) == ("-t", "alice")
