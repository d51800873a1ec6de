"""Slurm 25.11's OpenMetrics (MetricsType=metrics/openmetrics), computed from ctld's answers.

Pure functions: GetJobs/GetNodes/GetPartitions/GetDiag answers in, exposition text out. Every name,
type and label is one of the 197 that Slurm 25.11 serves (all gauges, labelled `node` or
`partition` or not at all); a name shoal has no counter for is still served, with value 0, so a
dashboard built for Slurm finds every series. /metrics/jobs-users-accts adds per-user and
per-account job counts (not in that list; see README).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from shoal import hostlist
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
ENDPOINTS = (
    "/metrics/jobs",
    "/metrics/jobs-users-accts",
    "/metrics/nodes",
    "/metrics/partitions",
    "/metrics/scheduler",
    "/metrics/gpus",  # shoal's own (restd/gpus.py): per-GPU state, none of Slurm's names
)
MIB = 1024 * 1024

# Job state suffixes of slurm_jobs_* and slurm_partition_jobs_*, in Slurm's names
JOB_STATES = (
    "bootfail",
    "cancelled",
    "completed",
    "completing",
    "configuring",
    "deadline",
    "expediting",
    "failed",
    "fed_requeued",
    "finished",
    "hold",
    "node_failed",
    "outofmemory",
    "pending",
    "powerup_node",
    "preempted",
    "requeued",
    "resizing",
    "revoked",
    "running",
    "signaling",
    "stageout",
    "started",
    "suspended",
    "timeout",
)
_BY_STATE = {
    jobs_pb2.BOOT_FAIL: "bootfail",
    jobs_pb2.CANCELLED: "cancelled",
    jobs_pb2.COMPLETED: "completed",
    jobs_pb2.COMPLETING: "completing",
    jobs_pb2.DEADLINE: "deadline",
    jobs_pb2.FAILED: "failed",
    jobs_pb2.NODE_FAIL: "node_failed",
    jobs_pb2.OUT_OF_MEMORY: "outofmemory",
    jobs_pb2.PENDING: "pending",
    jobs_pb2.PREEMPTED: "preempted",
    jobs_pb2.REQUEUED: "requeued",
    jobs_pb2.RUNNING: "running",
    jobs_pb2.SUSPENDED: "suspended",
    jobs_pb2.TIMEOUT: "timeout",
}
_FINISHED = frozenset(
    {
        jobs_pb2.BOOT_FAIL,
        jobs_pb2.CANCELLED,
        jobs_pb2.COMPLETED,
        jobs_pb2.DEADLINE,
        jobs_pb2.FAILED,
        jobs_pb2.NODE_FAIL,
        jobs_pb2.OUT_OF_MEMORY,
        jobs_pb2.PREEMPTED,
        jobs_pb2.TIMEOUT,
    }
)
_HOLDING = frozenset({jobs_pb2.RUNNING, jobs_pb2.SUSPENDED, jobs_pb2.COMPLETING})
# Node state suffixes of slurm_nodes_* (and the partition's spelling where it differs)
NODE_STATES = (
    "alloc",
    "blocked",
    "cloud",
    "completing",
    "down",
    "drain",
    "drained",
    "draining",
    "dyn_future",
    "dyn_normal",
    "external",
    "fail",
    "future",
    "idle",
    "invalid_reg",
    "maint",
    "mixed",
    "noresp",
    "planned",
    "power_down",
    "power_up",
    "powered_down",
    "powering_up",
    "reboot_issued",
    "reboot_req",
    "resv",
    "unknown",
)
_PARTITION_NODE_NAMES = {"completing": "cg", "noresp": "no_resp", "reboot_req": "reboot_requested"}
PARTITION_NODE_STATES = (*(_PARTITION_NODE_NAMES.get(s, s) for s in NODE_STATES), "powering_down")


@dataclass
class Family:
    """One metric: its name and samples (labels -> value); all of Slurm's are gauges. A counter's
    samples are named NAME_total, as OpenMetrics has them."""

    name: str
    samples: list[tuple[tuple[tuple[str, str], ...], float]] = field(default_factory=list)
    kind: str = "gauge"

    def add(self, value: float, **labels: str) -> Family:
        self.samples.append((tuple(labels.items()), value))
        return self


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def exposition(families: Iterable[Family]) -> str:
    """The OpenMetrics text: a TYPE line per family, its samples, `# EOF` at the end."""
    lines: list[str] = []
    for fam in families:
        lines.append(f"# TYPE {fam.name} {fam.kind}")
        name = f"{fam.name}_total" if fam.kind == "counter" else fam.name
        for labels, value in fam.samples:
            text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            lines.append(f"{name}{{{text}}} {_number(value)}" if text else f"{name} {_number(value)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def index() -> str:
    """GET /metrics: the endpoints there are, one a line."""
    return "".join(f"{path}\n" for path in ENDPOINTS)


# --- jobs -------------------------------------------------------------------------------------------


def _job_counts(jobs: Iterable[jobs_pb2.JobInfo]) -> dict[str, float]:
    """slurm_jobs_* values (suffix -> value) for some jobs; "" is slurm_jobs itself."""
    out: dict[str, float] = {
        state: 0 for state in (*JOB_STATES, "cpus_alloc", "gpus_alloc", "memory_alloc", "nodes_alloc")
    }
    out[""] = 0
    for job in jobs:
        out[""] += 1
        state = _BY_STATE.get(job.state)
        if state:
            out[state] += 1
        if job.state in _FINISHED:
            out["finished"] += 1
        if job.held and job.state == jobs_pb2.PENDING:
            out["hold"] += 1
        if job.start_time and job.state != jobs_pb2.PENDING:
            out["started"] += 1
        if job.state in _HOLDING:
            out["cpus_alloc"] += job.num_cpus
            out["gpus_alloc"] += job.num_gpus
            out["memory_alloc"] += job.mem_mb
            out["nodes_alloc"] += job.num_nodes
    return out


def jobs_families(resp: controller_pb2.GetJobsResponse) -> list[Family]:
    counts = _job_counts(resp.jobs)
    names = ["", *sorted(k for k in counts if k)]
    return [Family(f"slurm_jobs_{k}" if k else "slurm_jobs").add(counts[k]) for k in names]


def users_accounts_families(resp: controller_pb2.GetJobsResponse) -> list[Family]:
    """Job counts per user (`username`) and per account (`account`): slurm_user_jobs*, slurm_account_jobs*."""
    by_user: dict[str, list[jobs_pb2.JobInfo]] = defaultdict(list)
    by_account: dict[str, list[jobs_pb2.JobInfo]] = defaultdict(list)
    for job in resp.jobs:
        by_user[job.user_name or str(job.user_id)].append(job)
        by_account[job.account].append(job)
    families: list[Family] = []
    for prefix, label, groups in (
        ("slurm_user_jobs", "username", by_user),
        ("slurm_account_jobs", "account", by_account),
    ):
        counts = {key: _job_counts(jobs) for key, jobs in sorted(groups.items())}
        for suffix in ["", *sorted(k for k in _job_counts([]) if k)]:
            fam = Family(f"{prefix}_{suffix}" if suffix else prefix)
            for key, values in counts.items():
                fam.add(values[suffix], **{label: key})
            families.append(fam)
    return families


# --- nodes ------------------------------------------------------------------------------------------


def _node_states(node: cluster_pb2.NodeInfo) -> set[str]:
    """Which slurm_nodes_* states a node is in (a node may be in several: MIXED+DRAIN is draining)."""
    base = node.base_state.upper()
    states = {
        {"IDLE": "idle", "ALLOCATED": "alloc", "MIXED": "mixed", "DOWN": "down", "FUTURE": "future"}.get(
            base, "unknown"
        )
    }
    if node.drain:
        states.add("drain")
        states.add("draining" if node.alloc_cpus or node.completing else "drained")
    if node.completing:
        states.add("completing")
    if node.not_responding:
        states.add("noresp")
    if node.maint:
        states.add("maint")
    if node.reboot_requested:
        states.add("reboot_req")
    if node.reboot_issued:
        states.add("reboot_issued")
    if "RESERVED" in node.state.upper():
        states.add("resv")
    return states


def _free_mb(node: cluster_pb2.NodeInfo) -> int:
    if node.HasField("hardware") and node.hardware.free_mem_mb:
        return node.hardware.free_mem_mb
    return max(0, node.real_memory_mb - node.alloc_mem_mb)


def nodes_families(resp: controller_pb2.GetNodesResponse) -> list[Family]:
    per_node: dict[str, Callable[[cluster_pb2.NodeInfo], float]] = {
        "slurm_node_cpus": lambda n: n.cpus,
        "slurm_node_cpus_alloc": lambda n: n.alloc_cpus,
        "slurm_node_cpus_effective": lambda n: n.cpus,
        "slurm_node_cpus_idle": lambda n: max(0, n.cpus - n.alloc_cpus),
        "slurm_node_gpus": lambda n: n.total_gpus,
        "slurm_node_gpus_alloc": lambda n: n.alloc_gpus,
        "slurm_node_memory_alloc_bytes": lambda n: n.alloc_mem_mb * MIB,
        "slurm_node_memory_bytes": lambda n: n.real_memory_mb * MIB,
        "slurm_node_memory_effective_bytes": lambda n: n.real_memory_mb * MIB,
        "slurm_node_memory_free_bytes": lambda n: _free_mb(n) * MIB,
    }
    families = []
    for name, value in per_node.items():
        fam = Family(name)
        for node in resp.nodes:
            fam.add(value(node), node=node.name)
        families.append(fam)
    counts: Counter[str] = Counter(s for node in resp.nodes for s in _node_states(node))
    families.append(Family("slurm_nodes").add(len(resp.nodes)))
    families += [Family(f"slurm_nodes_{state}").add(counts[state]) for state in NODE_STATES]
    return families


# --- partitions -------------------------------------------------------------------------------------


def partitions_families(
    parts: controller_pb2.GetPartitionsResponse,
    nodes: controller_pb2.GetNodesResponse,
    jobs: controller_pb2.GetJobsResponse,
) -> list[Family]:
    by_name = {n.name: n for n in nodes.nodes}
    members: dict[str, list[cluster_pb2.NodeInfo]] = {
        p.name: [by_name[h] for h in hostlist.expand(p.nodes) if h in by_name] if p.nodes else []
        for p in parts.partitions
    }
    part_jobs: dict[str, list[jobs_pb2.JobInfo]] = defaultdict(list)
    for job in jobs.jobs:
        for name in job.partition.split(","):
            part_jobs[name].append(job)
    rows: dict[str, dict[str, float]] = {}
    for p in parts.partitions:
        row: dict[str, float] = {}
        counts = _job_counts(part_jobs[p.name])
        for key, value in counts.items():
            if key != "nodes_alloc":  # not a partition metric in Slurm's list
                row[f"jobs_{key}" if key else "jobs"] = value
        waiting = [j for j in part_jobs[p.name] if j.state == jobs_pb2.PENDING]
        sizes = [j.num_nodes for j in waiting]
        unheld = [j.num_nodes for j in waiting if not j.held]
        row["jobs_max_job_nodes"] = max(sizes, default=0)
        row["jobs_min_job_nodes"] = min(sizes, default=0)
        row["jobs_max_job_nodes_nohold"] = max(unheld, default=0)
        row["jobs_min_job_nodes_nohold"] = min(unheld, default=0)
        row["jobs_wait_part_node_limit"] = sum(1 for j in waiting if j.state_reason == "PartitionNodeLimit")
        its = members[p.name]
        row["cpus"] = p.total_cpus
        row["gpus"] = sum(n.total_gpus for n in its)
        row["nodes"] = len(its)
        row["nodes_cpus_efctv"] = sum(n.cpus for n in its)
        row["nodes_cpus_idle"] = sum(max(0, n.cpus - n.alloc_cpus) for n in its)
        row["nodes_mem_alloc"] = sum(n.alloc_mem_mb for n in its)
        row["nodes_mem_avail"] = sum(max(0, n.real_memory_mb - n.alloc_mem_mb) for n in its)
        row["nodes_mem_free"] = sum(_free_mb(n) for n in its)
        row["nodes_mem_tot"] = sum(n.real_memory_mb for n in its)
        states: Counter[str] = Counter(s for n in its for s in _node_states(n))
        for state in NODE_STATES:
            row[f"nodes_{_PARTITION_NODE_NAMES.get(state, state)}"] = states[state]
        row["nodes_powering_down"] = 0
        rows[p.name] = row
    families = [Family("slurm_partitions").add(len(parts.partitions))]
    keys = sorted({k for row in rows.values() for k in row})
    for key in keys:
        fam = Family(f"slurm_partition_{key}")
        for name, row in rows.items():
            fam.add(row[key], partition=name)
        families.append(fam)
    return families


# --- scheduler (sdiag) ------------------------------------------------------------------------------


def _mean(total: int, count: int) -> int:
    return total // count if count else 0


def scheduler_families(d: controller_pb2.GetDiagResponse, latency_us: int = 0) -> list[Family]:
    n, bf = d.sched_cycles, d.bf_cycles
    values: Mapping[str, float] = {
        "slurm_agent_cnt": 0,
        "slurm_agent_queue_size": d.agent_queue_size,
        "slurm_agent_thread_cnt": 0,
        "slurm_backfilled_het_jobs": 0,
        "slurm_backfilled_jobs": d.bf_backfilled_jobs,
        "slurm_bf_active": 0,
        "slurm_bf_cycle_cnt": bf,
        "slurm_bf_cycle_last": d.bf_cycle_last_us,
        "slurm_bf_cycle_max": d.bf_cycle_max_us,
        "slurm_bf_cycle_tot": d.bf_cycle_sum_us,
        "slurm_bf_depth_mean": _mean(d.bf_depth_sum, bf),
        "slurm_bf_depth_tot": d.bf_depth_sum,
        "slurm_bf_depth_try_tot": d.bf_depth_sum,
        "slurm_bf_exit_end": bf,
        "slurm_bf_exit_max_job_start": 0,
        "slurm_bf_exit_max_job_test": 0,
        "slurm_bf_exit_state_changed": 0,
        "slurm_bf_exit_table_limit": 0,
        "slurm_bf_exit_timeout": 0,
        "slurm_bf_last_depth": d.bf_last_depth,
        "slurm_bf_last_depth_try": d.bf_last_depth,
        "slurm_bf_mean_cycle": _mean(d.bf_cycle_sum_us, bf),
        "slurm_bf_mean_table_sz": 1 if bf else 0,
        "slurm_bf_queue_len": d.bf_queue_len,
        "slurm_bf_queue_len_mean": _mean(d.bf_queue_len_sum, bf),
        "slurm_bf_queue_len_tot": d.bf_queue_len_sum,
        "slurm_bf_table_size": 1 if bf else 0,
        "slurm_bf_table_size_tot": bf,
        "slurm_bf_try_depth_mean": _mean(d.bf_depth_sum, bf),
        "slurm_bf_when_last_cycle": d.bf_last_when,
        "slurm_last_backfilled_jobs": d.bf_backfilled_jobs,
        "slurm_last_proc_req_start": d.since,
        "slurm_sched_exit_lic": 0,
        "slurm_sched_exit_max_depth": 0,
        "slurm_sched_exit_max_job_start": 0,
        "slurm_sched_exit_rpc_cnt": 0,
        "slurm_sched_exit_timeout": 0,
        "slurm_sched_mean_cycle": _mean(d.sched_cycle_sum_us, n),
        "slurm_sched_mean_depth_cycle": _mean(d.sched_depth_sum, n),
        "slurm_sched_stats_timestamp": d.now,
        "slurm_schedule_cycle_cnt": n,
        "slurm_schedule_cycle_depth": d.sched_depth_sum,
        "slurm_schedule_cycle_last": d.sched_cycle_last_us,
        "slurm_schedule_cycle_max": d.sched_cycle_max_us,
        "slurm_schedule_cycle_tot": d.sched_cycle_sum_us,
        "slurm_schedule_queue_len": d.sched_queue_len,
        "slurm_sdiag_job_states_ts": d.job_states_ts,
        "slurm_sdiag_jobs_canceled": d.jobs_canceled,
        "slurm_sdiag_jobs_completed": d.jobs_completed,
        "slurm_sdiag_jobs_failed": d.jobs_failed,
        "slurm_sdiag_jobs_pending": d.jobs_pending,
        "slurm_sdiag_jobs_running": d.jobs_running,
        "slurm_sdiag_jobs_started": d.jobs_started,
        "slurm_sdiag_jobs_submitted": d.jobs_submitted,
        "slurm_sdiag_latency": latency_us,
        "slurm_server_thread_cnt": d.server_thread_count,
        "slurm_slurmdbd_queue_size": d.dbd_agent_queue_size,
    }
    return [Family(name).add(value) for name, value in values.items()]
