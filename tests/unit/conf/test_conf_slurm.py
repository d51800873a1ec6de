"""slurm.conf as an admin writes it: syntax, DEFAULT lines, nodes, partitions, errors with file:line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shoal.conf import ConfigError, GresSpec, SlurmConfig, load_slurm_conf
from shoal.timefmt import NOT_SET, UNLIMITED

REFERENCE = Path("/work/shared/reference/slurm-22.05")
EXAMPLES = Path(__file__).resolve().parents[3] / "etc"

HEAD = "ClusterName=test\nSlurmctldHost=head(10.0.0.1)\n"


def write(directory: Path, text: str, name: str = "slurm.conf") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load(directory: Path, text: str) -> SlurmConfig:
    return load_slurm_conf(write(directory, text))


def error(directory: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(directory, text)
    return str(caught.value)


# --- the reference cluster and the examples ---------------------------------------------------


@pytest.mark.skipif(not REFERENCE.exists(), reason="reference samples not present")
def test_reference_slurm_conf_loads(tmp_path: Path) -> None:
    for name in ("slurm.conf", "gres.conf"):
        text = (REFERENCE / name).read_text().replace("@HOST@", "vm")
        write(tmp_path, text, name)
    config = load_slurm_conf(tmp_path / "slurm.conf")

    assert config.warnings == ()
    assert config.cluster_name == "realslurm"
    assert (config.control_machine, config.control_addr) == ("vm", "127.0.0.1")
    assert config.slurm_user == "slurm"
    assert config.return_to_service == 2
    assert config.def_mem_per_cpu == 1000
    assert config.gres_types == ("gpu",)
    assert config.select_type_parameters == ("CR_Core_Memory",)
    assert config.accounting_storage_enforce == ("associations",)
    assert config.slurmd_spool_dir == "/var/spool/realslurm/d/%n"  # % escapes left to consumers
    assert config.slurmd_parameters == ("config_overrides",)
    assert config.get("PriorityDecayHalfLife") == "7-0"
    assert [n.name for n in config.nodes] == ["node1", "node2", "node3", "node4"]
    node3 = config.node("node3")
    assert node3 is not None
    assert (node3.addr, node3.hostname, node3.port) == ("127.0.0.1", "vm", 17003)
    assert (node3.cpus, node3.boards, node3.sockets, node3.cores_per_socket, node3.threads_per_core) == (
        16, 1, 2, 8, 1,
    )  # fmt: skip
    assert node3.real_memory == 64000
    assert node3.gres == (GresSpec("gpu", "h100", 8),)
    assert node3.gres_count("gpu") == 8
    assert config.default_partition is not None and config.default_partition.name == "batch"
    debug = config.partition("debug")
    assert debug is not None
    assert debug.nodes == ("node1", "node2")
    assert (debug.default_time, debug.max_time, debug.priority_job_factor) == (30, 60, 2)
    batch = config.partition("batch")
    assert batch is not None and batch.max_time == UNLIMITED
    lines = config.gres_conf.for_node("node2")
    assert len(lines) == 1 and lines[0].count == 8 and lines[0].files[7] == "/dev/nvidia7"


def test_example_configs_load() -> None:
    config = load_slurm_conf(EXAMPLES / "slurm.conf")
    assert config.warnings == ()
    assert len(config.nodes) == 4
    assert all(node.gres_count("gpu", "h100") == 8 for node in config.nodes)
    assert [p.name for p in config.partitions] == ["gpu", "debug"]
    assert sum(line.count for line in config.gres_conf.for_node("node4")) == 8


# --- defaults and top-level keys --------------------------------------------------------------


def test_defaults_follow_slurm(tmp_path: Path) -> None:
    config = load(tmp_path, HEAD)
    assert (config.slurmctld_port, config.slurmd_port, config.slurm_user) == (6817, 6818, "root")
    assert (config.kill_wait, config.min_job_age, config.slurmd_timeout, config.slurmctld_timeout) == (
        30, 300, 300, 120,
    )  # fmt: skip
    assert (config.max_job_count, config.max_array_size, config.first_job_id) == (10000, 1001, 1)
    assert (config.msg_timeout, config.tcp_timeout) == (10, 2)
    assert config.scheduler_type == "sched/backfill"
    assert config.priority_calc_period == 5
    assert load(tmp_path, HEAD + "PriorityCalcPeriod=1:00:00\n").priority_calc_period == 60
    assert config.def_mem_per_cpu == 0
    assert config.auth_key_file == str(tmp_path / "shoal.key")
    assert config.agent_socket == "/run/shoal/agent.sock"
    assert config.nodes == () and config.partitions == () and config.default_partition is None


def test_keys_are_case_insensitive_and_entries_keep_slurm_spelling(tmp_path: Path) -> None:
    config = load(tmp_path, "clustername=c1\nSLURMCTLDPORT=7000\nslurmctldhost=h1\nKillWait=5 MinJobAge=10\n")
    assert config.cluster_name == "c1"
    assert config.slurmctld_port == 7000
    assert (config.kill_wait, config.min_job_age) == (5, 10)
    assert config.entries == (
        ("ClusterName", "c1"),
        ("SlurmctldPort", "7000"),
        ("SlurmctldHost", "h1"),
        ("KillWait", "5"),
        ("MinJobAge", "10"),
    )
    assert config.get("slurmctldport") == "7000"


def test_control_hosts_primary_and_backup(tmp_path: Path) -> None:
    config = load(tmp_path, "SlurmctldHost=head1(10.0.0.1)\nSlurmctldHost=head2\n")
    assert config.control_hosts == (("head1", "10.0.0.1"), ("head2", "head2"))
    assert (config.control_machine, config.control_addr) == ("head1", "10.0.0.1")


def test_old_control_machine_spelling(tmp_path: Path) -> None:
    config = load(tmp_path, "ControlMachine=old\nControlAddr=192.168.1.1\n")
    assert config.control_hosts == (("old", "192.168.1.1"),)


def test_missing_controller_warns_and_uses_localhost(tmp_path: Path) -> None:
    config = load(tmp_path, "ClusterName=x\n")
    assert config.control_addr == "localhost"
    assert any("no SlurmctldHost" in w for w in config.warnings)


def test_comments_quotes_blank_lines_and_continuation(tmp_path: Path) -> None:
    text = (
        HEAD + "\n   \n# a comment line\nKillWait=7   # trailing comment\n"
        'SlurmctldLogFile="/var/log/my logs/ctld#1.log"\n'
        "SchedulerParameters=bf_interval=30,\\\n  bf_window=60\n"
        "MinJobAge=\\#5\n"
    )
    with pytest.raises(ConfigError, match=r"slurm.conf:10: invalid value for MinJobAge: '#5'"):
        load(tmp_path, text)
    config = load(tmp_path, text.replace("MinJobAge=\\#5\n", "SlurmdLogFile=a\\#b\n"))
    assert config.kill_wait == 7
    assert config.slurmctld_log_file == "/var/log/my logs/ctld#1.log"
    assert config.scheduler_parameters == ("bf_interval=30", "bf_window=60")
    assert config.slurmd_log_file == "a#b"


def test_continued_node_line_keeps_its_first_line_number(tmp_path: Path) -> None:
    config = load(tmp_path, HEAD + "NodeName=n1 \\\n    CPUs=4 \\\n    RealMemory=100\nKillWait=3 \\\n")
    node = config.nodes[0]
    assert (node.cpus, node.real_memory, node.source) == (4, 100, f"{tmp_path / 'slurm.conf'}:3")
    assert config.kill_wait == 3


def test_unknown_keys_warn_with_file_and_line(tmp_path: Path) -> None:
    config = load(tmp_path, HEAD + "Foo=bar\nNodeName=n1 Colour=blue\nPartitionName=p Nodes=n1 Bar=1\n")
    path = tmp_path / "slurm.conf"
    assert config.warnings == (
        f"{path}:3: unknown key 'Foo' ignored",
        f"{path}:4: unknown key 'Colour' ignored",
        f"{path}:5: unknown key 'Bar' ignored",
    )
    assert config.node("n1") is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("KillWait=soon\n", "slurm.conf:3: invalid value for KillWait: 'soon' (expected an integer)"),
        (
            "NodeName=n1 RealMemory=lots\n",
            "slurm.conf:3: invalid value for RealMemory: 'lots' (expected an integer)",
        ),
        ("NodeName=n1 Port=99999\n", "slurm.conf:3: invalid value for Port: '99999'"),
        ("NodeName=n[1-2 CPUs=4\n", "slurm.conf:3: invalid value for NodeName: 'n[1-2'"),
        ("NodeName=n1 Gres=gpu:a:b:c\n", "slurm.conf:3: invalid value for Gres: 'gpu:a:b:c'"),
        ("NodeName=n1 State=SLEEPY\n", "slurm.conf:3: invalid value for State: 'SLEEPY'"),
        ("NodeName=n1\nNodeName=n1\n", "slurm.conf:4: node n1 is already defined at"),
        ("NodeName=n[1-3] NodeAddr=a[1-2]\n", "slurm.conf:3: NodeAddr lists 2 values for 3 nodes"),
        ("NodeName=n1 Sockets=2 SocketsPerBoard=2\n", "slurm.conf:3: give Sockets or SocketsPerBoard"),
        (
            "NodeName=n1\nPartitionName=p Nodes=n1,n9\n",
            "slurm.conf:4: partition p: Nodes names undefined node 'n9'",
        ),
        ("PartitionName=p Nodes=x[1-\n", "slurm.conf:3: invalid value for Nodes: 'x[1-'"),
        ("PartitionName=p MaxTime=forever\n", "slurm.conf:3: invalid value for MaxTime: 'forever'"),
        (
            "PartitionName=p Default=maybe\n",
            "slurm.conf:3: invalid value for Default: 'maybe' (expected YES or NO)",
        ),
        ("PartitionName=p OverSubscribe=SOMETIMES\n", "slurm.conf:3: invalid value for OverSubscribe"),
        ("PartitionName=p\nPartitionName=p\n", "slurm.conf:4: partition p is already defined"),
        ("DefMemPerCPU=lots\n", "slurm.conf:3: invalid value for DefMemPerCPU: 'lots'"),
        ("SlurmctldHost=a(b\n", "slurm.conf:3: invalid value for SlurmctldHost"),
        ('ClusterName="open\n', "slurm.conf:3: unterminated quote"),
        ("just words\n", "slurm.conf:3: cannot parse 'just'"),
        ("NodeName=\n", "slurm.conf:3: NodeName needs a name"),
        ("DownNodes=n7\n", "slurm.conf:3: DownNodes names unknown node n7"),
        ("PreemptType=preempt/job\n", "slurm.conf:3: invalid value for PreemptType: 'preempt/job'"),
        # 22.05's own words for the combinations it refuses (scontrol on the real one)
        (
            "PreemptType=preempt/qos\nPreemptMode=SUSPEND\n",
            "slurm.conf:4: PreemptMode=SUSPEND requires GANG too",
        ),
        ("PreemptMode=SUSPEND,GANG\n", "slurm.conf:3: PreemptType and PreemptMode values incompatible"),
        ("PreemptType=preempt/partition_prio\n", "PreemptType and PreemptMode values incompatible"),
        ("PreemptType=preempt/qos\nPreemptMode=GANG\n", "PreemptType and PreemptMode values incompatible"),
        ("PreemptMode=WITHIN\n", "slurm.conf:3: PreemptMode=WITHIN is not supported by shoal"),
        (
            "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\nPartitionName=p PreemptMode=SUSPEND\n",
            "slurm.conf:5: PreemptMode=SUSPEND requires GANG in the cluster's PreemptMode",
        ),
        ("PreemptMode=sometimes\n", "slurm.conf:3: invalid value for PreemptMode: 'sometimes'"),
        ("PreemptExemptTime=soon\n", "slurm.conf:3: invalid value for PreemptExemptTime: 'soon'"),
        ("PriorityCalcPeriod=often\n", "slurm.conf:3: invalid value for PriorityCalcPeriod: 'often'"),
        (
            "PriorityCalcPeriod=0\n",
            "slurm.conf:3: invalid value for PriorityCalcPeriod: '0' (expected a time",
        ),
        ("PriorityCalcPeriod=-5\n", "slurm.conf:3: invalid value for PriorityCalcPeriod: '-5'"),
        ("PartitionName=p PreemptMode=CANCEL,REQUEUE\n", "slurm.conf:3: invalid value for PreemptMode"),
        ("AuthInfo=cred_expire=soon\n", "slurm.conf:3: invalid value for AuthInfo: 'cred_expire=soon'"),
    ],
    ids=lambda v: v.split("\n")[0][:40],
)
def test_bad_values_fail_with_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    assert message in error(tmp_path, HEAD + text)


def test_auth_info_cred_expire_sets_a_requeued_jobs_wait(tmp_path: Path) -> None:
    assert load(tmp_path, HEAD).cred_expire == 120  # 22.05's default
    assert (
        load(tmp_path, HEAD + "AuthInfo=socket=/run/munge/munge.socket.2,cred_expire=30\n").cred_expire == 30
    )


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.conf"
    with pytest.raises(ConfigError, match=f"^{missing}: cannot read configuration file: No such file"):
        load_slurm_conf(missing)


def test_path_from_slurm_conf_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "ClusterName=fromenv\n")
    monkeypatch.setenv("SLURM_CONF", str(path))
    assert load_slurm_conf().cluster_name == "fromenv"
    assert load_slurm_conf(os.fspath(path)).path == str(path)


# --- includes ----------------------------------------------------------------------------------


def test_include_relative_glob_and_nested(tmp_path: Path) -> None:
    write(tmp_path, "NodeName=n[1-2] CPUs=4\n", "nodes.d/a.conf")
    write(tmp_path, "NodeName=n3 CPUs=8\nInclude ../more/parts.conf\n", "nodes.d/b.conf")
    write(tmp_path, "PartitionName=p Nodes=ALL Default=YES\n", "more/parts.conf")
    config = load(tmp_path, HEAD + "Include nodes.d/*.conf\nKillWait=1\n")
    assert [n.name for n in config.nodes] == ["n1", "n2", "n3"]
    assert config.partitions[0].nodes == ("n1", "n2", "n3")
    assert config.nodes[2].source == f"{tmp_path / 'nodes.d' / 'b.conf'}:1"
    assert config.kill_wait == 1


def test_include_errors_cite_the_including_line(tmp_path: Path) -> None:
    assert "slurm.conf:3: cannot read included file" in error(tmp_path, HEAD + "Include missing.conf\n")
    assert "slurm.conf:3: Include" in error(tmp_path, HEAD + "include none-*.conf\n")
    write(tmp_path, "Include loop.conf\n", "loop.conf")
    assert "nested too deeply" in error(tmp_path, HEAD + "Include loop.conf\n")
    write(tmp_path, "KillWait=x\n", "bad.conf")
    assert f"{tmp_path / 'bad.conf'}:1: invalid value for KillWait" in error(
        tmp_path, HEAD + "Include bad.conf\n"
    )


# --- nodes -------------------------------------------------------------------------------------


def test_default_lines_apply_to_later_lines_only(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        HEAD
        + "NodeName=early\n"
        + "NodeName=DEFAULT CPUs=8 RealMemory=1000 Gres=gpu:2\n"
        + "NodeName=a[1-2]\n"
        + "NodeName=b1 RealMemory=2000\n"
        + "NodeName=DEFAULT RealMemory=500\n"
        + "NodeName=c1\n"
        + "GresTypes=gpu\n",
    )
    shapes = {n.name: (n.cpus, n.real_memory, n.gres_count("gpu")) for n in config.nodes}
    assert shapes == {
        "early": (1, 1, 0),
        "a1": (8, 1000, 2),
        "a2": (8, 1000, 2),
        "b1": (8, 2000, 2),
        "c1": (8, 500, 2),
    }
    assert config.warnings == ()


def test_hostlists_map_element_wise_to_nodes(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        HEAD + "NodeName=node[1-4] NodeHostname=host[1-4] NodeAddr=10.0.0.[1-4] Port=[17001-17004]\n"
        "NodeName=solo NodeHostname=sh Port=17100\nNodeName=plain\n",
    )
    node2 = config.node("node2")
    assert node2 is not None
    assert (node2.hostname, node2.addr, node2.port) == ("host2", "10.0.0.2", 17002)
    solo, plain = config.node("solo"), config.node("plain")
    assert solo is not None and plain is not None
    assert (solo.hostname, solo.addr, solo.port) == ("sh", "sh", 17100)
    assert (plain.hostname, plain.addr, plain.port) == ("plain", "plain", 0)
    assert config.slurmd_port_of(plain) == 6818 and config.slurmd_port_of(solo) == 17100


def test_one_value_serves_every_node(tmp_path: Path) -> None:
    config = load(tmp_path, HEAD + "NodeName=n[1-3] NodeAddr=127.0.0.1 Port=[7001-7003]\n")
    assert [(n.addr, n.port) for n in config.nodes] == [
        ("127.0.0.1", 7001),
        ("127.0.0.1", 7002),
        ("127.0.0.1", 7003),
    ]


@pytest.mark.parametrize(
    ("line", "shape", "warns"),
    [
        ("", (1, 1, 1, 1, 1), False),
        ("CPUs=16", (16, 1, 16, 1, 1), False),
        ("Sockets=2 CoresPerSocket=8 ThreadsPerCore=2", (32, 1, 2, 8, 2), False),
        ("Boards=2 SocketsPerBoard=2 CoresPerSocket=4", (16, 2, 4, 4, 1), False),
        ("CPUs=16 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2", (16, 1, 2, 8, 2), False),
        ("CPUs=32 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2", (32, 1, 2, 8, 2), False),
        ("CPUs=12 Sockets=2 CoresPerSocket=8", (16, 1, 2, 8, 1), True),
        ("Procs=4", (4, 1, 4, 1, 1), False),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_cpu_topology(tmp_path: Path, line: str, shape: tuple[int, ...], warns: bool) -> None:
    config = load(tmp_path, HEAD + f"NodeName=n1 {line}\n")
    node = config.nodes[0]
    assert (node.cpus, node.boards, node.sockets, node.cores_per_socket, node.threads_per_core) == shape
    assert any("does not match" in w for w in config.warnings) is warns


def test_node_fields(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        HEAD + "GresTypes=gpu,nic\n"
        'NodeName=n1 Features=a100,ib Weight=10 TmpDisk=500 State=future Reason="not yet" '
        "Gres=gpu:a100:4,nic:1 RealMemory=4000\nDownNodes=n1 Reason=broken\n",
    )
    node = config.nodes[0]
    assert node.features == ("a100", "ib")
    assert (node.weight, node.tmp_disk, node.real_memory) == (10, 500, 4000)
    assert (node.state, node.reason) == ("DOWN", "broken")
    assert node.gres == (GresSpec("gpu", "a100", 4), GresSpec("nic", None, 1))
    assert node.source == f"{tmp_path / 'slurm.conf'}:4"


def test_gres_not_in_gres_types_warns(tmp_path: Path) -> None:
    config = load(tmp_path, HEAD + "NodeName=n[1-2] Gres=gpu:2\n")
    assert config.warnings == (f"{tmp_path / 'slurm.conf'}:3: Gres 'gpu' is not listed in GresTypes",)


# --- partitions --------------------------------------------------------------------------------


def test_partition_fields_and_defaults(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        HEAD + "NodeName=n[1-4]\n"
        "PartitionName=DEFAULT MaxTime=1:00:00 State=UP\n"
        "PartitionName=a Nodes=n[1-2] MaxNodes=2 MinNodes=1 DefaultTime=10 AllowAccounts=x,y "
        "OverSubscribe=force:4 Hidden=YES ExclusiveUser=yes PriorityTier=5 DefMemPerCPU=2G MaxMemPerCPU=4000\n"
        "PartitionName=b Nodes=n[3-4],n1 MaxTime=INFINITE State=DOWN MaxNodes=UNLIMITED Shared=EXCLUSIVE\n"
        "PartitionName=c Nodes=ALL Priority=3\n",
    )
    a, b, c = config.partitions
    assert a.nodes == ("n1", "n2")
    assert (a.max_time, a.default_time, a.max_nodes, a.min_nodes) == (60, 10, 2, 1)
    assert (a.allow_accounts, a.oversubscribe, a.hidden, a.exclusive_user) == ("x,y", "FORCE:4", True, True)
    assert (a.priority_tier, a.priority_job_factor, a.def_mem_per_cpu, a.max_mem_per_cpu) == (
        5,
        1,
        2048,
        4000,
    )
    assert (a.state, a.allow_groups, a.allow_qos) == ("UP", "ALL", "ALL")
    assert b.nodes == ("n1", "n3", "n4")  # config order, as Slurm lists them
    assert (b.max_time, b.state, b.max_nodes, b.oversubscribe) == (UNLIMITED, "DOWN", 0, "EXCLUSIVE")
    assert b.default_time == NOT_SET
    assert c.nodes == ("n1", "n2", "n3", "n4")
    assert (c.priority_tier, c.priority_job_factor, c.max_time) == (3, 3, 60)


def test_last_default_partition_wins(tmp_path: Path) -> None:
    config = load(
        tmp_path, HEAD + "PartitionName=a Default=YES\nPartitionName=b Default=YES\nPartitionName=c\n"
    )
    assert config.default_partition is not None and config.default_partition.name == "b"
    assert [p.is_default for p in config.partitions] == [False, True, False]
    assert config.partition("zzz") is None


def test_partitions_may_name_nodes_defined_later_and_nodesets(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        HEAD + "PartitionName=p Nodes=gpus,cpu1\n"
        "NodeSet=gpus Feature=gpu\n"
        "NodeName=g[1-2] Features=gpu\nNodeName=cpu[1-2]\n",
    )
    assert config.partitions[0].nodes == ("g1", "g2", "cpu1")


def test_parsing_many_nodes_is_fast(tmp_path: Path) -> None:
    import time

    lines = [HEAD] + [f"NodeName=r{r}n[1-100] CPUs=64 RealMemory=512000 Gres=gpu:h100:8\n" for r in range(20)]
    lines.append("GresTypes=gpu\nPartitionName=all Nodes=ALL Default=YES\n")
    start = time.perf_counter()
    config = load(tmp_path, "".join(lines))
    assert len(config.nodes) == 2000
    assert time.perf_counter() - start < 1.0


def test_preemption_settings(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        HEAD + "PreemptType=preempt/QOS\nPreemptMode=requeue\nPreemptExemptTime=00:10:30\n"
        "NodeName=n1\nPartitionName=low Nodes=n1 PreemptMode=cancel GraceTime=20\n"
        "PartitionName=high Nodes=n1\n",
    )
    assert (config.preempt_type, config.preempt_mode, config.preempt_exempt_time) == (
        "preempt/qos",
        "REQUEUE",
        630,
    )
    low, high = config.partitions
    assert (low.preempt_mode, low.grace_time) == ("CANCEL", 20)
    assert high.preempt_mode == ""
    plain = load(tmp_path, HEAD)
    assert (plain.preempt_type, plain.preempt_mode, plain.preempt_exempt_time) == ("preempt/none", "OFF", 0)


# --- Prolog/Epilog and health checks ------------------------------------------------------------


def test_prolog_epilog_and_health_check_keys(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        HEAD + "Prolog=/etc/slurm/prolog.d/*,/etc/slurm/last.sh\nEpilog=/etc/slurm/epilog\n"
        "TaskProlog=/etc/slurm/tp\nPrologFlags=contain\nPrologEpilogTimeout=30\n"
        "HealthCheckProgram=/usr/sbin/nhc\nHealthCheckInterval=300\nHealthCheckNodeState=IDLE,CYCLE\n",
    )
    assert cfg.prolog == ("/etc/slurm/prolog.d/*", "/etc/slurm/last.sh")
    assert (cfg.epilog, cfg.task_prolog, cfg.task_epilog) == (("/etc/slurm/epilog",), "/etc/slurm/tp", "")
    assert cfg.prolog_flags == ("ALLOC", "CONTAIN")  # Contain implies Alloc
    assert cfg.prolog_epilog_timeout == 30
    assert (cfg.health_check_program, cfg.health_check_interval) == ("/usr/sbin/nhc", 300)
    assert cfg.health_check_node_state == ("IDLE", "CYCLE")
    plain = load(tmp_path, HEAD + "HealthCheckNodeState=CYCLE\n")
    assert (plain.prolog, plain.prolog_epilog_timeout, plain.health_check_node_state) == (
        (),
        65534,
        ("ANY", "CYCLE"),
    )


@pytest.mark.parametrize(
    ("value", "flags"),
    [
        ("alloc", ("ALLOC",)),
        ("Contain", ("ALLOC", "CONTAIN")),
        ("Serial,NoHold", ("ALLOC", "NOHOLD", "SERIAL")),  # NoHold implies Alloc, as 22.05 shows it
        ("DeferBatch,Alloc,ForceRequeueOnFail", ("ALLOC", "DEFERBATCH", "FORCEREQUEUEONFAIL")),
    ],
    ids=["alloc", "contain", "nohold", "others"],
)
def test_prolog_flags_are_kept_in_slurms_order_with_the_flags_they_imply(
    tmp_path: Path, value: str, flags: tuple[str, ...]
) -> None:
    assert load(tmp_path, HEAD + f"PrologFlags={value}\n").prolog_flags == flags


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("PrologFlags=Alloc,Sometimes", "slurm.conf:3: invalid value for PrologFlags: 'Alloc,Sometimes'"),
        (
            "PrologFlags=NoHold,Contain",
            "slurm.conf:3: PrologFlags invalid combination: NoHold cannot be combined with Contain and/or X11",
        ),
        ("PrologFlags=x11", "slurm.conf:3: PrologFlags=X11 is not supported: shoal has no X11 forwarding"),
        ("PrologFlags=RunInJob", "slurm.conf:3: PrologFlags=RunInJob is not supported"),
        ("HealthCheckNodeState=BUSY", "slurm.conf:3: invalid value for HealthCheckNodeState: 'BUSY'"),
        ("HealthCheckInterval=often", "slurm.conf:3: invalid value for HealthCheckInterval: 'often'"),
    ],
    ids=["prolog-flags", "nohold-contain", "x11", "runinjob", "node-state", "interval"],
)
def test_bad_prolog_and_health_check_values_are_refused_at_file_line(
    tmp_path: Path, line: str, message: str
) -> None:
    assert message in error(tmp_path, HEAD + line + "\n")


def test_suspend_gang_preemption_settings(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        HEAD + "PreemptType=preempt/partition_prio\nPreemptMode=suspend,gang\n"
        "NodeName=n1\nPartitionName=low Nodes=n1 OverSubscribe=FORCE:2\n"
        "PartitionName=high Nodes=n1 PriorityTier=10 PreemptMode=OFF\n",
    )
    assert (config.preempt_mode, config.preempt_gang) == ("SUSPEND", True)
    assert [p.preempt_mode for p in config.partitions] == ["", "OFF"]
    # no gang time-slicing: said once, naming the partitions whose OverSubscribe would have used it
    assert [w for w in config.warnings if "time-slicing" in w] == [
        f"{tmp_path}/slurm.conf:4: PreemptMode=GANG: shoal does no gang time-slicing (SchedulerTimeSlice);"
        " jobs never share CPUs, so OverSubscribe on low runs no two jobs on the same CPUs"
    ]
    gang_only = load(tmp_path, HEAD + "PreemptMode=GANG\n")
    assert (gang_only.preempt_type, gang_only.preempt_mode, gang_only.preempt_gang) == (
        "preempt/none",
        "OFF",
        True,
    )
