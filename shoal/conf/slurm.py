"""slurm.conf -> a typed, frozen SlurmConfig (cluster settings, nodes, partitions, gres.conf).

Every daemon loads this at start and some commands do too, so it reads the file once, line by
line, and does the per-line work with plain string methods. Errors cite "file:line".
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from shoal import rlimits, timefmt
from shoal.conf.errors import ConfigError
from shoal.conf.gres import MAX_GPUS_PER_NODE, GresConf, GresSpec, load_gres_conf, parse_gres
from shoal.conf.keys import (
    DOWNNODES_KEYS,
    FRONTEND_KEYS,
    NODE_KEYS,
    NODESET_KEYS,
    PARTITION_KEYS,
    SLURM_KEYS,
    canonical,
)
from shoal.conf.reader import ConfLine, parse_config_text, read_config_file
from shoal.conf.statestore import StateStoreConf, parse_state_store
from shoal.conf.topology import TopologyConf, load_topology_conf
from shoal.conf.values import Values

DEFAULT_PATH = "/etc/slurm/slurm.conf"
DEFAULT_AGENT_SOCKET = "/run/shoal/agent.sock"

_TOP_KEYS = canonical(SLURM_KEYS)
_NODE_KEYS = canonical(NODE_KEYS)
_PARTITION_KEYS = canonical(PARTITION_KEYS)
_NODESET_KEYS = canonical(NODESET_KEYS)
_DOWNNODES_KEYS = canonical(DOWNNODES_KEYS)
_FRONTEND_KEYS = canonical(FRONTEND_KEYS)
_NODE_STATES = ("UNKNOWN", "FUTURE", "CLOUD", "DOWN", "DRAIN", "FAIL", "FAILING", "IDLE")
_PARTITION_STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")
_OVERSUBSCRIBE = re.compile(r"NO|EXCLUSIVE|(?:YES|FORCE)(?::\d+)?")
_CONTROL_HOST = re.compile(r"([^()\s]+)(?:\(([^()\s]+)\))?")
_PREEMPT_TYPES = ("preempt/none", "preempt/qos", "preempt/partition_prio")
_PREEMPT_MODES = ("OFF", "CANCEL", "REQUEUE", "SUSPEND")
_PREEMPT_UNSUPPORTED = ("WITHIN", "CHECKPOINT")
GANG = "GANG"


@dataclass(frozen=True)
class NodeConf:
    """One compute node as configured (NodeName lines are expanded one per node)."""

    name: str
    addr: str
    hostname: str
    port: int = 0
    """0 = the cluster's SlurmdPort (see SlurmConfig.slurmd_port_of)."""
    cpus: int = 1
    boards: int = 1
    sockets: int = 1
    cores_per_socket: int = 1
    threads_per_core: int = 1
    real_memory: int = 1
    tmp_disk: int = 0
    gres: tuple[GresSpec, ...] = ()
    features: tuple[str, ...] = ()
    weight: int = 1
    state: str = "UNKNOWN"
    reason: str = ""
    cpu_spec_list: str = ""
    core_spec_count: int = 0
    mem_spec_limit: int = 0
    source: str = ""

    def gres_count(self, name: str, gres_type: str | None = None) -> int:
        """How many of a generic resource the node has ("gpu"; optionally of one type)."""
        return sum(
            spec.count
            for spec in self.gres
            if spec.name == name and (gres_type is None or spec.type == gres_type)
        )


@dataclass(frozen=True)
class PartitionConf:
    """One partition as configured; limits in minutes/MB, 0 meaning unlimited where noted."""

    name: str
    nodes: tuple[str, ...] = ()
    is_default: bool = False
    max_time: int = timefmt.UNLIMITED
    default_time: int = timefmt.NOT_SET
    max_nodes: int = 0
    """0 = unlimited."""
    min_nodes: int = 0
    max_cpus_per_node: int = 0
    """0 = unlimited."""
    state: str = "UP"
    priority_tier: int = 1
    priority_job_factor: int = 1
    allow_accounts: str = "ALL"
    deny_accounts: str = ""
    allow_groups: str = "ALL"
    allow_qos: str = "ALL"
    deny_qos: str = ""
    qos: str = ""
    oversubscribe: str = "NO"
    hidden: bool = False
    exclusive_user: bool = False
    root_only: bool = False
    def_mem_per_cpu: int = 0
    def_mem_per_node: int = 0
    def_mem_per_gpu: int = 0  # DefMemPerGPU (MB)
    def_cpu_per_gpu: int = 0  # DefCpuPerGPU
    max_mem_per_cpu: int = 0
    max_mem_per_node: int = 0
    grace_time: int = 0
    preempt_mode: str = ""
    """OFF, CANCEL, REQUEUE or SUSPEND; "" = the cluster's PreemptMode (a GANG beside it is the cluster's
    business: see SlurmConfig.preempt_gang)."""
    tres_billing_weights: str = ""
    source: str = ""


