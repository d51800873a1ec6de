"""What every command shares: calling the controller through the local agent, and Slurm-style errors.

Imports stay light (no grpc, no shoal.conf): a command must start in tens of milliseconds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from google.protobuf.message import Message

from shoal.agent.client import AgentError, call

M = TypeVar("M", bound=Message)

CONTROLLER = "/shoal.v1.Controller/"


class CommandError(Exception):
    """A failure to report as `<prog>: error: <message>` with a non-zero exit status."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def ctld(method: str, request: Message, response_type: type[M], *, timeout: float | None = None) -> M:
    """Call a Controller method; agent/controller errors become CommandError with Slurm's text."""
    try:
        return call(CONTROLLER + method, request, response_type, timeout=timeout)
    except AgentError as exc:
        raise CommandError(exc.message) from exc


def ctld_at(
    index: int | None, method: str, request: Message, response_type: type[M], *, timeout: float | None = None
) -> M:
    """A Controller method of the `index`th SlurmctldHost alone (None: whichever is the primary)."""
    target = "ctld" if index is None else f"ctld@{index}"
    try:
        return call(CONTROLLER + method, request, response_type, timeout=timeout, target=target)
    except AgentError as exc:
        raise CommandError(exc.message) from exc


INVALID_PARTITION = "Invalid partition name specified"


def submit_failure(prog: str, message: str, partitions: str = "") -> str:
    """A refused submission's message may start with lines Slurm prints first (`CPU count per node can
    not be satisfied`): print those as `<prog>: error:` lines, return the message proper.

    An unknown partition (`partitions`: the requested -p list) is named first, as 22.05 does:
    `invalid partition specified: NAME`, the first of the list the controller does not know."""
    *details, last = message.split("\n")
    if last == INVALID_PARTITION and not details and partitions:
        unknown = first_unknown_partition(partitions)
        details = [f"invalid partition specified: {unknown}"] if unknown else []
    for line in details:
        error(prog, line)
    return last


def first_unknown_partition(partitions: str) -> str:
    """The first name of a -p list the controller does not have ("" when it cannot say)."""
    from shoal.v1 import controller_pb2

    names = [n for n in partitions.split(",") if n]
    if len(names) == 1:
        return names[0]
    try:
        known = ctld(
            "GetPartitions", controller_pb2.GetPartitionsRequest(), controller_pb2.GetPartitionsResponse
        )
    except CommandError:
        return ""
    have = {p.name for p in known.partitions}
    return next((n for n in names if n not in have), "")


def error(prog: str, message: str) -> None:
    print(f"{prog}: error: {message}", file=sys.stderr)


def run_main(prog: str, body: Callable[[], int | None]) -> int:
    """Run a command body, turning CommandError and Ctrl-C into Slurm-style exits (no traceback)."""
    try:
        result = body()
        return int(result or 0)
    except CommandError as exc:
        error(prog, exc.message)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
