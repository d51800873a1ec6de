"""shoal's protobuf records as OpenAPI v0.0.44 objects (pure: no I/O, no clock).

Numbers Slurm may leave unset or infinite travel as its `*_no_val_struct` {set, infinite, number};
times are unix seconds. Only what shoal knows is filled; v0.0.44 makes every such field optional.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Iterable

from shoal.states import job_state_name
from shoal.timefmt import UNLIMITED
from shoal.v1 import accounting_pb2, cluster_pb2, controller_pb2, jobs_pb2

Json = dict[str, object]


def no_val(number: int | float | None, *, infinite: bool = False) -> Json:
    if infinite:
        return {"set": False, "infinite": True, "number": 0}
    if number is None:
        return {"set": False, "infinite": False, "number": 0}
    return {"set": True, "infinite": False, "number": number}


def _time(seconds: int) -> Json:
    return no_val(seconds) if seconds > 0 else no_val(0)


def _minutes(minutes: int) -> Json:
    """A time limit in minutes: UNLIMITED is infinite, not given (< 0) is unset."""
    if minutes == UNLIMITED:
        return no_val(None, infinite=True)
    return no_val(minutes) if minutes >= 0 else no_val(None)


def _limit(value: int) -> Json:
    """An association/QOS limit, -1 = none."""
    return no_val(value) if value >= 0 else no_val(None, infinite=True)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name.removeprefix("SIG")
    except ValueError:
        return str(number)


def exit_code(code: int, sig: int, *, pending: bool = False) -> Json:
    if pending:
        status = "PENDING"
    elif sig:
        status = "SIGNALED"
    else:
        status = "SUCCESS" if code == 0 else "ERROR"
    return {
        "status": [status],
        "return_code": no_val(None) if pending else no_val(code),
        "signal": {"id": no_val(sig) if sig else no_val(None), "name": _signal_name(sig) if sig else ""},
    }


# --- ctld: jobs, nodes, partitions, reservations, shares -----------------------------------------


def job_info(job: jobs_pb2.JobInfo) -> Json:
    spec = job.spec
    pending = job.state == jobs_pb2.PENDING
    array = job.array_job_id != 0
    return {
        "account": job.account,
        "array_job_id": no_val(job.array_job_id),
        "array_task_id": no_val(job.array_task_id) if job.array_task_id >= 0 else no_val(None),
        "array_task_string": job.array_task_str,
        "batch_flag": bool(job.batch_flag or spec.batch),
        "batch_host": job.batch_host,
        "command": spec.command,
        "comment": spec.comment,
        "cpus": no_val(job.num_cpus),
        "current_working_directory": spec.work_dir,
        "dependency": spec.dependency,
        "derived_exit_code": exit_code(job.derived_exit_code, job.derived_exit_signal, pending=pending),
        "eligible_time": _time(job.eligible_time),
        "end_time": _time(job.end_time),
        "exit_code": exit_code(job.exit_code, job.exit_signal, pending=pending),
        "group_id": job.group_id,
        "group_name": job.group_name,
        "job_id": job.job_id,
        "job_state": [job_state_name(job.state)],
        "last_sched_evaluation": _time(job.last_sched_eval),
        "memory_per_node": no_val(job.min_memory_node_mb) if job.min_memory_node_mb else no_val(None),
        "memory_per_cpu": no_val(job.min_memory_cpu_mb) if job.min_memory_cpu_mb else no_val(None),
        "name": spec.name,
        "nodes": job.nodes,
        "node_count": no_val(job.num_nodes),
        "partition": job.partition,
        "priority": no_val(job.priority),
        "qos": job.qos,
        "requeue": job.requeue,
        "restart_cnt": job.restarts,
        "standard_error": job.std_err,
        "standard_input": job.std_in,
        "standard_output": job.std_out,
        "start_time": _time(job.start_time),
        "state_reason": job.state_reason or "None",
        "submit_time": _time(job.submit_time),
        "tasks": no_val(job.num_tasks),
        "time_limit": _minutes(job.time_limit_min),
        "tres_alloc_str": job.tres_alloc,
        "tres_req_str": job.tres_req,
        "user_id": job.user_id,
        "user_name": job.user_name,
        **({"array_max_tasks": no_val(job.array_max_tasks)} if array else {}),
    }


def _node_states(node: cluster_pb2.NodeInfo) -> list[str]:
    base = node.base_state if node.base_state in _NODE_BASES else "UNKNOWN"
    states = [base]
    if node.drain:
        states.append("DRAIN")
    if node.reboot_requested:
        states.append("REBOOT_REQUESTED")
    if node.reboot_issued:
        states.append("REBOOT_ISSUED")
    if node.not_responding:
        states.append("NOT_RESPONDING")
    if node.completing:
        states.append("COMPLETING")
    if node.maint:
        states.extend(("MAINTENANCE", "RESERVED"))
    return states


_NODE_BASES = ("UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "MIXED", "FUTURE")


def node(n: cluster_pb2.NodeInfo) -> Json:
    return {
        "name": n.name,
        "address": n.addr,
        "hostname": n.hostname,
        "port": n.port,
        "state": _node_states(n),
        "next_state_after_reboot": [n.next_state] if n.next_state else [],
        "cpus": n.cpus,
        "alloc_cpus": n.alloc_cpus,
        "alloc_idle_cpus": max(0, n.cpus - n.alloc_cpus),
        "boards": n.boards,
        "sockets": n.sockets,
        "cores": n.cores_per_socket,
        "threads": n.threads_per_core,
        "real_memory": n.real_memory_mb,
        "alloc_memory": n.alloc_mem_mb,
        "temporary_disk": n.tmp_disk_mb,
        "weight": n.weight,
        "gres": n.gres,
        "gres_used": n.gres_used,
        "features": list(n.features),
        "active_features": list(n.features),
        "partitions": list(n.partitions),
        "reason": n.reason,
        "reason_set_by_user": n.reason_user,
        "reason_changed_at": _time(n.reason_time),
        "boot_time": _time(n.boot_time),
        "slurmd_start_time": _time(n.noded_start_time),
        "last_busy": _time(n.last_busy_time),
        "version": n.version,
    }


def partition(p: cluster_pb2.PartitionInfo, cluster: str) -> Json:
    state = p.state if p.state in ("INACTIVE", "UNKNOWN", "UP", "DOWN", "DRAIN") else "UNKNOWN"
    return {
        "name": p.name,
        "cluster": cluster,
        "nodes": {"configured": p.nodes, "total": p.total_nodes, "allowed_allocation": ""},
        "accounts": {"allowed": p.allow_accounts, "deny": p.deny_accounts},
        "groups": {"allowed": p.allow_groups},
        "qos": {"allowed": p.allow_qos, "deny": p.deny_qos, "assigned": ""},
        "cpus": {"total": p.total_cpus, "task_binding": 0},
        "defaults": {
            "memory_per_cpu": p.def_mem_per_cpu_mb,
            "time": _minutes(p.default_time_min),
        },
        "maximums": {
            "memory_per_cpu": p.max_mem_per_cpu_mb,
            "nodes": no_val(p.max_nodes) if p.max_nodes else no_val(None, infinite=True),
            "time": _minutes(p.max_time_min),
        },
        "minimums": {"nodes": p.min_nodes},
        "grace_time": p.grace_time,
        "priority": {"job_factor": p.priority_job_factor, "tier": p.priority_tier},
        "partition": {"state": [state]},
    }


def reservation(r: controller_pb2.ReservationInfo) -> Json:
    known = set(_RESV_FLAGS)
    return {
        "name": r.name,
        "start_time": _time(r.start_time),
        "end_time": _time(r.end_time),
        "node_list": ",".join(r.nodes),
        "node_count": len(r.nodes),
        "core_count": r.core_cnt,
        "partition": r.partition,
        "flags": [f for f in r.flags if f in known],
        "users": ",".join(r.users),
        "accounts": ",".join(r.accounts),
    }


_RESV_FLAGS = (
    "MAINT",
    "DAILY",
    "WEEKLY",
    "IGNORE_JOBS",
    "ANY_NODES",
    "STATIC",
    "PART_NODES",
    "OVERLAP",
    "SPEC_NODES",
    "TIME_FLOAT",
    "REPLACE",
    "ALL_NODES",
    "PURGE_COMP",
    "WEEKDAY",
    "WEEKEND",
    "FLEX",
    "MAGNETIC",
    "HOURLY",
)


def _float(value: float) -> Json:
    return (
        no_val(None)
        if math.isnan(value)
        else (no_val(None, infinite=True) if math.isinf(value) else no_val(value))
    )


def shares(resp: controller_pb2.GetSharesResponse, cluster: str) -> Json:
    rows = []
    parents: list[str] = []
    for i, row in enumerate(resp.rows):
        del parents[row.depth :]
        name = row.user or row.account
        rows.append(
            {
                "id": i,
                "cluster": cluster,
                "name": name,
                "parent": row.account if row.user else (parents[-1] if parents else ""),
                "partition": "",
                "shares": no_val(row.raw_shares),
                "shares_normalized": _float(row.norm_shares),
                "usage": int(row.raw_usage),
                "usage_normalized": _float(row.norm_usage),
                "effective_usage": _float(row.effective_usage),
                "fairshare": {"factor": _float(row.fairshare), "level": _float(row.level_fs)},
                "type": ["USER" if row.user else "ASSOCIATION"],
            }
        )
        if not row.user:
            parents.append(row.account)
    return {"shares": rows, "total_shares": sum(r.raw_shares for r in resp.rows if r.depth == 1)}


def ping(resp: controller_pb2.PingResponse, latency_us: int) -> Json:
    return {
        "hostname": resp.hostname,
        "pinged": "UP",
        "responding": True,
        "latency": latency_us,
        "mode": resp.role or "primary",
        "primary": (resp.role or "primary") == "primary",
    }


# --- dbd: jobs, accounts, associations, qos, users -----------------------------------------------


def table_rows(table: accounting_pb2.RecordTable) -> list[dict[str, object]]:
    """A column-wise RecordTable back into one dict per row."""
    rows: list[dict[str, object]] = [{} for _ in range(table.rows)]
    for column in table.columns:
        values: Iterable[object] = column.ints if column.ints else column.texts
        for row, value in zip(rows, values, strict=False):
            row[column.name] = value
    return rows


def _tres(text: str) -> list[Json]:
    out: list[Json] = []
    for item in filter(None, text.split(",")):
        name, _, count = item.partition("=")
        kind, _, sub = name.partition("/")
        number = count.rstrip("MGKT")
        scale = {"G": 1024, "T": 1024 * 1024}.get(count[-1:], 1)
        try:
            value = int(float(number) * scale)
        except ValueError:
            continue
        out.append({"type": kind, "name": sub, "count": value})
    return out


def db_job(row: dict[str, object]) -> Json:
    def i(name: str) -> int:
        value = row.get(name, 0)
        return int(value) if isinstance(value, int) else 0

    def s(name: str) -> str:
        value = row.get(name, "")
        return value if isinstance(value, str) else ""

    state = s("state") or "PENDING"
    pending = state == "PENDING"
    start, end = i("start_time"), i("end_time")
    return {
        "job_id": i("job_id"),
        "name": s("name"),
        "user": s("user"),
        "group": str(i("gid")),
        "account": s("account"),
        "partition": s("partition"),
        "qos": s("qos"),
        "cluster": s("cluster"),
        "nodes": s("nodelist") or "None assigned",
        "allocation_nodes": i("alloc_nodes"),
        "working_directory": s("work_dir"),
        "array": {
            "job_id": i("array_job_id"),
            "task_id": no_val(i("array_task_id"))
            if i("array_task_id") >= 0 and i("array_job_id")
            else no_val(None),
            "task": "",
            "limits": {"max": {"running": {"tasks": 0}}},
        },
        "association": {
            "account": s("account"),
            "cluster": s("cluster"),
            "partition": s("partition"),
            "user": s("user"),
        },
        "state": {"current": [state], "reason": s("reason") or "None"},
        "exit_code": exit_code(i("exit_code"), i("exit_signal"), pending=pending),
        "derived_exit_code": exit_code(i("derived_exit_code"), i("derived_exit_signal"), pending=pending),
        "priority": no_val(i("priority")),
        "time": {
            "submission": i("submit_time"),
            "eligible": i("eligible_time"),
            "start": start,
            "end": end,
            "elapsed": max(0, end - start) if start and end else 0,
            "limit": _minutes(i("time_limit_min")),
            "suspended": 0,
        },
        "required": {"CPUs": i("req_cpus"), "memory_per_node": no_val(i("req_mem_mb"))},
        "tres": {"requested": _tres(s("tres_req")), "allocated": _tres(s("tres_alloc"))},
    }


def account(row: dict[str, str]) -> Json:
    return {
        "name": row.get("account", ""),
        "description": row.get("descr", ""),
        "organization": row.get("org", ""),
        "coordinators": [],
        "flags": [],
    }


def association(row: dict[str, str]) -> Json:
    def num(name: str) -> Json:
        text = row.get(name, "")
        return no_val(int(text)) if text.lstrip("-").isdigit() and int(text) >= 0 else no_val(None)

    return {
        "id": int(row["id"]) if row.get("id", "").isdigit() else 0,
        "cluster": row.get("cluster", ""),
        "account": row.get("account", ""),
        "user": row.get("user", ""),
        "partition": row.get("partition", ""),
        "parent_account": row.get("parentname", ""),
        "shares_raw": int(row["share"]) if row.get("share", "").isdigit() else 1,
        "priority": num("priority"),
        "qos": [q for q in row.get("qos", "").split(",") if q],
        "default": {"qos": row.get("defqos", "")},
        "max": {
            "jobs": {"active": num("maxjobs"), "total": num("maxsubmit")},
            "tres": {"per": {"job": _tres(row.get("maxtres", ""))}, "total": _tres(row.get("grptres", ""))},
        },
        "flags": [],
    }


def qos(row: dict[str, str], index: int) -> Json:
    mode = row.get("preemptmode", "").upper()
    try:
        factor = float(row.get("usagefactor", "1") or 1)
    except ValueError:
        factor = 1.0
    return {
        "id": index,
        "name": row.get("name", ""),
        "description": row.get("description", ""),
        "priority": no_val(int(row["priority"])) if row.get("priority", "").isdigit() else no_val(0),
        "usage_factor": no_val(factor),
        "flags": [],
        "preempt": {
            "list": [p for p in row.get("preempt", "").split(",") if p],
            "mode": ["DISABLED" if mode in ("", "OFF", "CLUSTER") else mode],
        },
        "limits": {"max": {"tres": {"per": {"job": _tres(row.get("maxtres", ""))}}}},
    }


_ADMIN_LEVELS = ("None", "Operator", "Administrator")


def user(name: str, rows: list[dict[str, str]]) -> Json:
    first = rows[0] if rows else {}
    level = first.get("adminlevel", "None")
    return {
        "name": name,
        "administrator_level": [level if level in _ADMIN_LEVELS else "None"],
        "default": {"account": first.get("defaultaccount", "")},
        "associations": [
            {
                "account": r.get("account", ""),
                "cluster": r.get("cluster", ""),
                "partition": r.get("partition", ""),
                "user": name,
            }
            for r in rows
            if r.get("account")
        ],
        "coordinators": [],
        "flags": [],
    }


def statistics(d: controller_pb2.GetDiagResponse) -> Json:
    """GET /diag's `statistics`: ctld's sdiag counters (times in microseconds, as slurmctld counts them)."""
    n, bf = d.sched_cycles, d.bf_cycles
    elapsed_min = (d.now - d.since) // 60
    return {
        "parts_packed": 1,
        "req_time": no_val(d.now),
        "req_time_start": no_val(d.since),
        "server_thread_count": d.server_thread_count,
        "agent_queue_size": d.agent_queue_size,
        "agent_count": 0,
        "agent_thread_count": 0,
        "dbd_agent_queue_size": d.dbd_agent_queue_size,
        "schedule_cycle_max": d.sched_cycle_max_us,
        "schedule_cycle_last": d.sched_cycle_last_us,
        "schedule_cycle_sum": d.sched_cycle_sum_us,
        "schedule_cycle_total": n,
        "schedule_cycle_mean": d.sched_cycle_sum_us // n if n else 0,
        "schedule_cycle_mean_depth": d.sched_depth_sum // n if n else 0,
        "schedule_cycle_per_minute": n // elapsed_min if elapsed_min else 0,
        "schedule_cycle_depth": d.sched_depth_sum,
        "schedule_queue_length": d.sched_queue_len,
        "jobs_submitted": d.jobs_submitted,
        "jobs_started": d.jobs_started,
        "jobs_completed": d.jobs_completed,
        "jobs_canceled": d.jobs_canceled,
        "jobs_failed": d.jobs_failed,
        "jobs_pending": d.jobs_pending,
        "jobs_running": d.jobs_running,
        "job_states_ts": no_val(d.job_states_ts),
        "bf_backfilled_jobs": d.bf_backfilled_jobs,
        "bf_last_backfilled_jobs": d.bf_backfilled_jobs,
        "bf_backfilled_het_jobs": 0,
        "bf_cycle_counter": bf,
        "bf_cycle_mean": d.bf_cycle_sum_us // bf if bf else 0,
        "bf_depth_mean": d.bf_depth_sum // bf if bf else 0,
        "bf_depth_mean_try": d.bf_depth_sum // bf if bf else 0,
        "bf_cycle_sum": d.bf_cycle_sum_us,
        "bf_cycle_last": d.bf_cycle_last_us,
        "bf_cycle_max": d.bf_cycle_max_us,
        "bf_last_depth": d.bf_last_depth,
        "bf_last_depth_try": d.bf_last_depth,
        "bf_depth_sum": d.bf_depth_sum,
        "bf_depth_try_sum": d.bf_depth_sum,
        "bf_queue_len": d.bf_queue_len,
        "bf_queue_len_mean": d.bf_queue_len_sum // bf if bf else 0,
        "bf_queue_len_sum": d.bf_queue_len_sum,
        "bf_table_size": 1 if bf else 0,
        "bf_table_size_sum": bf,
        "bf_table_size_mean": 1 if bf else 0,
        "bf_when_last_cycle": no_val(d.bf_last_when),
        "bf_active": False,
        "rpcs_by_message_type": [
            {
                "type_id": r.type_id,
                "message_type": r.name,
                "count": r.count,
                "queued": 0,
                "dropped": 0,
                "cycle_last": 0,
                "cycle_max": 0,
                "total_time": r.total_time_us,
                "average_time": no_val(r.total_time_us // r.count if r.count else 0),
            }
            for r in d.rpcs
        ],
        "rpcs_by_user": [
            {
                "user_id": u.uid,
                "user": u.name,
                "count": u.count,
                "total_time": u.total_time_us,
                "average_time": no_val(u.total_time_us // u.count if u.count else 0),
            }
            for u in d.users
        ],
    }
