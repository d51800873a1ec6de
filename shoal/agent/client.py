"""The commands' side of the local agent: send one request over the unix socket, get one answer.

Imports only the stdlib, google.protobuf and shoal.v1.common_pb2 (never grpc, never the full
config parser): a command must start in tens of milliseconds. The agent attaches the caller's
credential, so a command needs neither the cluster key nor slurm.conf beyond the socket path.
"""

from __future__ import annotations

import os
import socket
import time
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from shoal.agent.protocol import recv_frame, send_frame
from shoal.v1 import common_pb2

M = TypeVar("M", bound=Message)

# gRPC status code numbers, as carried in AgentResponse.code.
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16

DEFAULT_SOCKET = "/run/shoal/agent.sock"
DEFAULT_CONF = "/etc/slurm/slurm.conf"
# Used when the caller gives no timeout; the agent applies the same default when forwarding.
DEFAULT_TIMEOUT = 60.0
# Extra time the socket waits beyond the forwarding timeout, for the agent's own work.
SOCKET_GRACE = 5.0

CONNECT_FAILURE = "Unable to contact slurm controller (connect failure)"
TIMED_OUT = "Socket timed out on send/recv operation"


class AgentError(Exception):
    """A failed call: `code` is a gRPC status code number, `message` the user-facing text."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def socket_path() -> str:
    """$SHOAL_AGENT_SOCKET, else AgentSocket= in $SLURM_CONF (or /etc/slurm/slurm.conf), else the default."""
    env = os.environ.get("SHOAL_AGENT_SOCKET")
    if env:
        return env
    return slurm_conf_value("AgentSocket") or DEFAULT_SOCKET


def slurm_conf_value(key: str, conf: str | None = None) -> str | None:
    """A cheap line scan of slurm.conf ($SLURM_CONF, else /etc/slurm/slurm.conf) for `key=` (case-insensitive
    key, # comments stripped, the first non-empty value): what a short command needs without the full parser."""
    path = conf or os.environ.get("SLURM_CONF") or DEFAULT_CONF
    wanted = key.lower()
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                line = line.split("#", 1)[0].strip()
                name, sep, value = line.partition("=")
                if sep and name.strip().lower() == wanted:
                    value = value.strip().strip('"').strip("'")
                    if value:
                        return value
    except OSError:
        return None
    return None


def _connect(sock: socket.socket, path: str, deadline: float) -> None:
    """Connect to the agent. A unix socket with a timeout connects without blocking, so an agent whose
    accept queue is momentarily full answers EAGAIN at once: that is a busy agent, not a missing one, and
    is tried again until `deadline`. A missing socket, refused or denied is a connect failure at once."""
    while True:
        try:
            sock.connect(path)
            return
        except BlockingIOError as exc:
            if time.monotonic() >= deadline:
                raise AgentError(UNAVAILABLE, CONNECT_FAILURE) from exc
            time.sleep(0.01)
        except OSError as exc:  # missing socket, refused, permission denied
            raise AgentError(UNAVAILABLE, CONNECT_FAILURE) from exc


def _exchange(request: common_pb2.AgentRequest, timeout: float) -> common_pb2.AgentResponse:
    path = socket_path()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout + SOCKET_GRACE)
        _connect(sock, path, time.monotonic() + timeout)
        try:
            send_frame(sock, request.SerializeToString())
            data = recv_frame(sock)
        except TimeoutError as exc:
            raise AgentError(DEADLINE_EXCEEDED, TIMED_OUT) from exc
        except ValueError as exc:  # request over the frame limit
            raise AgentError(INVALID_ARGUMENT, str(exc)) from exc
        except OSError as exc:  # agent went away mid-call
            raise AgentError(UNAVAILABLE, CONNECT_FAILURE) from exc
    finally:
        sock.close()
    try:
        return common_pb2.AgentResponse.FromString(data)
    except DecodeError as exc:
        raise AgentError(INTERNAL, "Invalid response from the local shoal agent") from exc


def call(
    method: str,
    request: Message,
    response_type: type[M],
    *,
    timeout: float | None = None,
    target: str = "ctld",
) -> M:
    """Call a gRPC `method` ("/shoal.v1.Controller/Ping") of `target` ("ctld" or "dbd") via the agent.

    Raises AgentError with the server's status code and message when the call fails.
    """
    wait = DEFAULT_TIMEOUT if timeout is None else timeout
    agent_request = common_pb2.AgentRequest(
        method=method, body=request.SerializeToString(), timeout=timeout or 0.0, target=target
    )
    response = _exchange(agent_request, wait)
    if response.code != OK:
        raise AgentError(response.code, response.message or f"RPC failed with status {response.code}")
    try:
        return response_type.FromString(response.body)
    except DecodeError as exc:
        raise AgentError(INTERNAL, f"Invalid response from {target}") from exc


def get_credential() -> bytes:
    """A serialized Credential for the calling user, for clients that open gRPC themselves."""
    response = _exchange(common_pb2.AgentRequest(want_credential=True), DEFAULT_TIMEOUT)
    if response.code != OK:
        raise AgentError(response.code, response.message or f"RPC failed with status {response.code}")
    return response.credential
