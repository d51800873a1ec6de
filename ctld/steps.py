"""Job steps in the controller: create (lay out, record, launch on every node), complete, list, end.

Steps live inside their job's record (JobRecord.steps), so they are saved with it in the same
transaction and survive a restart. The layout comes from the pure core (ctld.sched.steps); the
launch on nodes happens outside the controller's lock, in parallel, before srun is answered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ctld import privacy, record
from ctld.errors import (
    ACCESS_DENIED,
    ALREADY_DONE,
    FAILED_PRECONDITION,
    INVALID_JOB_ID,
    JOB_PENDING,
    NOT_FOUND,
    PERMISSION_DENIED,
    SlurmError,
)
from ctld.jobs import parse_gpu_count, parse_gres_gpus
from ctld.launch import batch_request, topology_address
from ctld.record import JobRecord
from ctld.sched import steps as layout
from ctld.state import Caller, ClusterState
from ctld.transitions import derive_exit, end_step, finish, terminate_elsewhere
from ctld.waiting_steps import WAITING_STEP, waiting_record
from shoal import hostlist
from shoal.counts import compress_counts
from shoal.states import FINISHED_STATES
from shoal.timefmt import UNLIMITED
from shoal.v1 import controller_pb2, jobs_pb2, node_pb2

log = logging.getLogger("shoal.ctld.steps")

BATCH_STEP = -4
EXTERN_STEP = -5  # PrologFlags=Contain's `JOBID.extern`
STEP_WORDS = {BATCH_STEP: "batch", EXTERN_STEP: "extern", WAITING_STEP: "TDB"}
OOM_SIGNAL = 125  # Slurm's dummy signal for a task killed for memory (SIG_OOM)
_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="step-launch")


def _busy(job: JobRecord) -> dict[str, frozenset[int]]:
    """The job's cpu ids that running steps hold, per node (a step recorded before steps kept
    their cpu ids holds the lowest ones of its count)."""
    ids: dict[str, Sequence[int]] = {a.node: sorted(a.cpu_ids) or range(a.cpus) for a in job.allocation}
    busy: dict[str, set[int]] = {}
    for step in job.steps:
        if step.state == jobs_pb2.RUNNING and not step.overlap:
            for n in step.layout:
                held = busy.setdefault(n.node, set())
                if n.cpu_ids:
                    held.update(n.cpu_ids)
                else:
                    held.update([c for c in ids.get(n.node, range(n.cpus)) if c not in held][: n.cpus])
    return {name: frozenset(held) for name, held in busy.items()}


def _busy_gpus(job: JobRecord) -> dict[str, frozenset[int]]:
    """GPUs that running steps took by request (a step without one sees all and holds none)."""
    busy: dict[str, set[int]] = {}
    for step in job.steps:
        if step.state == jobs_pb2.RUNNING and not step.overlap:
            for n in step.layout:
                busy.setdefault(n.node, set()).update(n.gpu_indices)
    return {name: frozenset(gpus) for name, gpus in busy.items()}


def _busy_mem(job: JobRecord) -> dict[str, int]:
    """Memory (MB) that running steps hold per node (a step that asked none holds none)."""
    busy: dict[str, int] = {}
    for step in job.steps:
        if step.state == jobs_pb2.RUNNING and not step.overlap:
            for n in step.layout:
                busy[n.node] = busy.get(n.node, 0) + n.mem_mb
    return busy


def _gpu_counts(req: controller_pb2.CreateStepRequest, job: JobRecord) -> tuple[int, int, int]:
    """(per node, total, per task) GPUs the step asks; a type must be the job's."""
    per_node = total = per_task = 0
    wanted: list[str] = []
    if req.gres:
        gpu_type, per_node = parse_gres_gpus(req.gres)
        wanted.append(gpu_type)
    if req.gpus_per_node:
        gpu_type, per_node = parse_gpu_count(req.gpus_per_node)
        wanted.append(gpu_type)
    if req.gpus:
        gpu_type, total = parse_gpu_count(req.gpus)
        wanted.append(gpu_type)
    if req.gpus_per_task:
        gpu_type, per_task = parse_gpu_count(req.gpus_per_task)
        wanted.append(gpu_type)
    have = {a.gpu_type for a in job.allocation if a.gpu_indices}
    if any(t and t not in have for t in wanted):
        raise SlurmError(layout.INVALID_GRES)
    return per_node, total, per_task