@dataclass(frozen=True)
class SlurmConfig:
    """The whole of slurm.conf (and gres.conf beside it), with Slurm's defaults filled in."""

    path: str
    cluster_name: str = ""
    control_machine: str = "localhost"
    control_addr: str = "localhost"
    control_hosts: tuple[tuple[str, str], ...] = ()
    slurmctld_port: int = 6817
    slurmd_port: int = 6818
    slurm_user: str = "root"
    slurmd_user: str = "root"
    state_save_location: str = "/var/spool/slurmctld"
    state_store: StateStoreConf = field(default_factory=StateStoreConf)
    """ShoalStateStore (SQLite under StateSaveLocation, or MariaDB) and its lease (docs/ha.md)."""
    slurmd_spool_dir: str = "/var/spool/slurmd"
    slurmctld_pid_file: str = "/var/run/slurmctld.pid"
    slurmd_pid_file: str = "/var/run/slurmd.pid"
    slurmctld_log_file: str = ""
    slurmd_log_file: str = ""
    gres_types: tuple[str, ...] = ()
    select_type: str = "select/cons_tres"
    select_type_parameters: tuple[str, ...] = ()
    scheduler_type: str = "sched/backfill"
    scheduler_parameters: tuple[str, ...] = ()
    priority_type: str = "priority/basic"
    priority_calc_period: int = 5
    """PriorityCalcPeriod in minutes (at least 1; timefmt.UNLIMITED for INFINITE). Validated only: ctld
    recomputes priorities every cycle (README, "Job priority")."""
    preempt_type: str = "preempt/none"
    preempt_mode: str = "OFF"
    """OFF, CANCEL, REQUEUE or SUSPEND (which needs GANG too, as in 22.05)."""
    preempt_gang: bool = False
    """GANG in the cluster's PreemptMode: jobs suspended by preemption are resumed when their
    preemptor ends (shoal does no gang time-slicing: its jobs never share CPUs)."""
    preempt_exempt_time: int = 0
    """Seconds a job runs before it may be preempted."""
    kill_wait: int = 30
    min_job_age: int = 300
    slurmd_timeout: int = 300
    slurmctld_timeout: int = 120
    inactive_limit: int = 0
    return_to_service: int = 1
    job_requeue: int = 1  # JobRequeue: batch jobs may be requeued unless --no-requeue
    max_job_count: int = 10000
    max_array_size: int = 1001
    first_job_id: int = 1
    def_mem_per_cpu: int = 0
    def_mem_per_node: int = 0
    def_mem_per_gpu: int = 0  # DefMemPerGPU (MB)
    def_cpu_per_gpu: int = 0  # DefCpuPerGPU
    max_mem_per_cpu: int = 0
    max_mem_per_node: int = 0
    task_plugin: str = "task/none"
    proctrack_type: str = "proctrack/cgroup"
    auth_type: str = "auth/munge"
    cred_expire: int = 120
    """AuthInfo's cred_expire (seconds): a requeued job becomes eligible cred_expire + 1 s later."""
    accounting_storage_type: str = "accounting_storage/none"
    accounting_storage_host: str = ""
    accounting_storage_port: int = 6819
    accounting_storage_enforce: tuple[str, ...] = ()
    job_acct_gather_type: str = "jobacct_gather/none"
    msg_timeout: int = 10
    tcp_timeout: int = 2
    enforce_part_limits: str = "NO"
    topology_plugin: str = "topology/none"
    auth_key_file: str = ""
    auth_alt_types: tuple[str, ...] = ()
    """AuthAltTypes: auth/jwt lets ctld mint tokens (`scontrol token`) that shoal-restd accepts."""
    auth_alt_parameters: tuple[str, ...] = ()
    """AuthAltParameters as written: jwt_key=PATH, disable_token_creation."""
    metrics_type: str = ""
    """MetricsType=metrics/openmetrics: shoal-restd serves /metrics/* (Slurm 25.11's OpenMetrics)."""
    metrics_auth_users: tuple[str, ...] = ()
    metrics_parameters: tuple[str, ...] = ()
    private_data: tuple[str, ...] = ()
    agent_socket: str = DEFAULT_AGENT_SOCKET
    slurmd_parameters: tuple[str, ...] = ()
    prolog: tuple[str, ...] = ()
    """Prolog scripts (paths or globs, run by noded as root); Epilog likewise."""
    epilog: tuple[str, ...] = ()
    prolog_slurmctld: tuple[str, ...] = ()
    """Run by ctld as SlurmUser before a batch job's launch; EpilogSlurmctld when a job ends."""
    epilog_slurmctld: tuple[str, ...] = ()
    task_prolog: str = ""
    task_epilog: str = ""
    propagate_rlimits: frozenset[str] = frozenset(rlimits.LIMITS)
    """The limits of the submitting process a job gets: PropagateResourceLimits less
    PropagateResourceLimitsExcept (shoal.rlimits)."""
    prolog_flags: tuple[str, ...] = ()
    prolog_epilog_timeout: int = 65534
    """Seconds a Prolog or Epilog may run before it is killed (65534 and 0: no limit, as Slurm)."""
    health_check_program: str = ""
    health_check_interval: int = 0
    health_check_node_state: tuple[str, ...] = ("ANY",)
    reboot_program: str = ""
    """Run by noded as root on `scontrol reboot` (etc/reboot/restart_noded.py for emulated nodes)."""
    resume_timeout: int = 60
    """Seconds a rebooted node has to register again before it goes DOWN ("reboot timed out")."""
    nodes: tuple[NodeConf, ...] = ()
    partitions: tuple[PartitionConf, ...] = ()
    gres_conf: GresConf = field(default_factory=lambda: GresConf(""))
    topology: TopologyConf | None = None
    """topology.conf, read when TopologyPlugin=topology/tree."""
    entries: tuple[tuple[str, str], ...] = ()
    """Every known top-level key as written (Slurm's spelling), for `scontrol show config`."""
    warnings: tuple[str, ...] = ()
    _node_index: dict[str, NodeConf] = field(init=False, repr=False, compare=False, default_factory=dict)
    _partition_index: dict[str, PartitionConf] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        self._node_index.update((node.name, node) for node in self.nodes)
        self._partition_index.update((part.name, part) for part in self.partitions)

    def node(self, name: str) -> NodeConf | None:
        return self._node_index.get(name)

    def partition(self, name: str) -> PartitionConf | None:
        return self._partition_index.get(name)

    @property
    def default_partition(self) -> PartitionConf | None:
        return next((part for part in self.partitions if part.is_default), None)

    def slurmd_port_of(self, node: NodeConf) -> int:
        """The port node's noded listens on: its own Port=, else the cluster's SlurmdPort."""
        return node.port or self.slurmd_port

    def get(self, key: str, default: str | None = None) -> str | None:
        """The last value written for a top-level key (any spelling), for keys without a field."""
        wanted = key.lower()
        for name, value in reversed(self.entries):
            if name.lower() == wanted:
                return value
        return default


