"""What runs on the nodes now: every GPU's state and every running step's usage, from the nodes'
ping answers, kept in ctld's memory only (a restart forgets them until the next pings); the
GetLiveUsage query (restd's /metrics/gpus and /shoal/v1/gpus, sstat); and idle-GPU detection in
housekeeping, which applies ctld/gpu_idle.py's decisions (flag, notify, cancel).

Pings come every SlurmdTimeout/3 s (at most 30), so a step that has just started is in no answer yet:
a GetLiveUsage for given jobs (sstat) first pings, at once, the nodes whose last answer lacks a young
step of theirs (the batch script, an srun step, started FRESH_AGE_S ago at most), and waits for those
answers FRESH_WAIT_S at the most before it answers with what it has. Memory only, as every ping answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence

from ctld import gpu_idle, job_hooks, privacy
from ctld.job_lifecycle import cancel_running
from ctld.record import JobRecord
from ctld.state import Caller, ClusterState, Transaction, user_name
from shoal import hostlist
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2, node_pb2

log = logging.getLogger("shoal.ctld")
GPU_IDLE_REASON = "gpu_idle"  # TerminateJob's reason: noded tells the job's stderr why it ends
FRESH_AGE_S = 30  # a step this young that its node's last answer lacks makes GetLiveUsage ping the node
FRESH_WAIT_S = 2.0  # the longest GetLiveUsage waits for those answers
BATCH_STEP = -4


def record(state: ClusterState, name: str, reply: node_pb2.NodePingResponse) -> None:
    """A node's ping answer: its GPUs and running steps replace what it said before."""
    with state.reading():  # memory only: nothing is saved
        node = state.nodes.get(name)
        if node is None:
            return
        node.gpus = list(reply.gpus)
        node.steps = list(reply.steps)
        node.live_at = state.now()


def _expected_steps(job: JobRecord, now: int) -> dict[str, set[int]]:
    """node -> the young steps of a running job that node runs: its batch script (on the first node)
    and its srun steps, each started FRESH_AGE_S ago at most."""
    out: dict[str, set[int]] = {}
    if job.state != jobs_pb2.RUNNING or not job.allocation:
        return out
    if job.spec.batch and now - job.start_time <= FRESH_AGE_S:
        out.setdefault(job.allocation[0].node, set()).add(BATCH_STEP)
    for step in job.steps:
        if step.state == jobs_pb2.RUNNING and step.step_id >= 0 and now - step.start_time <= FRESH_AGE_S:
            for name in hostlist.expand(step.nodes) if step.nodes else ():
                out.setdefault(name, set()).add(step.step_id)
    return out


def stale_nodes(state: ClusterState, job_ids: Iterable[int]) -> list[cluster_pb2.NodeInfo]:
    """The nodes whose last ping answer lacks a young step of these jobs there."""
    now = state.now()
    out: dict[str, cluster_pb2.NodeInfo] = {}
    with state.reading():
        for job_id in sorted(set(job_ids)):
            job = state.jobs.get(job_id)
            if job is None:
                continue
            for name, steps in _expected_steps(job, now).items():
                node = state.nodes.get(name)
                if node is None or name in out or not node.registered or node.info.not_responding:
                    continue
                known = {s.step_id for s in node.steps if s.job_id == job_id}
                if steps - known:
                    out[name] = node.info
    return [out[name] for name in sorted(out)]


def refresh(state: ClusterState, job_ids: Iterable[int], wait_s: float = FRESH_WAIT_S) -> None:
    """Ping now the nodes that have not yet told of a young step of these jobs, until they have or
    `wait_s` has passed; their answers replace what they said before (nothing is saved)."""
    deadline = time.monotonic() + wait_s
    nodes = stale_nodes(state, job_ids)
    answered = threading.Semaphore(0)

    def on_answer(
        name: str,
        ok: bool,
        running: Sequence[int] | None,
        reply: node_pb2.NodePingResponse | None = None,
    ) -> None:
        if ok and reply is not None:
            record(state, name, reply)
        answered.release()

    while nodes:
        for info in nodes:
            state.actions.ping(info, state.incarnation, on_answer)
        for _ in nodes:
            if not answered.acquire(timeout=max(0.0, deadline - time.monotonic())):
                return
        nodes = stale_nodes(state, job_ids)  # a step whose tasks were still starting: once more
        if nodes and not _pause(deadline):
            return


def _pause(deadline: float, seconds: float = 0.2) -> bool:
    """Sleep a moment before the next try; False when the deadline leaves no time for one."""
    left = deadline - time.monotonic()
    if left <= seconds:
        return False
    time.sleep(seconds)
    return True


def _holders(jobs: Iterable[JobRecord]) -> dict[tuple[str, int], JobRecord]:
    """(node, GPU index) -> the running job allocated it."""
    out: dict[tuple[str, int], JobRecord] = {}
    for job in jobs:
        if job.state in (jobs_pb2.RUNNING, jobs_pb2.SUSPENDED, jobs_pb2.COMPLETING):
            for a in job.allocation:
                for index in a.gpu_indices:
                    out[(a.node, index)] = job
    return out