def layout_request(req: controller_pb2.CreateStepRequest, job: JobRecord) -> layout.StepRequest:
    """srun's request in the pure core's terms (hostlists expanded, GPU counts parsed)."""
    try:
        nodelist = tuple(hostlist.expand(req.nodelist)) if req.nodelist else ()
        exclude = tuple(hostlist.expand(req.exclude)) if req.exclude else ()
    except hostlist.HostlistError as exc:
        raise SlurmError("Invalid node name specified") from exc
    per_node, total, per_task = _gpu_counts(req, job)
    return layout.StepRequest(
        gpus_per_node=per_node,
        gpus_total=total,
        gpus_per_task=per_task,
        min_nodes=req.min_nodes,
        max_nodes=req.max_nodes,
        num_tasks=req.num_tasks,
        ntasks_per_node=req.ntasks_per_node,
        cpus_per_task=req.cpus_per_task or 1,
        tasks_from_cpus=not req.num_tasks and not req.ntasks_per_node and req.cpus_per_task > 0,
        nodelist=nodelist,
        exclude=exclude,
        distribution=req.distribution,
        overlap=req.overlap,
        exclusive=req.exclusive,
        overcommit=req.overcommit,
        exact=req.exact,
        mem_per_node_mb=req.mem_per_node_mb,
        mem_per_cpu_mb=req.mem_per_cpu_mb,
    )


def create_step(
    state: ClusterState, req: controller_pb2.CreateStepRequest, caller: Caller
) -> controller_pb2.CreateStepResponse:
    """Lay out and record a step, then start its tasks on every node of it."""
    now = state.now()
    with state.transaction() as tx:
        job = state.jobs.get(req.job_id)
        if job is None:
            raise SlurmError(INVALID_JOB_ID, NOT_FOUND)
        if job.user_id != caller.uid and not state.is_operator(caller):
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        if job.state == jobs_pb2.PENDING:
            raise SlurmError(JOB_PENDING, FAILED_PRECONDITION)
        if job.state != jobs_pb2.RUNNING:
            raise SlurmError(ALREADY_DONE, FAILED_PRECONDITION)
        alloc = [
            layout.AllocNode(a.node, a.cpus, tuple(a.gpu_indices), tuple(a.cpu_ids), a.mem_mb)
            for a in job.allocation
        ]
        try:
            found = layout.layout_step(
                alloc, _busy(job), layout_request(req, job), _busy_gpus(job), _busy_mem(job)
            )
        except layout.StepRefused as exc:
            if exc.retry:
                waiting = waiting_record(req, job.nodes, job.partition, job.user_id)
                state.waiting_steps.note(waiting, now)
                return controller_pb2.CreateStepResponse(retry=True, message=exc.message)
            state.waiting_steps.drop(req.job_id, req.srun_host, req.srun_pid)
            raise SlurmError(exc.message) from exc
        state.waiting_steps.drop(req.job_id, req.srun_host, req.srun_pid)
        step = jobs_pb2.JobStep()
        job.steps.append(step)
        step.step_id = job.next_step_id
        job.next_step_id += 1
        fill_step(step, job, req, found, now, lambda name: state.nodes[name].info.addr or name)
        tx.save(job)
        launches = [(state.nodes[n].info, _launch_request(state, job, step, n)) for n in found.nodes]
        answer_job = record.wire(job, steps=False)
        answer_step = jobs_pb2.JobStep()
        answer_step.CopyFrom(step)
    errors = list(_POOL.map(lambda nr: state.actions.launch_tasks(nr[0], nr[1]), launches))
    failed = [(info.name, e) for (info, _), e in zip(launches, errors, strict=True) if e]
    if failed:
        for info, _ in launches:
            state.actions.signal_step(info, answer_step.job_id, answer_step.step_id, 0)
        complete_step(
            state,
            controller_pb2.CompleteStepRequest(
                job_id=answer_step.job_id, step_id=answer_step.step_id, exit_code=1
            ),
            caller,
        )
        name, message = failed[0]
        raise SlurmError(
            f"Task launch for StepId={answer_step.job_id}.{answer_step.step_id} failed on node {name}: {message}"
        )
    return controller_pb2.CreateStepResponse(step=answer_step, job=answer_job, kill_wait=state.cfg.kill_wait)