def _propagate_rlimits(top: Values) -> frozenset[str]:
    """PropagateResourceLimits (default ALL) less PropagateResourceLimitsExcept."""
    try:
        return rlimits.propagated(
            top.text("PropagateResourceLimits", "ALL"), top.text("PropagateResourceLimitsExcept", "")
        )
    except rlimits.PropagateError as exc:
        raise ConfigError(f"PropagateResourceLimits: {exc}") from None


def load_slurm_conf(path: str | os.PathLike[str] | None = None) -> SlurmConfig:
    """Load slurm.conf (path, else $SLURM_CONF, else /etc/slurm/slurm.conf) and gres.conf beside it."""
    if path is None:
        path = os.environ.get("SLURM_CONF") or DEFAULT_PATH
    name = os.fspath(path)
    gres_path = os.path.join(os.path.dirname(name), "gres.conf")
    gres_conf = load_gres_conf(gres_path) if os.path.exists(gres_path) else GresConf(gres_path)
    cfg = _Builder(name).build(read_config_file(name), gres_conf)
    if cfg.topology_plugin != "topology/tree":
        return cfg
    topology = load_topology_conf(
        os.path.join(os.path.dirname(name), "topology.conf"), (n.name for n in cfg.nodes)
    )
    return replace(cfg, topology=topology, warnings=cfg.warnings + topology.warnings)


def parse_slurm_conf(text: str, path: str = "slurm.conf", gres_conf: GresConf | None = None) -> SlurmConfig:
    """SlurmConfig from text, as if read from `path` (tests; includes resolve beside `path`)."""
    return _Builder(path).build(parse_config_text(path, text), gres_conf or GresConf(""))


@dataclass
class _PendingPartition:
    values: Values
    source: str