def query(
    state: ClusterState, req: controller_pb2.GetLiveUsageRequest, caller: Caller | None = None
) -> controller_pb2.GetLiveUsageResponse:
    """The GPUs (each with its holding job, user and idle flag) and the steps' usage; under
    PrivateData=jobs a GPU held by another user's job is only `allocated` (no job, user or idle
    flag: node state is not private, as sinfo's), and that job's steps and state are left out."""
    out = controller_pb2.GetLiveUsageResponse(now=state.now())
    with state.reading():
        only = privacy.viewer(state, caller)
        held = _holders(state.jobs.values())
        holders = {key: job for key, job in held.items() if privacy.sees(only, job)}
        readings = {(name, g.index): g for name, node in state.nodes.items() for g in node.gpus}
        if req.gpus:
            for name in sorted(state.nodes):
                for gpu in state.nodes[name].gpus:
                    shown = out.gpus.add()
                    shown.CopyFrom(gpu)
                    shown.node = name
                    job = holders.get((name, gpu.index))
                    shown.job_id = job.job_id if job is not None else 0  # ctld's allocation decides
                    shown.allocated = (name, gpu.index) in held
                    if job is not None:
                        shown.user = job.user_name or user_name(job.user_id)
                        idle = state.gpu_idle.get(job.job_id)
                        if idle is not None and idle.flagged_at:
                            shown.idle = True
                            shown.idle_since = idle.idle_since
        wanted = set(req.job_ids)
        for job_id in wanted:
            job = state.jobs.get(job_id)
            if job is not None and privacy.sees(only, job):
                out.job_states[job_id] = job.state
        if req.steps:
            for name in sorted(state.nodes):
                for step in state.nodes[name].steps:
                    if wanted and step.job_id not in wanted:
                        continue
                    owner = state.jobs.get(step.job_id)
                    if only is not None and (owner is None or not privacy.sees(only, owner)):
                        continue
                    usage = out.steps.add()
                    usage.CopyFrom(step)
                    usage.node = name
                    alloc = next((a for a in owner.allocation if a.node == name), None) if owner else None
                    gpus = (
                        [readings[(name, i)] for i in alloc.gpu_indices if (name, i) in readings]
                        if alloc
                        else []
                    )
                    utils = [g.utilization for g in gpus if g.utilization >= 0]
                    usage.gpu_util = round(sum(utils) / len(utils)) if utils else -1
                    usage.gpu_mem_mb = sum(max(g.memory_used_mb, 0) for g in gpus)
    return out


def _job_utilizations(state: ClusterState, job: JobRecord) -> tuple[list[int], int]:
    """The utilization of each GPU of the job, as its nodes last said, and when the latest said it."""
    utils: list[int] = []
    at = 0
    for a in job.allocation:
        node = state.nodes.get(a.node)
        if node is None or not a.gpu_indices:
            continue
        by_index = {g.index: g for g in node.gpus}
        for index in a.gpu_indices:
            gpu = by_index.get(index)
            if gpu is not None:
                utils.append(gpu.utilization)
                at = max(at, node.live_at)
    return utils, at


def enforce_gpu_idle(state: ClusterState, tx: Transaction, now: int) -> None:
    """Housekeeping: each running GPU job's idle state after its latest sample, and what the site's
    policy does about it (SchedulerParameters shoal_gpu_idle_*)."""
    policy = state.gpu_idle_policy
    tracked: set[int] = set()
    if policy.enabled:
        for job in state.jobs.values():
            if job.state != jobs_pb2.RUNNING or job.final_state or job.gpu_idle_cancelled:
                continue
            utils, at = _job_utilizations(state, job)
            if not utils:
                continue
            tracked.add(job.job_id)
            before = state.gpu_idle.get(job.job_id) or gpu_idle.IdleState(  # after a restart: as saved
                idle_since=job.gpu_idle_since,
                flagged_at=now if job.gpu_idle_since else 0,
                notified=job.gpu_idle_notified,
            )
            after, actions = gpu_idle.decide(policy, before, gpu_idle.job_sample(utils, at), now)
            state.gpu_idle[job.job_id] = after
            for action in actions:
                _apply(state, tx, job, action, after, now)
    for job_id in set(state.gpu_idle) - tracked:
        ended = state.jobs.get(job_id)
        if ended is None or ended.state != jobs_pb2.RUNNING or not policy.enabled:
            del state.gpu_idle[job_id]


def _apply(
    state: ClusterState,
    tx: Transaction,
    job: JobRecord,
    action: gpu_idle.Action,
    idle: gpu_idle.IdleState,
    now: int,
) -> None:
    policy = state.gpu_idle_policy
    if action is gpu_idle.Action.FLAG:
        log.info("job %d: its GPUs idle (under %d%%) since %d", job.job_id, policy.threshold, idle.idle_since)
        job.gpu_idle_since = idle.idle_since
    elif action is gpu_idle.Action.UNFLAG:
        log.info("job %d: its GPUs are busy again", job.job_id)
        job.gpu_idle_since = 0
    elif action is gpu_idle.Action.NOTIFY and not job.gpu_idle_notified:
        job.gpu_idle_notified = True
        job_hooks.gpu_idle_notify(state.cfg, job, policy.notify, idle.idle_since)  # on a thread of its own
    elif action is gpu_idle.Action.CANCEL:
        log.info(
            "job %d cancelled: its GPUs idle since %d, flagged %ds ago",
            job.job_id,
            idle.idle_since,
            now - idle.flagged_at,
        )
        job.gpu_idle_cancelled = True
        cancel_running(state, tx, job, state.slurm_uid, now, GPU_IDLE_REASON)
    tx.save(job)
