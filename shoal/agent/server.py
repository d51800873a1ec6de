"""The local agent: a unix socket in front of the daemons that vouches for each local caller.

It learns the caller's uid/gid from the kernel (SO_PEERCRED; never from the request), mints a
credential with the cluster key, and forwards the request bytes unchanged on one persistent
gRPC channel per target (a byte pass-through: it never interprets the messages it carries).
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from shoal.agent import client as codes
from shoal.agent.protocol import (
    RUNNER_CANNOT_LISTEN,
    RUNNER_SUFFIX,
    recv_frame,
    remove_socket_if_ours,
    send_frame,
)
from shoal.auth.credential import encode, mint
from shoal.rpc import METADATA_KEY, NOT_PRIMARY
from shoal.rpc.client import CHANNEL_OPTIONS
from shoal.v1 import common_pb2

if TYPE_CHECKING:
    from shoal.conf import SlurmConfig

log = logging.getLogger("shoal.agent")

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
IDLE_TIMEOUT = 120.0
ACCEPT_POLL = 0.2
# How long a request keeps trying a daemon it cannot reach before "Unable to contact": Slurm's commands
# retry the controller for MessageTimeout (10 s by default), so one that is restarting, or whose
# connection the agent is re-establishing (just after `shoal up`), is waited for, not reported down.
CONNECT_GRACE = 10.0
RETRY_PAUSE = 0.2
# While a daemon is down the agent tries it again at least every second (as Slurm's commands do), so
# a waiting request goes through within a second of its return, not after gRPC's longer backoff.
AGENT_CHANNEL_OPTIONS = [
    *(o for o in CHANNEL_OPTIONS if o[0] != "grpc.max_reconnect_backoff_ms"),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]

RUNNER_RESTART_DELAY = 5.0

UNAVAILABLE_MESSAGES = {
    "ctld": "Unable to contact slurm controller (connect failure)",
    "dbd": "Unable to contact slurm database (connect failure)",
}


class AgentServerError(Exception):
    """The agent cannot start (socket in use by a live agent, cannot bind ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a unix socket, from the kernel."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


class AgentServer:
    """Serve AgentRequests on `socket_path`, forwarding to `targets` ({"ctld": "host:port", ...}).

    A target may list several addresses, comma-separated (ctld's SlurmctldHost lines): they are tried
    in order, the last one that answered first, moving on when a request never left (no connection) or
    a standby answered "not the primary" (docs/ha.md); both mean nothing was done, so nothing doubles.
    """

    def __init__(
        self,
        socket_path: str,
        key: bytes,
        targets: dict[str, str],
        host: str,
        command_runner: bool = False,
        connect_grace: float = CONNECT_GRACE,
    ) -> None:
        self.socket_path = socket_path
        self._connect_grace = connect_grace
        self._command_runner = command_runner
        self._runner: subprocess.Popen[bytes] | None = None
        self._runner_pipe: int | None = None
        self._runner_started = 0.0
        self._key = key
        self._targets = {
            name: tuple(a.strip() for a in addrs.split(",") if a.strip()) for name, addrs in targets.items()
        }
        self._good: dict[str, str] = {}  # per target: the address that answered last
        self._host = host
        self._channels: dict[str, grpc.Channel] = {}
        self._methods: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._inode: int | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Bind the socket (mode 0666) and serve in background threads."""
        parent = os.path.dirname(os.path.abspath(self.socket_path))
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise AgentServerError(f"cannot create directory {parent}: {exc.strerror or exc}") from exc
        self._remove_stale_socket()
        # bound and listening under a private name, then renamed into place: a client that sees the
        # socket file can connect to it (bind alone makes the file, and a connect before listen is refused)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        staging = os.path.join(os.path.dirname(os.path.abspath(self.socket_path)), f".sock.{os.getpid()}")
        try:
            if os.path.lexists(staging):
                os.unlink(staging)
            listener.bind(staging)
            os.chmod(staging, 0o666)
            listener.listen(128)
            os.rename(staging, self.socket_path)
        except OSError as exc:
            listener.close()
            try:
                os.unlink(staging)
            except OSError:
                pass
            raise AgentServerError(f"cannot listen on {self.socket_path}: {exc.strerror or exc}") from exc
        listener.settimeout(ACCEPT_POLL)
        self._inode = os.stat(self.socket_path).st_ino
        self._listener = listener
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._accept_loop, args=(listener,), name="shoal-agent-accept", daemon=True
        )
        self._thread.start()
        log.info("agent listening on %s, targets %s", self.socket_path, self._targets)
        if self._command_runner:
            self._start_runner()

    def _start_runner(self) -> None:
        """Start the warm command runner (cli/runner.py) on `<socket>.run`; it exits when we do.

        Without it the native commands fall back to starting Python each time: slower, same result.
        """
        self._runner_started = time.monotonic()
        watch, keep = os.pipe()  # the runner exits when `keep` closes: our exit, even by SIGKILL
        try:
            self._runner = subprocess.Popen(
                [
                    sys.executable,
                    "-P",
                    "-m",
                    "cli.runner",
                    "--socket",
                    self.socket_path + RUNNER_SUFFIX,
                    "--parent-fd",
                    str(watch),
                ],
                pass_fds=(watch,),
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            os.close(keep)
            log.warning("cannot start the command runner: %s", exc)
        else:
            self._runner_pipe = keep
        finally:
            os.close(watch)

    def _check_runner(self) -> None:
        """Restart a runner that died (at most every RUNNER_RESTART_DELAY seconds)."""
        runner = self._runner
        if runner is None or runner.poll() is None or self._stop.is_set():
            return
        if runner.returncode == RUNNER_CANNOT_LISTEN:  # its socket path is unusable: trying again won't help
            log.error(
                "the command runner cannot listen beside %s; commands will start Python each time",
                self.socket_path,
            )
            self._stop_runner()
            return
        if time.monotonic() - self._runner_started < RUNNER_RESTART_DELAY:
            return
        log.warning("the command runner exited (status %s); restarting it", runner.returncode)
        if self._runner_pipe is not None:
            os.close(self._runner_pipe)
            self._runner_pipe = None
        self._start_runner()

    def _stop_runner(self) -> None:
        if self._runner_pipe is not None:
            os.close(self._runner_pipe)
            self._runner_pipe = None
        if self._runner is not None:
            self._runner.terminate()
            try:
                self._runner.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._runner.kill()
                self._runner.wait()
            self._runner = None

    def stop(self) -> None:
        """Stop accepting, remove the socket file (if still ours) and close the channels."""
        self._stop.set()
        self._stop_runner()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            remove_socket_if_ours(self.socket_path, self._inode)
        with self._lock:
            for chan in self._channels.values():
                chan.close()
            self._channels.clear()
            self._methods.clear()

    def _remove_stale_socket(self) -> None:
        try:
            mode = os.lstat(self.socket_path).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(mode):
            raise AgentServerError(f"{self.socket_path} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(1.0)
        try:
            probe.connect(self.socket_path)
        except OSError:
            os.unlink(self.socket_path)  # nobody answers: left over from a dead agent
            return
        finally:
            probe.close()
        raise AgentServerError(f"another agent is already listening on {self.socket_path}")

    # -- serving ---------------------------------------------------------------------------

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stop.is_set():
            self._check_runner()
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                log.exception("accept failed on %s", self.socket_path)
                continue
            threading.Thread(target=self._serve_connection, args=(conn,), daemon=True).start()

    def _serve_connection(self, conn: socket.socket) -> None:
        """Answer requests on one connection until the client closes it or sends garbage."""
        with conn:
            conn.settimeout(IDLE_TIMEOUT)
            try:
                pid, uid, gid = peer_credentials(conn)
            except OSError:
                log.exception("cannot read peer credentials")
                return
            while True:
                try:
                    data = recv_frame(conn)
                except (OSError, ConnectionError):
                    return
                try:
                    request = common_pb2.AgentRequest.FromString(data)
                except DecodeError:
                    log.warning("malformed request from pid %d uid %d; closing", pid, uid)
                    self._reply(conn, _error(codes.INVALID_ARGUMENT, "Malformed request to the shoal agent"))
                    return
                try:
                    response = self.handle(request, uid, gid)
                except Exception as exc:  # say so, and log it: a silent close reads as "connect failure"
                    log.exception("request %s from uid %d failed", request.method, uid)
                    response = _error(codes.INTERNAL, f"Unexpected error in the local shoal agent: {exc}")
                if not self._reply(conn, response):
                    return

    @staticmethod
    def _reply(conn: socket.socket, response: common_pb2.AgentResponse) -> bool:
        try:
            send_frame(conn, response.SerializeToString())
            return True
        except (OSError, ValueError):
            return False

    def handle(self, request: common_pb2.AgentRequest, uid: int, gid: int) -> common_pb2.AgentResponse:
        """One request from a caller whose uid/gid the kernel vouched for."""
        cred = mint(self._key, uid, gid, host=self._host)
        if request.want_credential:
            return common_pb2.AgentResponse(code=codes.OK, credential=encode(cred))
        target = request.target or "ctld"
        if target not in self._targets:
            return _error(codes.INVALID_ARGUMENT, f"Unknown agent target '{target}'")
        if not request.method.startswith("/"):
            return _error(codes.INVALID_ARGUMENT, f"Invalid method name '{request.method}'")
        timeout = request.timeout if request.timeout > 0 else codes.DEFAULT_TIMEOUT
        deadline = time.monotonic() + min(timeout, self._connect_grace)
        while True:
            addresses = self._in_order(target)
            last: grpc.RpcError | None = None
            for address in addresses:
                rpc = self._multicallable(address, request.method)
                try:
                    body = rpc(request.body, metadata=((METADATA_KEY, encode(cred)),), timeout=timeout)
                    self._good[target] = address
                    return common_pb2.AgentResponse(code=codes.OK, body=body)
                except grpc.RpcError as exc:
                    if not (self._never_sent(exc) or _not_primary(exc)):
                        return self._rpc_error(target, exc)
                    last = exc
                cred = mint(self._key, uid, gid, host=self._host)  # a fresh nonce for each attempt
            assert last is not None
            left = deadline - time.monotonic()
            if left <= 0:
                return self._rpc_error(target, last)
            # No connection (the daemon is (re)starting, or the channel is between connection attempts),
            # or only standbys answered (a takeover under way): try them all again shortly.
            if len(addresses) > 1 or _not_primary(last) or not self._wait_connected(addresses[0], left):
                time.sleep(min(RETRY_PAUSE, max(0.0, deadline - time.monotonic())))

    def _in_order(self, target: str) -> tuple[str, ...]:
        addresses = self._targets[target]
        good = self._good.get(target)
        if good is None or len(addresses) == 1:
            return addresses
        return (good, *(a for a in addresses if a != good))

    @staticmethod
    def _never_sent(exc: grpc.RpcError) -> bool:
        """UNAVAILABLE because no connection existed: gRPC did not send the request at all."""
        details = (exc.details() or "").lower()
        return exc.code() == grpc.StatusCode.UNAVAILABLE and (
            "failed to connect" in details or "connection refused" in details
        )

    def _wait_connected(self, address: str, timeout: float) -> bool:
        with self._lock:
            chan = self._channels.get(address)
        if chan is None:
            return False
        try:
            grpc.channel_ready_future(chan).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            return False
        return True

    def _multicallable(self, address: str, method: str) -> Any:
        with self._lock:
            rpc = self._methods.get((address, method))
            if rpc is None:
                chan = self._channels.get(address)
                if chan is None:
                    chan = grpc.insecure_channel(address, options=AGENT_CHANNEL_OPTIONS)
                    self._channels[address] = chan
                # No serializers: the request and response stay raw bytes.
                rpc = chan.unary_unary(method, request_serializer=None, response_deserializer=None)
                self._methods[(address, method)] = rpc
            return rpc

    @staticmethod
    def _rpc_error(target: str, exc: grpc.RpcError) -> common_pb2.AgentResponse:
        status: grpc.StatusCode = exc.code()
        code = int(status.value[0])
        if status == grpc.StatusCode.UNAVAILABLE:
            message = UNAVAILABLE_MESSAGES.get(
                target.split("@")[0], f"Unable to contact {target} (connect failure)"
            )
        elif status == grpc.StatusCode.DEADLINE_EXCEEDED:
            message = codes.TIMED_OUT
        else:
            message = exc.details() or status.name
        return _error(code, message)


def _not_primary(exc: grpc.RpcError) -> bool:
    """A standby (or deposed) ctld's answer: it did nothing, the primary is elsewhere."""
    return exc.code() == grpc.StatusCode.UNAVAILABLE and (exc.details() or "") == NOT_PRIMARY


def _error(code: int, message: str) -> common_pb2.AgentResponse:
    return common_pb2.AgentResponse(code=code, message=message)


def targets_from_config(cfg: SlurmConfig) -> dict[str, str]:
    """Where an agent (agentd's and noded's) forwards: "ctld" at every SlurmctldHost's address (in
    slurm.conf's order, the primary found among them), "ctld@N" at the Nth alone (`scontrol ping`), dbd at
    AccountingStorageHost (else ctld's host):AccountingStoragePort."""
    dbd_host = cfg.accounting_storage_host or cfg.control_addr
    ctlds = ctld_addresses(cfg)
    return {
        "ctld": ",".join(ctlds),
        **{f"ctld@{i}": address for i, address in enumerate(ctlds)},
        "dbd": f"{dbd_host}:{cfg.accounting_storage_port}",
    }


def ctld_addresses(cfg: SlurmConfig) -> list[str]:
    """host:port of each SlurmctldHost line, in slurm.conf's order."""
    hosts = cfg.control_hosts or ((cfg.control_machine, cfg.control_addr),)
    return [f"{addr}:{cfg.slurmctld_port}" for _name, addr in hosts]