class _Builder:
    """Walks the logical lines once, in order (DEFAULT lines apply to the lines after them)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.top: dict[str, tuple[str, str]] = {}
        self.entries: list[tuple[str, str]] = []
        self.control_hosts: list[tuple[str, str]] = []
        self.warnings: list[str] = []
        self.nodes: dict[str, NodeConf] = {}
        self.node_defaults: dict[str, tuple[str, str]] = {}
        self.partition_defaults: dict[str, tuple[str, str]] = {}
        self.partitions: list[_PendingPartition] = []
        self.nodesets: dict[str, tuple[Values, str]] = {}
        self.down_nodes: list[Values] = []

    def build(self, lines: Iterable[ConfLine], gres_conf: GresConf) -> SlurmConfig:
        for line in lines:
            self._line(line)
        for values in self.down_nodes:
            self._apply_down_nodes(values)
        partitions = self._partitions()
        return self._config(partitions, gres_conf)

    # --- reading ---------------------------------------------------------------------------

    def _line(self, line: ConfLine) -> None:
        first = line.pairs[0][0].lower()
        if first == "nodename":
            self._node_line(line)
        elif first == "partitionname":
            values = self._record(line, _PARTITION_KEYS, self.partition_defaults)
            if values is not None:
                self.partitions.append(_PendingPartition(values, line.source))
        elif first == "nodeset":
            values = self._record(line, _NODESET_KEYS, {})
            if values is not None:
                self.nodesets[values.text("NodeSet", "")] = (values, line.source)
        elif first == "downnodes":
            values = self._record(line, _DOWNNODES_KEYS, {})
            if values is not None:
                self.down_nodes.append(values)
        elif first == "frontendname":
            self._record(line, _FRONTEND_KEYS, {})
            self.warnings.append(f"{line.source}: FrontendName lines are not supported; ignored")
        else:
            for key, value in line.pairs:
                self._top_pair(key, value, line.source)

    def _top_pair(self, key: str, value: str, source: str) -> None:
        name = _TOP_KEYS.get(key.lower())
        if name is None:
            self.warnings.append(f"{source}: unknown key '{key}' ignored")
            return
        self.entries.append((name, value))
        self.top[name.lower()] = (value, source)
        if name == "SlurmctldHost":
            match = _CONTROL_HOST.fullmatch(value.strip())
            if match is None:
                raise ConfigError(
                    f"{source}: invalid value for SlurmctldHost: {value!r} (expected name or name(addr))"
                )
            self.control_hosts.append((match[1], match[2] or match[1]))

    def _record(
        self, line: ConfLine, known: dict[str, str], defaults: dict[str, tuple[str, str]]
    ) -> Values | None:
        """A NodeName=/PartitionName=/... line as Values over its DEFAULT line; None for DEFAULT itself."""
        settings = dict(defaults)
        for key, value in line.pairs:
            if key.lower() not in known:
                self.warnings.append(f"{line.source}: unknown key '{key}' ignored")
                continue
            settings[key.lower()] = (value, line.source)
        head_key, head_value = line.pairs[0]
        if not head_value:
            raise ConfigError(f"{line.source}: {known[head_key.lower()]} needs a name")
        if head_value.upper() == "DEFAULT":
            settings.pop(head_key.lower(), None)
            defaults.update(settings)
            return None
        return Values(settings, line.source)

    # --- nodes -----------------------------------------------------------------------------

    def _node_line(self, line: ConfLine) -> None:
        values = self._record(line, _NODE_KEYS, self.node_defaults)
        if values is None:
            return
        names = values.hostnames("NodeName")
        hostnames = self._per_node(values, "NodeHostname", names) or names
        addrs = self._per_node(values, "NodeAddr", names) or hostnames
        port_texts = self._per_node(values, "Port", names)
        ports = [self._port(values, text) for text in port_texts] if port_texts else [0] * len(names)
        shape = self._node_shape(values, line.source)
        try:
            gres = parse_gres(values.text("Gres", ""))
        except ValueError:
            raise values.invalid("Gres", "GRES such as gpu:h100:8") from None
        if sum(g.count for g in gres if g.name == "gpu") > MAX_GPUS_PER_NODE or any(
            g.count >= 2**32 for g in gres
        ):
            raise values.invalid("Gres", f"at most {MAX_GPUS_PER_NODE} GPUs on a node")
        features = values.words("Features") or values.words("Feature")
        for index, name in enumerate(names):
            if name in self.nodes:
                raise ConfigError(
                    f"{line.source}: node {name} is already defined at {self.nodes[name].source}"
                )
            self.nodes[name] = NodeConf(
                name=name,
                addr=addrs[index],
                hostname=hostnames[index],
                port=ports[index],
                cpus=shape[0],
                boards=shape[1],
                sockets=shape[2],
                cores_per_socket=shape[3],
                threads_per_core=shape[4],
                real_memory=values.integer("RealMemory", 1),
                tmp_disk=values.integer("TmpDisk", 0),
                gres=gres,
                features=features,
                weight=values.integer("Weight", 1),
                state=values.choice("State", "UNKNOWN", _NODE_STATES),
                reason=values.text("Reason", ""),
                cpu_spec_list=values.text("CPUSpecList", ""),
                core_spec_count=values.integer("CoreSpecCount", 0),
                mem_spec_limit=values.integer("MemSpecLimit", 0),
                source=line.source,
            )

    def _per_node(self, values: Values, key: str, names: list[str]) -> list[str] | None:
        """A hostlist value mapped element-wise onto the node names (one value serves all)."""
        if not values.text(key, ""):
            return None
        items = values.hostnames(key)
        if len(items) == 1:
            return items * len(names)
        if len(items) != len(names):
            raise ConfigError(
                f"{values.source(key)}: {key} lists {len(items)} values for {len(names)} nodes in NodeName"
            )
        return items

    @staticmethod
    def _port(values: Values, text: str) -> int:
        if not text.isdigit() or not 0 < int(text) < 65536:
            raise values.invalid("Port", "a port number 1-65535")
        return int(text)

    def _node_shape(self, values: Values, source: str) -> tuple[int, int, int, int, int]:
        """(cpus, boards, sockets, cores_per_socket, threads_per_core), as Slurm fills them in."""
        boards = max(values.integer("Boards", 1), 1)
        if values.has("Sockets") and values.has("SocketsPerBoard"):
            raise ConfigError(f"{source}: give Sockets or SocketsPerBoard, not both")
        sockets = 0
        if values.has("SocketsPerBoard"):
            sockets = boards * values.integer("SocketsPerBoard", 1)
        elif values.has("Sockets"):
            sockets = values.integer("Sockets", 1)
        cores = values.integer("CoresPerSocket", 0)
        threads = values.integer("ThreadsPerCore", 0)
        cpus_key = "CPUs" if values.has("CPUs") else "Procs"
        cpus_given = values.integer(cpus_key, 0)
        if cpus_given and not (sockets or cores or threads):
            # Only CPUs= given: one core per socket, like Slurm.
            return cpus_given, boards, cpus_given, 1, 1
        sockets, cores, threads = sockets or boards, cores or 1, threads or 1
        total = sockets * cores * threads
        if not cpus_given or cpus_given in (total, sockets * cores):
            return cpus_given or total, boards, sockets, cores, threads
        self.warnings.append(
            f"{source}: CPUs={cpus_given} does not match Sockets*CoresPerSocket*ThreadsPerCore={total}; "
            f"using {total}"
        )
        return total, boards, sockets, cores, threads

    def _apply_down_nodes(self, values: Values) -> None:
        for name in values.hostnames("DownNodes"):
            node = self.nodes.get(name)
            if node is None:
                raise ConfigError(f"{values.source('DownNodes')}: DownNodes names unknown node {name}")
            state = values.choice("State", "DOWN", _NODE_STATES)
            self.nodes[name] = replace(node, state=state, reason=values.text("Reason", node.reason))

    # --- partitions ------------------------------------------------------------------------

    def _partitions(self) -> list[PartitionConf]:
        built: list[PartitionConf] = []
        seen: dict[str, str] = {}
        for pending in self.partitions:
            part = self._partition(pending.values, pending.source)
            if part.name in seen:
                raise ConfigError(
                    f"{pending.source}: partition {part.name} is already defined at {seen[part.name]}"
                )
            seen[part.name] = pending.source
            built.append(part)
        defaults = [index for index, part in enumerate(built) if part.is_default]
        # Several Default=YES: the last one wins, as in Slurm.
        for index in defaults[:-1]:
            built[index] = replace(built[index], is_default=False)
        return built

    def _partition(self, values: Values, source: str) -> PartitionConf:
        name = values.text("PartitionName", "")
        priority = values.integer("Priority", 1)
        oversubscribe = values.text("OverSubscribe", values.text("Shared", "NO")).upper()
        if not _OVERSUBSCRIBE.fullmatch(oversubscribe):
            key = "OverSubscribe" if values.has("OverSubscribe") else "Shared"
            raise values.invalid(key, "NO, EXCLUSIVE, YES[:n] or FORCE[:n]")
        return PartitionConf(
            name=name,
            nodes=self._partition_nodes(values, name),
            is_default=values.flag("Default", False),
            max_time=values.minutes("MaxTime", timefmt.UNLIMITED),
            default_time=values.minutes("DefaultTime", timefmt.NOT_SET),
            max_nodes=values.integer("MaxNodes", 0, unlimited=0),
            min_nodes=values.integer("MinNodes", 0),
            max_cpus_per_node=values.integer("MaxCPUsPerNode", 0, unlimited=0),
            state=values.choice("State", "UP", _PARTITION_STATES),
            priority_tier=values.integer("PriorityTier", priority),
            priority_job_factor=values.integer("PriorityJobFactor", priority),
            allow_accounts=values.text("AllowAccounts", "ALL"),
            deny_accounts=values.text("DenyAccounts", ""),
            allow_groups=values.text("AllowGroups", "ALL"),
            allow_qos=values.text("AllowQos", "ALL"),
            deny_qos=values.text("DenyQos", ""),
            qos=values.text("QOS", ""),
            oversubscribe=oversubscribe,
            hidden=values.flag("Hidden", False),
            exclusive_user=values.flag("ExclusiveUser", False),
            root_only=values.flag("RootOnly", False),
            def_mem_per_cpu=values.megabytes("DefMemPerCPU", 0),
            def_mem_per_node=values.megabytes("DefMemPerNode", 0),
            def_mem_per_gpu=values.megabytes("DefMemPerGPU", 0),
            def_cpu_per_gpu=values.integer("DefCpuPerGPU", 0),
            max_mem_per_cpu=values.megabytes("MaxMemPerCPU", 0),
            max_mem_per_node=values.megabytes("MaxMemPerNode", 0),
            grace_time=values.integer("GraceTime", 0),
            preempt_mode=_preempt_mode(values, ""),
            tres_billing_weights=values.text("TRESBillingWeights", ""),
            source=source,
        )

    def _partition_nodes(self, values: Values, partition: str) -> tuple[str, ...]:
        """Nodes= resolved to node names in config order: ALL, NodeSet names and hostlists."""
        wanted: set[str] = set()
        for item in values.hostnames("Nodes"):
            if item.upper() == "ALL":
                wanted.update(self.nodes)
            elif item in self.nodesets:
                wanted.update(self._nodeset(item))
            elif item in self.nodes:
                wanted.add(item)
            else:
                raise ConfigError(
                    f"{values.source('Nodes')}: partition {partition}: Nodes names undefined node '{item}'"
                )
        return tuple(name for name in self.nodes if name in wanted)

    def _nodeset(self, name: str) -> set[str]:
        values, source = self.nodesets[name]
        members: set[str] = set()
        feature = values.text("Feature", "")
        if feature:
            members.update(node.name for node in self.nodes.values() if feature in node.features)
        for item in values.hostnames("Nodes"):
            if item.upper() == "ALL":
                members.update(self.nodes)
            elif item in self.nodes:
                members.add(item)
            else:
                raise ConfigError(f"{source}: NodeSet {name}: Nodes names undefined node '{item}'")
        return members

    # --- the cluster -----------------------------------------------------------------------

    def _control_hosts(self, top: Values) -> list[tuple[str, str]]:
        if self.control_hosts:
            return self.control_hosts
        hosts: list[tuple[str, str]] = []
        # Old spellings: ControlMachine/ControlAddr and BackupController/BackupAddr.
        for name_key, addr_key in (("ControlMachine", "ControlAddr"), ("BackupController", "BackupAddr")):
            host = top.text(name_key, "").split(",")[0].strip()
            if host:
                hosts.append((host, top.text(addr_key, host)))
        if not hosts:
            self.warnings.append(f"{self.path}: no SlurmctldHost set; using localhost")
        return hosts

    def _check_gres_types(self, gres_types: tuple[str, ...]) -> None:
        reported: set[str] = set()
        for node in self.nodes.values():
            for spec in node.gres:
                if spec.name not in gres_types and spec.name not in reported:
                    reported.add(spec.name)
                    self.warnings.append(f"{node.source}: Gres '{spec.name}' is not listed in GresTypes")

    def _config(self, partitions: list[PartitionConf], gres_conf: GresConf) -> SlurmConfig:
        top = Values(self.top, self.path)
        hosts = self._control_hosts(top)
        gres_types = top.words("GresTypes")
        self._check_gres_types(gres_types)
        conf_dir = os.path.dirname(os.path.abspath(self.path))
        cfg = SlurmConfig(
            path=self.path,
            cluster_name=top.text("ClusterName", ""),
            control_machine=hosts[0][0] if hosts else "localhost",
            control_addr=hosts[0][1] if hosts else "localhost",
            control_hosts=tuple(hosts),
            slurmctld_port=top.integer("SlurmctldPort", 6817),
            slurmd_port=top.integer("SlurmdPort", 6818),
            slurm_user=top.text("SlurmUser", "root"),
            slurmd_user=top.text("SlurmdUser", "root"),
            state_save_location=top.text("StateSaveLocation", "/var/spool/slurmctld"),
            state_store=parse_state_store(top),
            slurmd_spool_dir=top.text("SlurmdSpoolDir", "/var/spool/slurmd"),
            slurmctld_pid_file=top.text("SlurmctldPidFile", "/var/run/slurmctld.pid"),
            slurmd_pid_file=top.text("SlurmdPidFile", "/var/run/slurmd.pid"),
            slurmctld_log_file=top.text("SlurmctldLogFile", ""),
            slurmd_log_file=top.text("SlurmdLogFile", ""),
            gres_types=gres_types,
            select_type=_select_type(top),
            select_type_parameters=top.words("SelectTypeParameters"),
            scheduler_type=top.text("SchedulerType", "sched/backfill"),
            scheduler_parameters=_scheduler_parameters(top),
            priority_type=top.text("PriorityType", "priority/basic"),
            priority_calc_period=_calc_period(top),
            preempt_type=_preempt_type(top),
            preempt_mode=_preempt_mode(top, "OFF"),
            preempt_gang=GANG in (word.upper() for word in top.words("PreemptMode")),
            preempt_exempt_time=_seconds(top, "PreemptExemptTime"),
            kill_wait=top.integer("KillWait", 30),
            min_job_age=top.integer("MinJobAge", 300),
            slurmd_timeout=top.integer("SlurmdTimeout", 300),
            slurmctld_timeout=top.integer("SlurmctldTimeout", 120),
            inactive_limit=top.integer("InactiveLimit", 0),
            return_to_service=top.integer("ReturnToService", 1),
            job_requeue=top.integer("JobRequeue", 1),
            max_job_count=top.integer("MaxJobCount", 10000),
            max_array_size=top.integer("MaxArraySize", 1001),
            first_job_id=top.integer("FirstJobId", 1),
            def_mem_per_cpu=top.megabytes("DefMemPerCPU", 0),
            def_mem_per_node=top.megabytes("DefMemPerNode", 0),
            def_mem_per_gpu=top.megabytes("DefMemPerGPU", 0),
            def_cpu_per_gpu=top.integer("DefCpuPerGPU", 0),
            max_mem_per_cpu=top.megabytes("MaxMemPerCPU", 0),
            max_mem_per_node=top.megabytes("MaxMemPerNode", 0),
            task_plugin=top.text("TaskPlugin", "task/none"),
            proctrack_type=top.text("ProctrackType", "proctrack/cgroup"),
            auth_type=top.text("AuthType", "auth/munge"),
            accounting_storage_type=top.text("AccountingStorageType", "accounting_storage/none"),
            accounting_storage_host=top.text("AccountingStorageHost", ""),
            accounting_storage_port=top.integer("AccountingStoragePort", 6819),
            accounting_storage_enforce=top.words("AccountingStorageEnforce"),
            job_acct_gather_type=top.text("JobAcctGatherType", "jobacct_gather/none"),
            msg_timeout=top.integer("MessageTimeout", 10),
            tcp_timeout=top.integer("TCPTimeout", 2),
            enforce_part_limits=top.choice("EnforcePartLimits", "NO", ("NO", "YES", "ALL", "ANY")),
            topology_plugin=top.text("TopologyPlugin", "topology/none"),
            auth_key_file=top.text("AuthKeyFile", os.path.join(conf_dir, "shoal.key")),
            auth_alt_types=top.words("AuthAltTypes"),
            auth_alt_parameters=top.words("AuthAltParameters"),
            cred_expire=_cred_expire(top),
            metrics_type=top.text("MetricsType", ""),
            metrics_auth_users=top.words("MetricsAuthUsers"),
            metrics_parameters=top.words("MetricsParameters"),
            private_data=top.words("PrivateData"),
            agent_socket=top.text("AgentSocket", DEFAULT_AGENT_SOCKET),
            slurmd_parameters=top.words("SlurmdParameters"),
            prolog=top.words("Prolog"),
            epilog=top.words("Epilog"),
            prolog_slurmctld=top.words("PrologSlurmctld"),
            epilog_slurmctld=top.words("EpilogSlurmctld"),
            task_prolog=top.text("TaskProlog", ""),
            task_epilog=top.text("TaskEpilog", ""),
            propagate_rlimits=_propagate_rlimits(top),
            prolog_flags=_prolog_flags(top),
            prolog_epilog_timeout=top.integer("PrologEpilogTimeout", 65534),
            health_check_program=top.text("HealthCheckProgram", ""),
            health_check_interval=top.integer("HealthCheckInterval", 0),
            health_check_node_state=_health_check_node_state(top),
            reboot_program=top.text("RebootProgram", ""),
            resume_timeout=top.integer("ResumeTimeout", 60),
            nodes=tuple(self.nodes.values()),
            partitions=tuple(partitions),
            gres_conf=gres_conf,
            entries=tuple(self.entries),
            warnings=tuple(self.warnings) + gres_conf.warnings,
        )
        return replace(cfg, warnings=cfg.warnings + tuple(_check_preemption(cfg, top)))


# PrologFlags shoal acts on, in the order `scontrol show config` lists them (22.05's, with
# ForceRequeueOnFail of 23.02 where later Slurm prints it)
PROLOG_FLAG_NAMES = ("Alloc", "Contain", "DeferBatch", "NoHold", "ForceRequeueOnFail", "Serial")
# flags later Slurm has that shoal cannot honour: refused with what they would need
_PROLOG_FLAGS_REFUSED = {
    "X11": "PrologFlags=X11 is not supported: shoal has no X11 forwarding",
    "RUNINJOB": "PrologFlags=RunInJob is not supported: shoal runs the Prolog beside the job, not in its cgroup",
}
_HEALTH_CHECK_STATES = ("ANY", "IDLE", "ALLOC", "MIXED", "NONDRAINED_IDLE", "CYCLE")


def _prolog_flags(values: Values) -> tuple[str, ...]:
    """PrologFlags, upper-case, in PROLOG_FLAG_NAMES' order; Contain and NoHold imply Alloc (as 22.05
    shows them), and NoHold with Contain is refused, as in Slurm."""
    given = {word.upper() for word in values.words("PrologFlags")}
    known = {name.upper() for name in PROLOG_FLAG_NAMES}
    for flag in sorted(given):
        if flag in _PROLOG_FLAGS_REFUSED:
            raise ConfigError(f"{values.source('PrologFlags')}: {_PROLOG_FLAGS_REFUSED[flag]}")
        if flag not in known:
            raise values.invalid("PrologFlags", "a list of " + ", ".join(PROLOG_FLAG_NAMES))
    if {"NOHOLD", "CONTAIN"} <= given:
        raise ConfigError(
            f"{values.source('PrologFlags')}: PrologFlags invalid combination: "
            "NoHold cannot be combined with Contain and/or X11"
        )
    if given & {"CONTAIN", "NOHOLD"}:
        given.add("ALLOC")
    return tuple(name.upper() for name in PROLOG_FLAG_NAMES if name.upper() in given)


def _health_check_node_state(values: Values) -> tuple[str, ...]:
    """HealthCheckNodeState: ANY (the default), or some of IDLE, ALLOC, MIXED, NONDRAINED_IDLE, plus CYCLE."""
    states = tuple(word.upper() for word in values.words("HealthCheckNodeState"))
    for state in states:
        if state not in _HEALTH_CHECK_STATES:
            raise values.invalid("HealthCheckNodeState", "a list of " + ", ".join(_HEALTH_CHECK_STATES))
    if not [s for s in states if s != "CYCLE"]:
        states = ("ANY", *states)
    return states


def _preempt_type(values: Values) -> str:
    value = values.text("PreemptType", "preempt/none").lower()
    if value not in _PREEMPT_TYPES:
        raise values.invalid("PreemptType", "one of " + ", ".join(_PREEMPT_TYPES))
    return value


def _preempt_mode(values: Values, default: str) -> str:
    """PreemptMode: OFF, CANCEL, REQUEUE or SUSPEND, with GANG beside it or alone (= OFF,GANG)."""
    words = [word.upper() for word in values.words("PreemptMode")]
    if not words:
        return default
    unsupported = [word for word in words if word in _PREEMPT_UNSUPPORTED]
    if unsupported:
        raise ConfigError(
            f"{values.source('PreemptMode')}: PreemptMode={unsupported[0]} is not supported by shoal "
            "(use OFF, CANCEL, REQUEUE or SUSPEND,GANG)"
        )
    modes = [word for word in words if word != GANG]
    if len(modes) > 1 or any(word not in _PREEMPT_MODES for word in modes):
        raise values.invalid("PreemptMode", "OFF, CANCEL, REQUEUE or SUSPEND, with or without GANG")
    return modes[0] if modes else "OFF"


def preempt_mode_text(mode: str, gang: bool) -> str:
    """A PreemptMode as 22.05 prints it (scontrol show config/partition): GANG first, OFF dropped."""
    if not gang:
        return mode or "OFF"
    return GANG if mode in ("", "OFF") else f"{GANG},{mode}"


def _check_preemption(cfg: SlurmConfig, top: Values) -> list[str]:
    """22.05's rules for PreemptType and PreemptMode together (errors with its words); the warnings
    for what shoal does not do (gang time-slicing)."""
    mode, source = cfg.preempt_mode, top.source("PreemptMode") if top.has("PreemptMode") else cfg.path
    if mode == "SUSPEND" and not cfg.preempt_gang:
        raise ConfigError(f"{source}: PreemptMode=SUSPEND requires GANG too")
    if (cfg.preempt_type == "preempt/none") != (mode == "OFF"):
        raise ConfigError(f"{source}: PreemptType and PreemptMode values incompatible")
    suspending = [p for p in cfg.partitions if p.preempt_mode == "SUSPEND"]
    if suspending and not cfg.preempt_gang:  # the gang scheduler resumes what preemption suspends
        raise ConfigError(
            f"{suspending[0].source}: PreemptMode=SUSPEND requires GANG in the cluster's PreemptMode"
        )
    if not cfg.preempt_gang:
        return []
    shared = [p.name for p in cfg.partitions if p.oversubscribe.split(":")[0] in ("YES", "FORCE")]
    note = f"{source}: PreemptMode=GANG: shoal does no gang time-slicing (SchedulerTimeSlice); jobs never share CPUs"
    return [
        note
        + (f", so OverSubscribe on {', '.join(shared)} runs no two jobs on the same CPUs" if shared else "")
    ]


# shoal's own SchedulerParameters options (README, "Backfill"): whole numbers, 0 = off
_SHOAL_SCHED_OPTIONS = {
    "shoal_short_first": "minutes, a whole number such as 10",
    "shoal_starve_wait": "minutes, a whole number such as 1440",
    "shoal_starve_xfactor": "a whole number such as 10",
    "shoal_starve_max": "a whole number such as 10",
    "shoal_wait_target": "minutes, a whole number such as 3600",
    # idle-GPU detection (ctld/gpu_idle.py)
    "shoal_gpu_idle_threshold": "a utilization in percent, a whole number such as 5",
    "shoal_gpu_idle_time": "seconds, a whole number such as 3600",
    "shoal_gpu_idle_cancel": "seconds, a whole number such as 600",
}


_SELECT_PLUGINS = ("select/cons_tres", "select/cons_res", "select/linear")


def _select_type(values: Values) -> str:
    """SelectType: one of Slurm's plugins shoal schedules like; any other is fatal, as in 22.05."""
    value = values.text("SelectType", "select/cons_tres")
    if value.lower() not in _SELECT_PLUGINS:
        raise ConfigError(f"{values.source('SelectType')}: Can't find plugin for {value}")
    return value


