"""Changing a job the user or an admin names: hold, release, requeue(hold), top, suspend/resume
(ctld/job_suspend.py), and `scontrol update`'s fields. One transaction per request; a job's own refusal is its result line, the others go on."""

from __future__ import annotations

from ctld import job_suspend, top
from ctld import jobs as jobrec
from ctld import reservations as resv
from ctld.errors import (
    ACCESS_DENIED,
    ALREADY_DONE,
    DEPENDENCY_PROBLEM,
    FAILED_PRECONDITION,
    INVALID_JOB_ID,
    INVALID_PARTITION,
    JOB_PENDING,
    NODE_COUNT_INVALID,
    NOT_FOUND,
    PERMISSION_DENIED,
    SlurmError,
)
from ctld.job_select import job_id_str, select
from ctld.record import JobRecord, with_spec
from ctld.sched import reasons
from ctld.sched.dependency import parse_dependency
from ctld.sched.priority import MULTIFACTOR
from ctld.state import Caller, ClusterState, Transaction
from ctld.transitions import requeue, terminate_elsewhere, waits_for_script
from ctld.validate import TASK_COUNT_INVALID
from shoal.arrayspec import INVALID as INVALID_ARRAY
from shoal.states import ACTIVE_STATES
from shoal.timefmt import UNLIMITED, parse_time_limit
from shoal.v1 import controller_pb2, jobs_pb2

PENDING = jobs_pb2.PENDING
COMPLETING = jobs_pb2.COMPLETING
NOT_PENDING = "Job is no longer pending execution"
INVALID_USER = "Invalid user id"


def update_job(
    state: ClusterState, req: controller_pb2.UpdateJobRequest, caller: Caller
) -> controller_pb2.UpdateJobResponse:
    out = controller_pb2.UpdateJobResponse()
    now = state.now()
    with state.transaction() as tx:
        changed: list[JobRecord] = []
        for text, found in select(state, req.job_ids):
            if not found:
                unknown = job_suspend.UNKNOWN_JOB if req.action in job_suspend.ACTIONS else INVALID_JOB_ID
                out.results.add(job_id=text, code=NOT_FOUND, message=unknown)
                continue
            for job in found:
                try:
                    if not state.may_manage(caller, job):
                        raise SlurmError(_not_owner_message(req.action), PERMISSION_DENIED)
                    _update_one(state, tx, job, req, caller, now)
                    if job.state == PENDING and _names_one_task(text, job):
                        job.array_split = True
                    changed.append(job)
                except SlurmError as exc:
                    out.results.add(job_id=job_id_str(job), code=exc.code, message=exc.message)
        if req.action == "top" and changed:
            changed.extend(_top(state, changed))
        tx.save(*changed)
    state.wake.set()
    return out


def _names_one_task(text: str, job: JobRecord) -> bool:
    """`text` names this array task alone (30_2, or the task's own id), not its whole array (30): 22.05
    then splits the task off the array's pending record, a record of its own from then on (scenario 245)."""
    if not job.array_job_id or job.array_task_id < 0:
        return False
    base, sep, _ = text.strip().partition("_")
    return bool(sep) or base.split(".")[0] != str(job.array_job_id)


def _not_owner_message(action: str) -> str:
    """22.05 refuses another user's job with 'Invalid user id' for hold, uhold, release and update,
    but with 'Access/permission denied' for requeue and requeuehold (measured on the running one)."""
    return ACCESS_DENIED if action in ("requeue", "requeuehold") else INVALID_USER


def _update_one(
    state: ClusterState,
    tx: Transaction,
    job: JobRecord,
    req: controller_pb2.UpdateJobRequest,
    caller: Caller,
    now: int,
) -> None:
    action = req.action or "update"
    # a coordinator acts as the job's user, not as an operator: its hold is a user hold that the
    # owner may release (measured on 22.05: JobHeldUser)
    operator = state.is_operator(caller)
    if action in ("hold", "uhold"):
        if job.state != PENDING:
            raise SlurmError(NOT_PENDING, FAILED_PRECONDITION)
        job.held = True
        # an operator's hold is an admin hold, on its own jobs too (root's: JobHeldAdmin, scenario 244)
        job.held_by_admin = action == "hold" and operator
        job.state_reason = reasons.HELD_ADMIN if job.held_by_admin else reasons.HELD_USER
        job.priority = 0
    elif action == "release":
        if job.state != PENDING:
            raise SlurmError(NOT_PENDING, FAILED_PRECONDITION)
        if job.held_by_admin and not operator:
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        job.held = False
        job.held_by_admin = False
        job.state_reason = reasons.NONE
        job.priority_set = False  # as Slurm: release recomputes the priority
    elif action in ("requeue", "requeuehold"):
        _requeue_action(state, tx, job, now, hold=action == "requeuehold")
    elif action in job_suspend.ACTIONS:
        job_suspend.suspend_or_resume(state, tx, job, action, operator, now)
    elif action == "top":
        if job.state != PENDING:
            raise SlurmError(NOT_PENDING, FAILED_PRECONDITION)
        user_top = any(w.strip().lower() == "enable_user_top" for w in state.cfg.scheduler_parameters)
        if not operator and not user_top:
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
    elif action == "update":
        for kv in req.fields:
            _update_field(state, job, kv.key, kv.value, operator)
    else:
        raise SlurmError(f"Invalid update action: {action}")