def fill_step(
    step: jobs_pb2.JobStep,
    job: JobRecord,
    req: controller_pb2.CreateStepRequest,
    found: layout.StepLayout,
    now: int,
    addr_of: Callable[[str], str],
) -> None:
    """The step record for `found` (its id already set): what the nodes launch and squeue shows."""
    step.job_id = job.job_id
    step.name = req.name or (req.launch.argv[0].rsplit("/", 1)[-1] if req.launch.argv else job.spec.name)
    step.job_name = job.spec.name
    step.state = jobs_pb2.RUNNING
    step.nodes = hostlist.collect(found.nodes)
    step.num_nodes = len(found.nodes)
    step.num_tasks = found.num_tasks
    step.num_cpus = sum(found.cpus)
    step.start_time = now
    step.user_id = job.user_id
    step.user_name = job.user_name
    step.partition = job.partition
    # its own (srun -t), which ctld.step_limits enforces; 22.05 shows UNLIMITED without one, not the job's
    step.time_limit_min = req.time_limit_min if req.time_limit_min > 0 else UNLIMITED
    step.srun_host = req.srun_host
    step.srun_pid = req.srun_pid
    step.tasks_per_node = compress_counts([len(t) for t in found.task_ids])
    step.distribution = f"plane={found.plane_size}" if found.plane_size else found.distribution
    step.cpus_per_task = req.cpus_per_task  # 0 = no -c (22.05 says SLURM_CPUS_PER_TASK=1 for -c1)
    step.overlap = req.overlap
    step.launch.CopyFrom(req.launch)
    held = {a.node: len(a.gpu_indices) for a in job.allocation}
    job_mem = {a.node: a.mem_mb for a in job.allocation}
    for name, ids, cpu_ids, gpus, mem in zip(
        found.nodes, found.task_ids, found.cpu_ids, found.gpus, found.mem_mb, strict=True
    ):
        step.layout.add(
            node=name,
            addr=addr_of(name),
            task_ids=ids,
            cpus=len(cpu_ids),
            cpu_ids=cpu_ids,
            gpu_indices=gpus,
            mem_mb=mem,
        )
        step.num_gpus += len(gpus) if found.gpus_requested else held.get(name, 0)
        step.mem_mb += mem or job_mem.get(name, 0)  # 22.05: a step that asks none holds the job's


def _launch_request(
    state: ClusterState, job: JobRecord, step: jobs_pb2.JobStep, node: str
) -> node_pb2.LaunchTasksRequest:
    batch = batch_request(state, job)
    addr, pattern = topology_address(state.cfg, node)
    lean = record.wire(job, steps=False)
    lean.spec.script = b""
    return node_pb2.LaunchTasksRequest(
        node=node,
        job=lean,
        step=step,
        credential=batch.credential,
        cluster_name=batch.cluster_name,
        ctld_addr=batch.ctld_addr,
        kill_wait=batch.kill_wait,
        slurm_conf=batch.slurm_conf,
        topology_addr=addr,
        topology_addr_pattern=pattern,
    )


def _find(job: JobRecord, step_id: int) -> jobs_pb2.JobStep | None:
    return next((s for s in job.steps if s.step_id == step_id), None)


def complete_step(
    state: ClusterState, req: controller_pb2.CompleteStepRequest, caller: Caller
) -> controller_pb2.CompleteStepResponse:
    """srun reports that every task of a step has ended; it is told whether ctld ended it at its own
    time limit (srun then says so, as 22.05's stepd does)."""
    with state.transaction() as tx:
        job = state.jobs.get(req.job_id)
        if job is None:
            raise SlurmError(INVALID_JOB_ID, NOT_FOUND)
        if job.user_id != caller.uid and not state.is_operator(caller):
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        step = _find(job, req.step_id)
        if step is None or step.state != jobs_pb2.RUNNING:
            return controller_pb2.CompleteStepResponse()
        exit_code, exit_signal = req.exit_code, req.exit_signal
        if step.timed_out_at:  # ended at its own limit: TIMEOUT, 0:15 for a task SIGTERM ended (22.05)
            end = jobs_pb2.TIMEOUT
            if req.task_signal:
                exit_code, exit_signal = 0, req.task_signal
        elif req.cancelled:
            end = jobs_pb2.CANCELLED
        elif req.oom:  # sacct shows Slurm's OUT_OF_MEMORY 0:125 (its dummy OOM signal)
            end, exit_code, exit_signal = jobs_pb2.OUT_OF_MEMORY, 0, OOM_SIGNAL
        elif (
            req.task_signal
        ):  # 22.05: a task killed by a signal (TERM, KILL, INT, USR1 ...) -> CANCELLED 0:sig
            end, exit_code, exit_signal = jobs_pb2.CANCELLED, 0, req.task_signal
        elif req.exit_code or req.exit_signal:
            end = jobs_pb2.FAILED
        else:
            end = jobs_pb2.COMPLETED
        step.usage.CopyFrom(req.usage)
        end_step(step, end, exit_code, exit_signal, state.now())
        derive_exit(job, step)
        tx.save(job)
        return controller_pb2.CompleteStepResponse(timed_out_at=step.timed_out_at)


def complete_allocation(
    state: ClusterState, req: controller_pb2.CompleteAllocationRequest, caller: Caller
) -> None:
    """salloc's (or srun's own) allocation is released: the job ends with the command's status."""
    with state.transaction() as tx:
        job = state.jobs.get(req.job_id)
        if job is None:
            raise SlurmError(INVALID_JOB_ID, NOT_FOUND)
        if job.user_id != caller.uid and not state.is_operator(caller):
            raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
        if job.state in FINISHED_STATES:
            return
        if job.state == jobs_pb2.PENDING:
            finish(state, job, jobs_pb2.CANCELLED, 0, 0, state.now())
        else:
            terminate_elsewhere(state, tx, job, "complete")
            failed = req.exit_code or req.exit_signal
            end = jobs_pb2.FAILED if failed else jobs_pb2.COMPLETED
            finish(state, job, end, req.exit_code, req.exit_signal, state.now())
        tx.save(job)
    state.wake.set()


