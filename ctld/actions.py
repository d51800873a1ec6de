"""What the controller asks of node agents: implemented over gRPC by ctld.node_client, as data by the
unit tests' harness. Answers that change state come back through the callbacks passed with each call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from shoal.v1 import cluster_pb2, node_pb2

# (job_id, message, node_down): a LaunchBatch call failed
LaunchFailed = Callable[[int, str, bool], None]
# (error, node unreachable): a RunProlog call ended ("" = the Prolog succeeded)
PrologDone = Callable[[str, bool], None]


class PingAnswer(Protocol):
    """A ping's answer: the node's name, whether it answered, the job ids it runs (None: no answer),
    and the answer itself (its GPUs' and steps' live usage)."""

    def __call__(
        self,
        name: str,
        ok: bool,
        running: Sequence[int] | None,
        reply: node_pb2.NodePingResponse | None = None,
    ) -> None: ...


class NodeActions(Protocol):
    def launch(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchBatchRequest, on_failure: LaunchFailed
    ) -> None: ...
    def terminate(self, node: cluster_pb2.NodeInfo, job_id: int, kill_wait: int, reason: str) -> None: ...
    def signal(
        self, node: cluster_pb2.NodeInfo, job_id: int, signal: int, batch_only: bool, full: bool = False
    ) -> None: ...
    def ping(self, node: cluster_pb2.NodeInfo, ctld_start_time: int, on_answer: PingAnswer) -> None: ...
    def launch_tasks(self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchTasksRequest) -> str: ...
    def signal_step(self, node: cluster_pb2.NodeInfo, job_id: int, step_id: int, signal: int) -> None: ...
    def suspend(self, node: cluster_pb2.NodeInfo, job_id: int, suspend: bool) -> None: ...
    def reconfigure(self, node: cluster_pb2.NodeInfo) -> None: ...
    def run_prolog(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.RunPrologRequest, on_done: PrologDone
    ) -> None: ...
    def reboot(self, node: cluster_pb2.NodeInfo) -> None: ...
