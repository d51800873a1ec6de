"""Which jobs a request names: user-typed ids ('12', '30_2', '30_[1-3]', '30') and scancel's filters.
Read-only over the cluster state; callers hold its lock."""

from __future__ import annotations

from collections.abc import Iterable

from ctld.errors import INVALID_JOB_ID, SlurmError
from ctld.record import JobRecord
from ctld.state import ClusterState
from shoal import hostlist
from shoal.arrayspec import parse_array
from shoal.states import FINISHED_STATES, parse_job_states
from shoal.v1 import controller_pb2


def job_id_str(job: JobRecord) -> str:
    """The id a user reads: `array_task` for an array's task, else the job id."""
    if job.array_job_id and job.array_task_id >= 0:
        return f"{job.array_job_id}_{job.array_task_id}"
    return str(job.job_id)


def select(state: ClusterState, ids: Iterable[str]) -> list[tuple[str, list[JobRecord]]]:
    """Resolve user-typed ids ('12', '30_2', '30_[1-3]', '30') to jobs; unknown -> empty list."""
    out = []
    for text in ids:
        text = text.strip()
        base, _, task = text.partition("_")
        base = base.split(".")[0]
        if not base.isdigit():
            raise SlurmError(INVALID_JOB_ID)
        jid = int(base)
        if task:
            task = task.strip("[]")
            try:
                tasks = set(parse_array(task.split("%")[0], 1 << 31).task_ids)
            except ValueError as exc:
                raise SlurmError(INVALID_JOB_ID) from exc
            found = [j for j in state.jobs.values() if j.array_job_id == jid and j.array_task_id in tasks]
        else:
            found = [
                j for j in state.jobs.values() if j.job_id == jid or (j.array_job_id == jid and jid != 0)
            ]
            direct = state.jobs.get(jid)
            if direct is not None and direct.array_job_id and direct.array_job_id != jid:
                found = [direct]  # a task's own job id names only that task
        out.append((text, found))
    return out


def filtered(state: ClusterState, req: controller_pb2.SignalJobsRequest) -> list[JobRecord]:
    """The live jobs scancel's filters (--user, --name, --state, --partition, --account, -w) select."""
    states: set[int] | None = None
    if req.states:
        try:
            states = parse_job_states(",".join(req.states))
        except ValueError as exc:
            raise SlurmError(str(exc)) from exc
    try:
        nodes = set(hostlist.expand(req.nodelist)) if req.nodelist else None
    except hostlist.HostlistError as exc:
        raise SlurmError("Invalid node name specified") from exc
    out = []
    for job in state.jobs.values():
        if job.state in FINISHED_STATES:
            continue
        if req.filter_user and job.user_id != req.user_id:
            continue
        if req.name and job.spec.name != req.name:
            continue
        if states is not None and job.state not in states:
            continue
        if req.partition and job.partition not in req.partition.split(","):
            continue
        if req.account and job.account != req.account:
            continue
        if nodes is not None and not nodes.intersection(a.node for a in job.allocation):
            continue
        out.append(job)
    return out