def _step_id_text(step: jobs_pb2.JobStep) -> str:
    return f"{step.job_id}.{STEP_WORDS.get(step.step_id, step.step_id)}"


def _extern_step(job: JobRecord) -> jobs_pb2.JobStep:
    """PrologFlags=Contain's extern step: the job's whole allocation, one task per node, from the job's
    start while it holds its nodes (22.05 lists it in squeue -s and scontrol show step, after .batch)."""
    holding = job.state in (jobs_pb2.RUNNING, jobs_pb2.COMPLETING, jobs_pb2.SUSPENDED)
    return jobs_pb2.JobStep(
        job_id=job.job_id,
        step_id=EXTERN_STEP,
        name="extern",
        job_name=job.spec.name,
        state=jobs_pb2.RUNNING if holding else jobs_pb2.COMPLETED,
        nodes=job.nodes,
        num_nodes=job.num_nodes,
        num_tasks=job.num_nodes,
        num_cpus=job.num_cpus,
        start_time=job.start_time,
        end_time=0 if holding else job.end_time,
        user_id=job.user_id,
        user_name=job.user_name,
        partition=job.partition,
        time_limit_min=job.time_limit_min,
    )


def _batch_step(job: JobRecord) -> jobs_pb2.JobStep:
    return jobs_pb2.JobStep(
        job_id=job.job_id,
        step_id=BATCH_STEP,
        name="batch",
        job_name=job.spec.name,
        # RUNNING while its job is COMPLETING or SUSPENDED (22.05's squeue -s and scontrol show step)
        state=jobs_pb2.RUNNING if job.state in (jobs_pb2.COMPLETING, jobs_pb2.SUSPENDED) else job.state,
        nodes=job.batch_host,
        num_nodes=1,
        num_tasks=1,
        num_cpus=job.allocation[0].cpus if job.allocation else 0,
        start_time=job.start_time,
        end_time=job.end_time if job.state in FINISHED_STATES else 0,
        exit_code=job.exit_code,
        exit_signal=job.exit_signal,
        user_id=job.user_id,
        user_name=job.user_name,
        partition=job.partition,
        time_limit_min=UNLIMITED,  # 22.05 (squeue -s %l, scontrol show step): not the job's limit
    )


def suspended_during(job: JobRecord, since: int, now: int) -> int:
    """Seconds since `since` (a running step's start) that the job spent SUSPENDED: 22.05 stops a step's
    TIME while its job is suspended. Earlier suspensions are one total, so count them only up to the
    step's own wall time (exact for the usual step started with its job)."""
    ongoing = max(now - max(job.suspend_time, since), 0) if job.state == jobs_pb2.SUSPENDED else 0
    return min(job.suspended_secs, max(now - since - ongoing, 0)) + ongoing


def get_steps(
    state: ClusterState, req: controller_pb2.GetStepsRequest, caller: Caller | None = None
) -> controller_pb2.GetStepsResponse:
    """Steps of every job the caller may see (running ones only unless include_finished), batch steps
    included."""
    wanted: dict[int, set[str]] = {}
    for text in req.step_ids:
        job_text, _, step_text = text.strip().partition(".")
        if not job_text.isdigit():
            raise SlurmError(INVALID_JOB_ID)
        wanted.setdefault(int(job_text), set()).add(step_text)
    out = controller_pb2.GetStepsResponse(now=state.now())
    with state.reading():
        owner = privacy.viewer(state, caller)
        for job in state.jobs.values():
            if (wanted and job.job_id not in wanted) or not privacy.sees(owner, job):
                continue
            candidates: list[jobs_pb2.JobStep] = []
            if job.extern_step and job.start_time and job.nodes:
                candidates.append(_extern_step(job))
            if job.batch_flag and job.start_time and job.batch_host:
                candidates.append(_batch_step(job))
            candidates.extend(job.steps)
            if not req.include_finished:
                candidates = [s for s in candidates if s.state == jobs_pb2.RUNNING]
            if req.include_waiting and job.state == jobs_pb2.RUNNING:
                candidates.extend(state.waiting_steps.of_job(job.job_id, out.now))
            for step in candidates:
                names = wanted.get(job.job_id)
                if names and "" not in names and _step_id_text(step).partition(".")[2] not in names:
                    continue
                shown = out.steps.add()
                shown.CopyFrom(step)
                shown.launch.ClearField("environment")
                if step.state == jobs_pb2.RUNNING:
                    shown.suspended_secs = suspended_during(job, step.start_time, out.now)
    return out