def _top(state: ClusterState, targets: list[JobRecord]) -> list[JobRecord]:
    """scontrol top: trade nice values inside each target's group (see top.py); returns the others changed."""
    listed = {job.job_id for job in targets}
    changed: list[JobRecord] = []
    groups: dict[tuple[int, str, str, str], list[JobRecord]] = {}
    for job in targets:
        if "," not in job.partition:  # as Slurm: jobs submitted to one partition only
            groups.setdefault((job.user_id, job.partition, job.account, job.qos), []).append(job)
    for key, members in groups.items():
        peers = [
            j
            for j in state.jobs.values()
            if j.state == PENDING
            and not j.held
            and j.job_id not in listed
            and (j.user_id, j.partition, j.account, j.qos) == key
        ]
        queued = {j.job_id: top.Queued(j.job_id, j.priority, j.spec.nice) for j in members + peers}
        nice = top.top_nice([queued[j.job_id] for j in members], [queued[j.job_id] for j in peers])
        for job in members + peers:
            delta = nice[job.job_id] - job.spec.nice
            if delta:
                job.spec = with_spec(job.spec, nice=nice[job.job_id])
                if not job.priority_set:
                    job.priority = max(1, job.priority - delta)
                if job.job_id not in listed:
                    changed.append(job)
    return changed


def _requeue_action(state: ClusterState, tx: Transaction, job: JobRecord, now: int, hold: bool) -> None:
    if not job.batch_flag:
        raise SlurmError("Only batch jobs are accepted or processed", FAILED_PRECONDITION)
    if job.state == PENDING:
        raise SlurmError(JOB_PENDING, FAILED_PRECONDITION)
    if job.state == COMPLETING:
        raise SlurmError(ALREADY_DONE, FAILED_PRECONDITION)
    if job.state in ACTIVE_STATES and not waits_for_script(job):  # during its Prologs (PrologFlags=Alloc)
        terminate_elsewhere(state, tx, job, "requeue")
        requeue(state, tx, job, now, ended_as=jobs_pb2.REQUEUED, ended_at=now)
    elif job.state in ACTIVE_STATES:
        job_suspend.settle(job, now)
        job.state = COMPLETING
        job.final_state = jobs_pb2.REQUEUED
        state.terminate(tx, state.nodes[job.batch_host], job.job_id, state.cfg.kill_wait, "requeue")
    else:
        requeue(state, tx, job, now)
    if hold:
        job.held = True
        job.state_reason = reasons.REQUEUED_HELD
        job.priority = 0