def _scheduler_parameters(values: Values) -> tuple[str, ...]:
    """SchedulerParameters: Slurm's options are read by ctld (a bad number keeps the default, as
    Slurm); shoal's own are refused at file:line when their value is not a whole number."""
    words = values.words("SchedulerParameters")
    for word in words:
        key, _, value = (part.strip() for part in word.partition("="))
        expected = _SHOAL_SCHED_OPTIONS.get(key.lower())
        if expected is not None and not value.isdigit():
            raise ConfigError(
                f"{values.source('SchedulerParameters')}: invalid value for SchedulerParameters option "
                f"{key}: {value!r} (expected {expected}; 0 = off)"
            )
    return words


def _calc_period(values: Values) -> int:
    """PriorityCalcPeriod: a time in minutes as Slurm reads it (default 5); under a minute is refused, as Slurm."""
    minutes = values.minutes("PriorityCalcPeriod", 5)
    if minutes < 1 and minutes != timefmt.UNLIMITED:
        raise values.invalid("PriorityCalcPeriod", "a time of at least 1 minute, such as 5 or 0:10:00")
    return minutes


def _cred_expire(values: Values) -> int:
    """AuthInfo's cred_expire=N (the other AuthInfo words are the auth plugin's own); 120 unset."""
    for word in values.words("AuthInfo"):
        key, _, value = word.partition("=")
        if key.strip().lower() == "cred_expire":
            if not value.strip().isdigit():
                raise values.invalid("AuthInfo", "cred_expire=SECONDS")
            return int(value)
    return 120


def _seconds(values: Values, key: str) -> int:
    """A time in Slurm's time-limit formats, in seconds (-1/UNLIMITED/unset: 0)."""
    value = values.text(key, "")
    if not value:
        return 0
    try:
        return max(0, timefmt.parse_time_seconds(value))
    except ValueError:
        raise values.invalid(key, "a time such as 10:00 or 1-0") from None
