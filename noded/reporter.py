"""Keeping ctld informed: RegisterNode for every node, CompleteBatch for every finished job.

One thread per process. It wakes on stepd's "done <job_id>" datagrams (one socket per node
spool) and every SCAN_INTERVAL_S, reports what the spools hold, and retries with a growing
backoff while ctld is unreachable. A job's spool directory is removed only once ctld has
acknowledged its completion, so nothing is lost when noded or ctld restarts.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc

from noded import jobs, live, spool, tasks
from noded.gpu.usage import GpuReading, GpuSampler, GpuUsage
from noded.node import HostedNode
from shoal.rpc.client import Stub
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2

log = logging.getLogger("shoal.noded")

REGISTER = "/shoal.v1.Controller/RegisterNode"
COMPLETE = "/shoal.v1.Controller/CompleteBatch"
SCAN_INTERVAL_S = 1.5
MAX_BACKOFF_S = 30.0
REREGISTER_S = 300.0
UNIX_PATH_MAX = 107

# ctld answers these for a completion it cannot use; retrying would never succeed.
_DROP_CODES = (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT)


class Reporter:
    """Registration and completion reports for the nodes of this process."""

    def __init__(
        self,
        nodes: Sequence[HostedNode],
        stub: Stub,
        hardware: Callable[[HostedNode], cluster_pb2.NodeHardware],
        version: str,
        start_time: int,
        timeout: float = 10.0,
        gpu_sampler: GpuSampler | None = None,
    ) -> None:
        self._nodes = list(nodes)
        self._stub = stub
        self._hardware = hardware
        self._version = version
        self._start_time = start_time
        self._timeout = timeout
        self._registered: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._selector = selectors.DefaultSelector()
        self._sockets: list[socket.socket] = []
        self._backoff = 0.0
        self._gpu_sampler = gpu_sampler
        self._readings: dict[int, GpuReading] = {}  # every GPU's latest reading (by minor)
        self._holders: dict[str, dict[int, int]] = {}  # node -> GPU minor -> the job holding it
        self._ctld_start_time = 0  # of the ctld these nodes registered with (or that pinged last)
        self._kick = threading.Event()  # wakes the loop before its time (a new ctld pinged)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        for node in self._nodes:
            self._bind_notify_socket(node)
        self._thread = threading.Thread(target=self._run, name="shoal-noded-reporter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout + 5)
            self._thread = None
        for sock in self._sockets:
            path = sock.getsockname()
            sock.close()
            try:
                os.unlink(path)
            except OSError:
                pass
        self._sockets.clear()
        self._selector.close()

    def _bind_notify_socket(self, node: HostedNode) -> None:
        path = str(node.spool / spool.NOTIFY_SOCKET)
        if len(path.encode()) > UNIX_PATH_MAX:
            log.warning("%s: spool path too long for %s; relying on periodic scans", node.name, path)
            return
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(path)
        except OSError as exc:
            sock.close()
            log.warning("%s: cannot bind %s: %s; relying on periodic scans", node.name, path, exc)
            return
        sock.setblocking(False)
        self._selector.register(sock, selectors.EVENT_READ)
        self._sockets.append(sock)

    def ctld_pinged(self, ctld_start_time: int) -> None:
        """A ping from another ctld than the one these nodes registered with (a restart, a takeover)
        means it knows nothing of them yet: register again at once, as slurmd answers a new slurmctld."""
        if not ctld_start_time or ctld_start_time == self._ctld_start_time:
            return
        self._ctld_start_time = ctld_start_time
        if self._registered:  # (none yet: the registration under way goes to this one anyway)
            log.info("a new ctld (run %d) pinged: registering again", ctld_start_time)
            self._registered.clear()
            self._kick.set()

    # -- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ok = self.report_once()
            except Exception:  # the reporter must survive anything and try again
                log.exception("reporting to ctld failed")
                ok = False
            if ok:
                self._backoff = 0.0
                wait = SCAN_INTERVAL_S
            else:
                self._backoff = min(MAX_BACKOFF_S, max(0.5, self._backoff * 2))
                wait = self._backoff
            self._wait(wait)

    def _wait(self, seconds: float) -> None:
        """Sleep until a stepd datagram arrives, `seconds` pass, or stop() is called."""
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            if self._kick.is_set():
                self._kick.clear()
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if not self._sockets:
                self._stop.wait(min(left, 0.5))
                continue
            events = self._selector.select(timeout=min(left, 0.5))
            for key, _ in events:
                if isinstance(key.fileobj, socket.socket):
                    _drain(key.fileobj)
            if events:
                return

    def report_once(self) -> bool:
        """Register nodes that need it, then report finished jobs. False if ctld was unreachable."""
        for node in self._nodes:
            if not self._register_if_needed(node):
                return False
        for node in self._nodes:
            for step in tasks.reap_lost_steps(node.spool):
                log.warning(
                    "%s: %s lost its slurmstepd: its tasks killed, its cgroup removed", node.name, step
                )
            running, finished = jobs.scan(node.spool)
            self._sample_gpus(node, running)
            for job in finished:
                if not self._complete(node, job):
                    return False
        return True

    def _sample_gpus(self, node: HostedNode, running: list[int]) -> None:
        """One NVML reading of every GPU (with SCAN_INTERVAL_S or more between them): the latest
        answers pings; each running job's GPUs add to its totals."""
        if self._gpu_sampler is None:
            return
        if node is self._nodes[0]:  # one reading per scan serves every node of this process
            self._readings = self._gpu_sampler.read()
        holders: dict[int, int] = {}
        for job_id in running:
            gpus = job_gpus(node.spool, job_id)
            if gpus:
                self._gpu_sampler.sample(job_id, gpus, self._readings)
                holders.update((m, job_id) for m in gpus)
        self._holders[node.name] = holders

    def live_gpus(self, node: HostedNode, indices: Sequence[int]) -> list[cluster_pb2.GpuState]:
        """The node's GPUs as last read, each with the job that holds it here (for ctld's pings)."""
        return live.gpu_states(self._readings, indices, self._holders.get(node.name, {}))

    def _register_if_needed(self, node: HostedNode) -> bool:
        last = self._registered.get(node.name)
        if last is not None and time.monotonic() - last < REREGISTER_S:
            return True
        running, finished = jobs.scan(node.spool)
        request = controller_pb2.RegisterNodeRequest(
            name=node.name,
            hardware=self._hardware(node),
            running_jobs=sorted(set(running) | set(tasks.running_step_jobs(node.spool))),
            version=self._version,
            start_time=self._start_time,
            port=node.port,
            finished_jobs=[f.job_id for f in finished],
            reports_finished=True,
        )
        try:
            reply = self._stub.call(
                REGISTER, request, controller_pb2.RegisterNodeResponse, timeout=self._timeout
            )
        except grpc.RpcError as exc:
            self._unreachable(f"{node.name}: registration failed", exc)
            return False
        if not reply.accepted:
            log.error("%s: registration refused by ctld: %s", node.name, reply.message)
            return False
        log.info("%s: registered with ctld", node.name)
        self._ctld_start_time = reply.ctld_start_time or self._ctld_start_time
        self._registered[node.name] = time.monotonic()
        return True

    def _complete(self, node: HostedNode, job: jobs.FinishedJob) -> bool:
        request = controller_pb2.CompleteBatchRequest(
            node=node.name,
            job_id=job.job_id,
            exit_code=job.exit_code,
            exit_signal=job.exit_signal,
            launch_failed=job.launch_failed,
            message=job.message,
            end_time=job.end_time,
            oom=job.oom,
            usage=self._usage(job),
            run=max(job.run, 0),
            node_fail=job.node_fail,
            prolog_failed=job.prolog_failed,
            epilog_failed=job.epilog_failed,
            hook_message=job.hook_message,
        )
        try:
            self._stub.call(COMPLETE, request, controller_pb2.CompleteBatchResponse, timeout=self._timeout)
        except grpc.RpcError as exc:
            if exc.code() in _DROP_CODES:
                log.warning("%s: ctld refused completion of job %d: %s", node.name, job.job_id, exc.details())
            else:
                self._unreachable(f"{node.name}: completion of job {job.job_id} not reported", exc)
                return False
        log.info("%s: job %d finished (exit %d:%d)", node.name, job.job_id, job.exit_code, job.exit_signal)
        jobs.remove_job(node.spool, job.job_id, job.run)
        if self._gpu_sampler is not None:
            self._gpu_sampler.forget(job.job_id)
        return True

    def _usage(self, job: jobs.FinishedJob) -> jobs_pb2.Usage:
        gpu = self._gpu_sampler.usage(job.job_id) if self._gpu_sampler is not None else GpuUsage()
        return jobs_pb2.Usage(
            max_rss_kb=job.max_rss_kb,
            cpu_time_us=job.cpu_time_us,
            gpu_util_avg=gpu.util_avg,
            gpu_util_max=gpu.util_max,
            gpu_mem_max_mb=gpu.mem_max_mb,
        )

    def _unreachable(self, what: str, exc: grpc.RpcError) -> None:
        # Whatever ctld went through (a restart?), every node registers again once it answers.
        self._registered.clear()
        log.warning("%s: %s", what, exc.details() if hasattr(exc, "details") else exc)


def job_gpus(spool_root: Path, job_id: int) -> list[int]:
    """The GPUs (minor numbers) a running job was given here, from its launch environment."""
    data = spool.read_json(spool.job_dir(spool_root, job_id) / spool.LAUNCH)
    env = data.get("env") if data is not None else None
    text = env.get("SLURM_JOB_GPUS", "") if isinstance(env, dict) else ""
    return [int(part) for part in str(text).split(",") if part.strip().isdigit()]


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(256):
            pass
    except BlockingIOError:
        pass