def _update_field(state: ClusterState, job: JobRecord, key: str, value: str, operator: bool) -> None:
    counted_nodes = _tres_nodes(job)  # the node count its memory was figured for, before the change
    k = key.lower()
    pending = job.state == PENDING
    if k == "timelimit":
        try:
            minutes = parse_time_limit(value)
        except ValueError as exc:
            raise SlurmError("Invalid time limit specification") from exc
        if not operator and not _user_may_set_time_limit(state, job, minutes):
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        job.spec = with_spec(job.spec, time_limit_min=minutes)
        if job.state == PENDING:
            job.time_limit_min = minutes
        if job.state in ACTIVE_STATES:
            job.time_limit_min = minutes
            job.end_time = job.start_time + minutes * 60 if minutes >= 0 else 0
        return
    if k in ("name", "jobname"):
        job.spec = with_spec(job.spec, name=value)
        return
    if k == "comment":
        job.spec = with_spec(job.spec, comment=value)
        return
    if k == "nice":
        nice = int(value) if value.isascii() and value.lstrip("-").isdigit() else 0
        if nice < 0 and not operator:
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        job.spec = with_spec(job.spec, nice=nice)
        return
    if k == "sitefactor":
        if not operator:
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        site = int(value) if value.isascii() and value.lstrip("-").isdigit() else 0
        if not job.priority_set and job.priority and state.sched_config.priority.type == MULTIFACTOR:
            # as Slurm, the job's priority moves now (a pending one is recomputed next cycle anyway)
            job.priority = min(max(1, job.priority + site - job.site_factor), 0xFFFFFFFE)
        job.site_factor = site
        return
    if k == "priority":
        if not operator:
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        try:
            priority = int(value)
        except ValueError as exc:
            raise SlurmError("Invalid job priority") from exc
        if priority <= 0:  # as Slurm: Priority=0 holds the job
            job.held, job.held_by_admin, job.state_reason = True, True, reasons.HELD_ADMIN
            job.priority = 0
        else:
            job.priority = min(priority, 0xFFFFFFFE)
            job.priority_set = True
        return
    if k == "requeue":
        job.requeue = value not in ("0", "no")
        return
    if not pending:
        raise SlurmError(NOT_PENDING, FAILED_PRECONDITION)
    if k == "partition":
        for name in value.split(","):
            if name not in state.partitions:
                raise SlurmError(INVALID_PARTITION)
        job.partition = value
        job.spec = with_spec(job.spec, partition=value)
    elif k == "dependency":
        if value in ("", "none", "None"):
            job.spec = with_spec(job.spec, dependency="")
        else:
            try:
                parse_dependency(value)
            except ValueError as exc:
                raise SlurmError(DEPENDENCY_PROBLEM) from exc
            job.spec = with_spec(job.spec, dependency=value)
    elif k in ("numnodes", "minnodes"):
        lo, _, hi = value.partition("-")
        job.spec = with_spec(job.spec, min_nodes=_count(lo, NODE_COUNT_INVALID))
        job.spec = with_spec(job.spec, max_nodes=_count(hi, NODE_COUNT_INVALID) if hi else job.spec.min_nodes)
    elif k in ("numtasks",):
        job.spec = with_spec(job.spec, num_tasks=_count(value, TASK_COUNT_INVALID))
    elif k in ("starttime", "begintime"):
        from shoal.timefmt import parse_datetime

        try:
            job.spec = with_spec(job.spec, begin_time=parse_datetime(value, state.now()))
        except ValueError as exc:
            raise SlurmError("Invalid time specification") from exc
        job.eligible_time = job.spec.begin_time
    elif k == "arraytaskthrottle":
        for other in state.jobs.values():
            if job.array_job_id and other.array_job_id == job.array_job_id:
                other.array_max_tasks = _count(value, INVALID_ARRAY)
    elif k in ("excnodelist",):
        job.spec = with_spec(job.spec, exclude=value)
    elif k in ("reqnodelist", "nodelist"):
        job.spec = with_spec(job.spec, nodelist=value)
    elif k in ("features",):
        job.spec = with_spec(job.spec, constraint=value)
    elif k == "account":
        job.spec = with_spec(job.spec, account=value)
        job.account = value
    elif k == "qos":
        job.spec = with_spec(job.spec, qos=value)
        job.qos = value
    elif k == "reservation":
        previous = job.spec.reservation
        job.spec = with_spec(job.spec, reservation="" if value.lower() in ("", "none", "(null)") else value)
        try:
            resv.check_job_access(state, job)
        except SlurmError:
            job.spec = with_spec(job.spec, reservation=previous)
            raise
    else:
        raise SlurmError(f"Update of this parameter is not supported: {key}")
    req = jobrec.job_request(job, state.nodes, state.cfg)
    node_cpus = jobrec.largest_node_cpus(state.cfg, state.nodes, req.partitions[0])
    jobrec.describe_request(
        job,
        req,
        job.mem_mb // max(1, counted_nodes),
        node_cpus,
        jobrec.usable_node_count(state.cfg, state.nodes, req.partitions[0]),
    )


def _tres_nodes(job: JobRecord) -> int:
    """node= of a pending job's TRES (NumNodes may show more: jobs.expected_nodes)."""
    for word in job.tres_req.split(","):
        key, _, value = word.partition("=")
        if key == "node" and value.isdigit():
            return int(value)
    return job.num_nodes


def _user_may_set_time_limit(state: ClusterState, job: JobRecord, minutes: int) -> bool:
    """22.05, measured: a user may set a pending job's TimeLimit to anything within its partition's
    MaxTime (10 -> 20 and -> 1:00:00 allowed, -> 1:00:01 or UNLIMITED refused under MaxTime=1:00:00;
    any under MaxTime=UNLIMITED), but may only lower a running job's."""
    if job.state == PENDING:
        caps = [
            p.max_time for name in job.partition.split(",") if (p := state.cfg.partition(name)) is not None
        ]
        return all(cap == UNLIMITED or minutes != UNLIMITED and minutes <= cap for cap in caps)
    current = job.time_limit_min
    return minutes != UNLIMITED and (current < 0 or minutes <= current)


def _count(text: str, message: str) -> int:
    """An `scontrol update` count: ASCII digits within 32 bits, else SlurmError(message)."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 10 or int(value) > 2**31 - 1:
        raise SlurmError(message)
    return int(value)
