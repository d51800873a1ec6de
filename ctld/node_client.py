"""Side effects on node agents (launch, signal, terminate, ping) over gRPC, off the controller's lock.

Calls run on a small thread pool so a slow or dead node never blocks scheduling. Results that change
state (a failed launch, a ping answer) go back through the callback passed with the call.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from ctld.actions import LaunchFailed, PingAnswer, PrologDone
from shoal.rpc.client import channel, daemon_metadata
from shoal.v1 import cluster_pb2, node_pb2, node_pb2_grpc

log = logging.getLogger("shoal.ctld.nodes")


class GrpcNodeActions:
    def __init__(self, key: bytes, timeout: float = 10.0, workers: int = 16) -> None:
        self.key = key
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="node-rpc")
        # RunProlog calls last as long as the Prologs (PrologEpilogTimeout): a pool of their own, so
        # they never hold up launches, signals and pings
        self._prolog_pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="node-prolog")
        self._stubs: dict[str, node_pb2_grpc.NodeAgentStub] = {}
        self._lock = threading.Lock()

    def _stub(self, node: cluster_pb2.NodeInfo) -> node_pb2_grpc.NodeAgentStub:
        target = f"{node.addr or node.name}:{node.port}"
        with self._lock:
            stub = self._stubs.get(target)
            if stub is None:
                stub = node_pb2_grpc.NodeAgentStub(channel(target))
                self._stubs[target] = stub
            return stub

    def _md(self) -> tuple[tuple[str, bytes], ...]:
        return daemon_metadata(self.key)

    # ---- NodeActions ----
    def launch(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchBatchRequest, on_failure: LaunchFailed
    ) -> None:
        self._pool.submit(self._launch, node, request, on_failure)

    def _launch(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchBatchRequest, on_failure: LaunchFailed
    ) -> None:
        job_id = request.job.job_id
        last: grpc.RpcError | None = None
        for _attempt in range(3):
            try:
                self._stub(node).LaunchBatch(request, metadata=self._md(), timeout=self.timeout)
                return
            except grpc.RpcError as exc:
                last = exc
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    break
                threading.Event().wait(0.5)
        if last is not None:
            unreachable = last.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            on_failure(job_id, last.details() or str(last.code()), unreachable)

    def terminate(self, node: cluster_pb2.NodeInfo, job_id: int, kill_wait: int, reason: str) -> None:
        request = node_pb2.TerminateJobRequest(
            node=node.name, job_id=job_id, kill_wait=kill_wait, reason=reason
        )
        self._pool.submit(self._retrying, node, "TerminateJob", request)

    def signal(
        self, node: cluster_pb2.NodeInfo, job_id: int, signal: int, batch_only: bool, full: bool = False
    ) -> None:
        request = node_pb2.NodeSignalJobRequest(
            node=node.name, job_id=job_id, signal=signal, batch_only=batch_only, full=full
        )
        self._pool.submit(self._retrying, node, "SignalJob", request)

    def _retrying(self, node: cluster_pb2.NodeInfo, method: str, request: object) -> None:
        for attempt in range(5):
            try:
                getattr(self._stub(node), method)(request, metadata=self._md(), timeout=self.timeout)
                return
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    log.warning("%s on %s failed: %s", method, node.name, exc.details())
                    return
                threading.Event().wait(0.5 * (attempt + 1))
        log.warning("%s on %s: node unreachable", method, node.name)

    def launch_tasks(self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchTasksRequest) -> str:
        """Start a step's tasks on one node, synchronously; "" or why it failed."""
        for attempt in range(3):
            try:
                self._stub(node).LaunchTasks(request, metadata=self._md(), timeout=self.timeout)
                return ""
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt == 2:
                    return exc.details() or str(exc.code())
                threading.Event().wait(0.3)
        return "unreachable"

    def signal_step(self, node: cluster_pb2.NodeInfo, job_id: int, step_id: int, signal: int) -> None:
        request = node_pb2.SignalStepRequest(node=node.name, job_id=job_id, step_id=step_id, signal=signal)
        self._pool.submit(self._retrying, node, "SignalStep", request)

    def suspend(self, node: cluster_pb2.NodeInfo, job_id: int, suspend: bool) -> None:
        request = node_pb2.NodeSuspendJobRequest(node=node.name, job_id=job_id, suspend=suspend)
        self._pool.submit(self._retrying, node, "SuspendJob", request)

    def reconfigure(self, node: cluster_pb2.NodeInfo) -> None:
        """REQUEST_RECONFIGURE: the node re-reads its files (a node that misses it reads them at restart)."""
        self._pool.submit(self._retrying, node, "Reconfigure", node_pb2.NodeReconfigRequest(node=node.name))

    def run_prolog(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.RunPrologRequest, on_done: PrologDone
    ) -> None:
        self._prolog_pool.submit(self._run_prolog, node, request, on_done)

    def _run_prolog(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.RunPrologRequest, on_done: PrologDone
    ) -> None:
        """No deadline: noded ends a Prolog at PrologEpilogTimeout; a node that cannot be reached is
        tried a few times, then reported unreachable."""
        for attempt in range(5):
            try:
                self._stub(node).RunProlog(request, metadata=self._md())
                on_done("", False)
                return
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    on_done(exc.details() or str(exc.code()), False)
                    return
                threading.Event().wait(0.5 * (attempt + 1))
        on_done("node unreachable", True)

    def reboot(self, node: cluster_pb2.NodeInfo) -> None:
        """scontrol reboot, once the node is idle: its noded runs RebootProgram (a node that never gets the
        call stays REBOOT_ISSUED until ResumeTimeout)."""
        self._pool.submit(self._retrying, node, "RebootNode", node_pb2.NodeRebootRequest(node=node.name))

    def ping(self, node: cluster_pb2.NodeInfo, ctld_start_time: int, on_answer: PingAnswer) -> None:
        self._pool.submit(self._ping, node, ctld_start_time, on_answer)

    def _ping(self, node: cluster_pb2.NodeInfo, ctld_start_time: int, on_answer: PingAnswer) -> None:
        running: list[int] | None = None
        reply: node_pb2.NodePingResponse | None = None
        try:
            request = node_pb2.NodePingRequest(node=node.name, ctld_start_time=ctld_start_time)
            reply = self._stub(node).Ping(request, metadata=self._md(), timeout=5)
            running = list(reply.running_jobs)
        except grpc.RpcError:
            pass
        on_answer(node.name, running is not None, running, reply)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._prolog_pool.shutdown(wait=False, cancel_futures=True)
