"""What the web view's pages show, built from ctld's answers (pure: no I/O, no clock).

Each function returns plain JSON the page's script draws as it is: the GPU grid (who holds which GPU,
from ctld's allocation, the GRES IDX of `scontrol -d show job`), the queue (squeue's states, reasons
and `--start` times) and the fair-share tree (sshare's figures).
"""

from __future__ import annotations

from typing import Any

from shoal.sharefmt import share_cell
from shoal.states import FINISHED_STATES, job_state_name
from shoal.timefmt import format_limit_squeue, format_timestamp
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2

Json = dict[str, Any]
HOLDS_GPUS = (jobs_pb2.RUNNING, jobs_pb2.SUSPENDED, jobs_pb2.COMPLETING)  # as scontrol -d's GRES IDX


def job_id_text(job: jobs_pb2.JobInfo) -> str:
    """The id squeue prints: 12 or, for an array task, 10_3."""
    if job.array_job_id and job.array_task_id >= 0:
        return f"{job.array_job_id}_{job.array_task_id}"
    if job.array_job_id and job.array_task_str:
        return f"{job.array_job_id}_[{job.array_task_str}]"
    return str(job.job_id)


def _gpu_type(gres: str) -> str:
    """ "gpu:h100:8" -> "h100"; "gpu:8" -> ""."""
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) == 3:
            return parts[1]
    return ""


def _gpu_indices(node: cluster_pb2.NodeInfo) -> list[int]:
    """The node's GPUs: those it registered, else as many as slurm.conf gives it."""
    found = sorted({g.index for g in node.hardware.gpus})
    return found if len(found) >= node.total_gpus else list(range(node.total_gpus))


def _used_gpus(gres_used: str) -> set[int]:
    """The indices of GresUsed's IDX ('gpu:h100:2(IDX:0-1,3)'): every job's, those PrivateData hides too."""
    used: set[int] = set()
    for item in gres_used.split("),"):
        _, found, ids = item.partition("(IDX:")
        for part in ids.rstrip(")").split(",") if found else ():
            low, _, high = part.partition("-")
            if low.isdigit() and (not high or high.isdigit()):
                used.update(range(int(low), int(high or low) + 1))
    return used


def gpu_grid(nodes: controller_pb2.GetNodesResponse, jobs: controller_pb2.GetJobsResponse) -> Json:
    """Each node's GPUs with the job and user holding each; a GPU held by a job the viewer may not see
    (PrivateData=jobs) is `held` with no job or user, as sinfo still counts it allocated."""
    holders: dict[tuple[str, int], jobs_pb2.JobInfo] = {}
    for job in jobs.jobs:
        if job.state in HOLDS_GPUS:
            for alloc in job.allocation:
                for index in alloc.gpu_indices:
                    holders[(alloc.node, index)] = job
    out = []
    for node in nodes.nodes:
        kind = _gpu_type(node.gres)
        used = _used_gpus(node.gres_used)
        gpus = []
        for index in _gpu_indices(node):
            holder = holders.get((node.name, index))
            gpus.append(
                {
                    "index": index,
                    "type": kind,
                    "held": holder is not None or index in used,
                    "job_id": job_id_text(holder) if holder else "",
                    "user": holder.user_name if holder else "",
                    "job_name": holder.spec.name if holder else "",
                }
            )
        out.append(
            {
                "name": node.name,
                "state": node.state or node.base_state,
                "reason": node.reason,
                "cpus": node.cpus,
                "alloc_cpus": node.alloc_cpus,
                "partitions": list(node.partitions),
                "gpus": gpus,
            }
        )
    return {"nodes": out, "now": jobs.now}


def _planned_start(job: jobs_pb2.JobInfo) -> int:
    """squeue --start's START_TIME: the planned start, never before a --begin time."""
    if job.state == jobs_pb2.PENDING and job.spec.begin_time > job.start_time:
        return job.spec.begin_time
    return max(job.start_time, 0)


def queue(jobs: controller_pb2.GetJobsResponse) -> Json:
    """squeue's jobs (the unfinished ones), in its default order: running first, then by priority."""
    listed = [j for j in jobs.jobs if j.state not in FINISHED_STATES]
    listed.sort(key=lambda j: (j.state == jobs_pb2.PENDING, -j.priority, j.job_id))
    rows = []
    for job in listed:
        pending = job.state == jobs_pb2.PENDING
        rows.append(
            {
                "job_id": job_id_text(job),
                "id": job.job_id,
                "name": job.spec.name,
                "user": job.user_name,
                "account": job.account,
                "partition": job.partition,
                "state": job_state_name(job.state),
                "reason": job.state_reason if pending else "",
                "nodes": job.nodes,
                "planned_nodes": job.sched_nodes if pending else "",
                "submit": format_timestamp(int(job.submit_time), unknown="N/A"),
                "start": format_timestamp(_planned_start(job), unknown="N/A"),
                "time_limit": format_limit_squeue(int(job.time_limit_min)),
                "gpus": job.num_gpus,
                "priority": job.priority,
            }
        )
    return {"jobs": rows, "now": jobs.now}


SHARE_COLUMNS = ("raw_shares", "norm_shares", "raw_usage", "effective_usage", "fairshare")


def shares(resp: controller_pb2.GetSharesResponse) -> Json:
    """sshare -a's rows, account tree order, each cell as sshare prints it."""
    rows = [
        {
            "account": row.account,
            "user": row.user,
            "depth": row.depth,
            **{column: share_cell(row, column, parsable=True) for column in SHARE_COLUMNS},
        }
        for row in resp.rows
    ]
    return {"shares": rows}
