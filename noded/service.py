"""The NodeAgent gRPC service: thin wrappers from messages to the launcher and the job table.

One servicer serves every node of the process; each request names its node. Both launches are
wrapped by `_launch_errors`, the one mapping of a refused or failed launch to a gRPC status.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import grpc

from noded import job_hooks, jobs, live, reboot, suspend, tasks
from noded.discovery import cpu_load, free_memory_mb
from noded.launcher import LaunchFailed, LaunchRefused, launch_batch
from noded.node import HostedNode
from shoal import hostlist
from shoal.auth.errors import AuthError
from shoal.auth.job_credential import INVALID_JOB, verify_job_credential
from shoal.rpc.server import current_caller
from shoal.v1 import cluster_pb2, node_pb2, node_pb2_grpc

log = logging.getLogger("shoal.noded")

PERMISSION_DENIED = "Access/permission denied"
# TerminateJob reasons for a run ctld knows to have ended or not to be here: no cancel marker
UNMARKED_REASONS = ("ended", "orphan")
# TerminateJob reasons the job's stderr is told of: its time limit (22.05's words), and shoal's own
# SchedulerParameters shoal_gpu_idle_cancel
CANCEL_NOTES = {"timeout": "TIME LIMIT", "gpu_idle": "IDLE GPUS"}

Launch = TypeVar("Launch", node_pb2.LaunchBatchRequest, node_pb2.LaunchTasksRequest)
Resp = TypeVar("Resp")
LaunchMethod = Callable[["NodeAgentService", Launch, grpc.ServicerContext], Resp]


def _launch_errors(method: LaunchMethod[Launch, Resp]) -> LaunchMethod[Launch, Resp]:
    """Answer LaunchRefused as FAILED_PRECONDITION and LaunchFailed as INTERNAL (logged: the node's
    fault, not the job's), the exception's text as the details."""

    @functools.wraps(method)
    def wrapper(self: NodeAgentService, request: Launch, context: grpc.ServicerContext) -> Resp:
        try:
            return method(self, request, context)
        except LaunchRefused as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
            raise  # abort raises; this line is for the type checker
        except LaunchFailed as exc:
            if isinstance(request, node_pb2.LaunchTasksRequest):
                what = f"step {request.job.job_id}.{request.step.step_id}"
            else:
                what = f"job {request.job.job_id}"
            log.error("%s: %s: %s", request.node, what, exc)
            context.abort(grpc.StatusCode.INTERNAL, str(exc))
            raise

    return wrapper


class NodeAgentService(node_pb2_grpc.NodeAgentServicer):
    """Launch, signal and terminate batch jobs; answer pings from ctld."""

    def __init__(
        self,
        nodes: Mapping[str, HostedNode],
        key: bytes,
        admin_uids: frozenset[int],
        kill_wait: float,
        start_time: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._nodes = dict(nodes)
        self._key = key
        self._admin_uids = admin_uids
        self._kill_wait = kill_wait
        self._start_time = start_time
        self._clock = clock
        self.on_ctld_ping: Callable[[int], None] = lambda ctld_start_time: (
            None
        )  # the reporter's, once it runs
        self.local_conf = ""  # configless: SLURM_CONF for jobs here is this node's cached copy
        self.drain: job_hooks.Drain = lambda node, reason: None  # asks ctld to drain a node (main sets it)
        # the node's GPUs as last sampled, for ping answers (main sets it when NVML is there)
        self.live_gpus: Callable[[HostedNode], list[cluster_pb2.GpuState]] = lambda node: []
        self.reload: Callable[[], None] = lambda: None  # re-reads the configuration (main sets it)
        self._reloading = threading.Lock()

    def _node(self, name: str, context: grpc.ServicerContext) -> HostedNode:
        node = self._nodes.get(name)
        if node is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Invalid node name specified: {name}")
            raise AssertionError("unreachable")
        return node

    def _require_admin(self, context: grpc.ServicerContext) -> None:
        if current_caller().uid not in self._admin_uids:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, PERMISSION_DENIED)

    def _check_credential(
        self,
        req: node_pb2.LaunchBatchRequest | node_pb2.LaunchTasksRequest | node_pb2.RunPrologRequest,
        context: grpc.ServicerContext,
    ) -> None:
        cred, job = req.credential, req.job
        try:
            verify_job_credential(self._key, cred, now=self._clock())
        except AuthError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, exc.message)
        try:
            cred_nodes = hostlist.expand(cred.nodes)
        except hostlist.HostlistError:
            cred_nodes = []
        if (cred.job_id, cred.uid, cred.gid) != (job.job_id, job.user_id, job.group_id) or (
            req.node not in cred_nodes
        ):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, INVALID_JOB)

    @_launch_errors
    def LaunchBatch(
        self, request: node_pb2.LaunchBatchRequest, context: grpc.ServicerContext
    ) -> node_pb2.LaunchBatchResponse:
        self._require_admin(context)
        node = self._node(request.node, context)
        self._check_credential(request, context)
        if self.local_conf:
            request.slurm_conf = self.local_conf
        kill_wait = request.kill_wait or self._kill_wait
        launch_batch(
            request,
            node.conf,
            node.spool,
            kill_wait,
            isolation=node.isolation,
            identity=node.identity,
            hooks=node.hooks,
        )
        if node.hooks.at_allocation:
            job_hooks.hand_over_epilog(node, request.job.job_id)
        log.info("%s: launched batch job %d", node.name, request.job.job_id)
        return node_pb2.LaunchBatchResponse()

    def SignalJob(
        self, request: node_pb2.NodeSignalJobRequest, context: grpc.ServicerContext
    ) -> node_pb2.NodeSignalJobResponse:
        """Slurm's delivery: the job's steps here (never the batch shell), the batch shell alone
        (batch_only), or the shell's whole process group and the steps (full)."""
        self._require_admin(context)
        node = self._node(request.node, context)
        shell = False
        if request.batch_only or request.full:
            shell = jobs.signal_job(node.spool, request.job_id, request.signal, request.batch_only)
        steps = (
            0 if request.batch_only else tasks.signal_steps(node.spool, request.job_id, None, request.signal)
        )
        if (
            not shell
            and not steps
            and (request.batch_only or not jobs.job_exists(node.spool, request.job_id))
        ):
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"Job {request.job_id} is not running on node {node.name}"
            )
        return node_pb2.NodeSignalJobResponse()

    def TerminateJob(
        self, request: node_pb2.TerminateJobRequest, context: grpc.ServicerContext
    ) -> node_pb2.TerminateJobResponse:
        """End a job (idempotent: a job that already ended here is not an error)."""
        self._require_admin(context)
        node = self._node(request.node, context)
        kill_wait = float(request.kill_wait) if request.kill_wait else None
        mark = request.reason not in UNMARKED_REASONS
        suspend.thaw_for_termination(node, request.job_id)
        if request.reason in CANCEL_NOTES:
            jobs.leave_cancel_note(node.spool, request.job_id, node.name, CANCEL_NOTES[request.reason])
        if jobs.terminate_job(node.spool, request.job_id, kill_wait, mark):
            log.info("%s: terminating job %d (%s)", node.name, request.job_id, request.reason or "cancel")
        if tasks.terminate_steps(node.spool, request.job_id):
            log.info("%s: terminating the steps of job %d", node.name, request.job_id)
        job_hooks.epilog_after_job(node, request.job_id, self.drain)
        return node_pb2.TerminateJobResponse()

    def SuspendJob(
        self, request: node_pb2.NodeSuspendJobRequest, context: grpc.ServicerContext
    ) -> node_pb2.NodeSuspendJobResponse:
        """scontrol suspend/resume: freeze or thaw the job's processes here."""
        self._require_admin(context)
        node = self._node(request.node, context)
        method = suspend.suspend_job(node, request.job_id, request.suspend)
        if method == suspend.NOT_HERE:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"Job {request.job_id} is not running on node {node.name}"
            )
        log.info(
            "%s: job %d %s (%s)",
            node.name,
            request.job_id,
            "suspended" if request.suspend else "resumed",
            method,
        )
        return node_pb2.NodeSuspendJobResponse(method=method)

    @_launch_errors
    def LaunchTasks(
        self, request: node_pb2.LaunchTasksRequest, context: grpc.ServicerContext
    ) -> node_pb2.LaunchTasksResponse:
        """Start this node's tasks of a job step (ctld relays srun's request with the job credential)."""
        self._require_admin(context)
        node = self._node(request.node, context)
        self._check_credential(request, context)
        if self.local_conf:
            request.slurm_conf = self.local_conf
        kill_wait = request.kill_wait or self._kill_wait
        prolog = job_hooks.prolog_before_first_step(node, request)
        if not prolog.ok:  # as Slurm: the node is drained, the step fails
            log.error("%s: job %d: %s", node.name, request.job.job_id, prolog.message)
            self.drain(node.name, "Prolog error")
            context.abort(grpc.StatusCode.INTERNAL, f"Job prolog failed ({prolog.message})")
        tasks.launch_tasks(
            request,
            node.name,
            node.spool,
            kill_wait,
            node.isolation,
            node.gpu_cpus,
            identity=node.identity,
            hooks=node.hooks,
        )
        return node_pb2.LaunchTasksResponse()

    def RunProlog(
        self, request: node_pb2.RunPrologRequest, context: grpc.ServicerContext
    ) -> node_pb2.RunPrologResponse:
        """PrologFlags=Alloc: the Prolog of a job just allocated here, answered when it has ended (ctld
        drains the node and requeues the job when it fails)."""
        self._require_admin(context)
        node = self._node(request.node, context)
        self._check_credential(request, context)
        result = job_hooks.prolog_at_allocation(node, request)
        if not result.ok:
            log.error("%s: job %d: %s", node.name, request.job.job_id, result.message)
            context.abort(grpc.StatusCode.INTERNAL, f"Job prolog failed ({result.message})")
        return node_pb2.RunPrologResponse()

    def SignalStep(
        self, request: node_pb2.SignalStepRequest, context: grpc.ServicerContext
    ) -> node_pb2.SignalStepResponse:
        self._require_admin(context)
        node = self._node(request.node, context)
        tasks.signal_steps(node.spool, request.job_id, request.step_id, request.signal)
        return node_pb2.SignalStepResponse()

    def Reconfigure(
        self, request: node_pb2.NodeReconfigRequest, context: grpc.ServicerContext
    ) -> node_pb2.NodeReconfigResponse:
        """ctld's REQUEST_RECONFIGURE (after `scontrol reconfigure`): read the files again."""
        self._node(request.node, context)
        # one noded serving several nodes gets one call per node, all sent after ctld took the files:
        # a reload already running reads the same files, so the calls meanwhile need no reload of their own
        if self._reloading.acquire(blocking=False):
            try:
                self.reload()
            finally:
                self._reloading.release()
        return node_pb2.NodeReconfigResponse()

    def RebootNode(
        self, request: node_pb2.NodeRebootRequest, context: grpc.ServicerContext
    ) -> node_pb2.NodeRebootResponse:
        """ctld issued this node's reboot (scontrol reboot): run RebootProgram as root, in the background."""
        self._require_admin(context)
        node = self._node(request.node, context)
        problem = reboot.start(node)
        if problem:
            log.error("%s: reboot refused: %s", node.name, problem)
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, problem)
        return node_pb2.NodeRebootResponse()

    def configure(self, nodes: Mapping[str, HostedNode], kill_wait: float) -> None:
        """Serve `nodes` (the same names, their settings read again) with this KillWait from now on."""
        self._nodes.update((name, node) for name, node in nodes.items() if name in self._nodes)
        self._kill_wait = kill_wait

    def Ping(
        self, request: node_pb2.NodePingRequest, context: grpc.ServicerContext
    ) -> node_pb2.NodePingResponse:
        node = self._node(request.node, context)
        self.on_ctld_ping(request.ctld_start_time)
        free = free_memory_mb()
        if node.emulated:
            free = min(free, node.conf.real_memory)
        running = set(jobs.running_jobs(node.spool)) | set(tasks.running_step_jobs(node.spool))
        return node_pb2.NodePingResponse(
            running_jobs=sorted(running),
            cpu_load=cpu_load(),
            free_mem_mb=free,
            start_time=self._start_time,
            gpus=self.live_gpus(node),
            steps=live.step_usage(node),
        )
