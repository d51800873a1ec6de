"""Advance reservations on the command line: scontrol create/update/delete/show reservation, sinfo -T.

The words are parsed here as Slurm's client does (times read against this host's clock, flags and
durations checked), so the usual mistakes get Slurm's client-side messages; the controller checks
the rest (nodes, users, overlaps, busy nodes) and answers in Slurm's words.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shoal.v1 import controller_pb2

FLAGS = frozenset({
    "MAINT", "FLEX", "OVERLAP", "IGNORE_JOBS", "DAILY", "WEEKDAY", "WEEKEND", "WEEKLY", "SPEC_NODES",
})  # fmt: skip
KEYS = {
    "reservationname": "ReservationName", "reservation": "ReservationName", "starttime": "StartTime",
    "endtime": "EndTime", "duration": "Duration", "nodes": "Nodes", "nodelist": "Nodes", "nodecnt": "NodeCnt",
    "nodecount": "NodeCnt", "partitionname": "PartitionName", "partition": "PartitionName", "users": "Users",
    "user": "Users", "accounts": "Accounts", "account": "Accounts", "flags": "Flags",
}  # fmt: skip
LISTS = ("Users", "Accounts", "Flags")


class ReservationError(Exception):
    """Lines for stderr (already in Slurm's form), then exit 1."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = lines


# ---------------------------------------------------------------- parsing


def parse_request(
    pairs: Sequence[tuple[str, str]], *, creating: bool, now: int | None = None
) -> controller_pb2.ReservationRequest:
    """KEY=VALUE pairs (keys as typed, `Users+`/`Users-` for += and -=) -> a ReservationRequest."""
    from shoal.timefmt import NOT_SET, parse_datetime, parse_time_limit
    from shoal.v1 import controller_pb2

    tail = "No reservation created." if creating else "No reservation update."
    now = int(time.time()) if now is None else now
    req = controller_pb2.ReservationRequest(duration_min=NOT_SET)

    def fail(message: str, *before: str) -> ReservationError:
        return ReservationError(*before, f"scontrol: error: {message}  {tail}")

    for raw_key, value in pairs:
        op = raw_key[-1] if raw_key[-1:] in ("+", "-") else ""
        key = KEYS.get((raw_key[:-1] if op else raw_key).lower())
        if key is None or (op and key not in LISTS):
            raise fail(f"Unknown parameter {raw_key}={value}.")
        if key == "ReservationName":
            req.name = value
        elif key in ("StartTime", "EndTime"):
            try:
                when = parse_datetime(value, now)
            except ValueError as exc:
                first = "start" if key == "StartTime" else "end"
                raise fail(
                    f"Invalid {first} time {key}={value}.", f"Invalid time specification (pos=0): {value}"
                ) from exc
            if key == "StartTime":
                req.start_time = when
            else:
                req.end_time = when
        elif key == "Duration":
            try:
                req.duration_min = parse_time_limit(value)
            except ValueError as exc:
                raise fail(f"Invalid duration {key}={value}.") from exc
        elif key == "Nodes":
            req.nodes = value
        elif key == "NodeCnt":
            if not value.isdigit() or int(value) <= 0:
                raise fail(f"Invalid node count {key}={value}.")
            req.node_cnt = int(value)
        elif key == "PartitionName":
            req.partition = value
        else:
            values = [v.strip() for v in value.split(",") if v.strip()]
            if key == "Flags":
                values = [v.upper() for v in values]
                bad = [v for v in values if v not in FLAGS]
                if bad:
                    raise fail(f"Error parsing flags {value}.")
            change = {"Users": req.users, "Accounts": req.accounts, "Flags": req.flags}[key]
            change.given = True
            change.op = op
            del change.values[:]
            change.values.extend(values)
    if creating:
        if not req.start_time:
            raise fail("A start time must be given.")
        if not req.end_time and req.duration_min == NOT_SET:
            raise fail("An end time or duration must be given.")
        if not (req.users.values or req.accounts.values):
            raise fail("Either Users/Groups and/or Accounts must be specified.")
        if not (req.nodes or req.node_cnt):
            raise fail("CoreCnt, Nodes, NodeCnt, BurstBuffer, Licenses or Watts must be specified.")
    elif not req.name:
        raise ReservationError("Reservation must be given.  No reservation update.")
    return req


def split_pairs(args: Sequence[str], creating: bool) -> list[tuple[str, str]]:
    """`KEY=VALUE` words; `Users+=x` gives the key `Users+`."""
    pairs: list[tuple[str, str]] = []
    for word in args:
        key, eq, value = word.partition("=")
        if not eq or not key:
            tail = "No reservation created." if creating else "No reservation update."
            raise ReservationError(
                f"scontrol: error: Misformatted parameter '{word}', most options have a parameter after '='.  {tail}"
            )
        pairs.append((key, value))
    return pairs


# ---------------------------------------------------------------- commands


def create(args: Sequence[str]) -> int:
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    request = parse_request(split_pairs(args, True), creating=True)
    try:
        resp = ctld("CreateReservation", request, controller_pb2.ReservationResponse)
    except CommandError as exc:
        if request.node_cnt and not request.nodes and exc.message == "Requested nodes are busy":
            print("Note, unless nodes are directly requested a reservation must exist in a single partition.")
            print("If no partition is requested the default partition is assumed.")
        raise ReservationError(f"Error creating the reservation: {exc.message}") from exc
    print(f"Reservation created: {resp.name}")
    return 0


def update(pairs: Sequence[tuple[str, str]]) -> int:
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    request = parse_request(pairs, creating=False)
    try:
        ctld("UpdateReservation", request, controller_pb2.ReservationResponse)
    except CommandError as exc:
        raise ReservationError(
            f"Error updating the reservation: {exc.message}", f"slurm_update error: {exc.message}"
        ) from exc
    print("Reservation updated.")
    return 0


def delete(word: str, names: Sequence[str]) -> int:
    """Delete the first of `names`; `word` is what the user typed after `delete` (Slurm's message tag)."""
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    name = names[0]
    try:
        ctld(
            "DeleteReservation",
            controller_pb2.DeleteReservationRequest(name=name),
            controller_pb2.DeleteReservationResponse,
        )
    except CommandError as exc:
        raise ReservationError(f"delete_reservation {word}: {exc.message}") from exc
    return 0


def load(names: Sequence[str] = ()) -> controller_pb2.GetReservationsResponse:
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    try:
        return ctld(
            "GetReservations",
            controller_pb2.GetReservationsRequest(names=list(names)),
            controller_pb2.GetReservationsResponse,
        )
    except CommandError as exc:
        raise ReservationError(f"slurm_load_reservations error: {exc.message}") from exc


def show(name: str) -> list[str]:
    """`scontrol show reservation [name]`: the records, or Slurm's line when there are none."""
    resp = load([name] if name else [])
    if not resp.reservations:
        if name:
            raise ReservationError(f"Reservation {name} not found")
        print("No reservations in the system")
        return []
    return [format_reservation(info, resp.now) for info in resp.reservations]


# ---------------------------------------------------------------- formatting


def _null(text: str) -> str:
    return text or "(null)"


def state(info: controller_pb2.ReservationInfo, now: int) -> str:
    """ACTIVE while the reservation (its current occurrence, for a recurring one) holds its nodes.

    The controller moves a recurring reservation to its next occurrence once one ends (WEEKDAY and
    WEEKEND skipping the other days), so between occurrences start_time is already the next one."""
    period = (
        7 * 86400
        if "WEEKLY" in info.flags
        else 86400
        if {"DAILY", "WEEKDAY", "WEEKEND"} & set(info.flags)
        else 0
    )
    if period and now >= info.start_time:
        into = (now - info.start_time) % period
        return "ACTIVE" if into < info.end_time - info.start_time else "INACTIVE"
    return "ACTIVE" if info.start_time <= now < info.end_time else "INACTIVE"


def _times(info: controller_pb2.ReservationInfo) -> tuple[str, str, str]:
    from shoal.timefmt import format_hms, format_timestamp

    return (
        format_timestamp(info.start_time),
        format_timestamp(info.end_time),
        format_hms(info.end_time - info.start_time),
    )


def format_reservation(info: controller_pb2.ReservationInfo, now: int) -> str:
    """One record of `scontrol show reservation`, in Slurm's layout."""
    from shoal.hostlist import collect

    start, end, duration = _times(info)
    nodes = collect(info.nodes) if info.nodes else ""
    lines = [
        f"ReservationName={info.name} StartTime={start} EndTime={end} Duration={duration}",
        f"   Nodes={_null(nodes)} NodeCnt={len(info.nodes)} CoreCnt={info.core_cnt} Features=(null)"
        f" PartitionName={_null(info.partition)} Flags={','.join(info.flags)}",
        f"   TRES=cpu={info.core_cnt}",
        f"   Users={_null(','.join(info.users))} Groups=(null) Accounts={_null(','.join(info.accounts))}"
        f" Licenses=(null) State={state(info, now)} BurstBuffer=(null) Watts=n/a",
        "   MaxStartDelay=(null)",
    ]
    return "\n".join(lines) + "\n"


def sinfo_lines(resp: controller_pb2.GetReservationsResponse, header: bool) -> list[str]:
    """`sinfo -T`: RESV_NAME STATE START_TIME END_TIME DURATION NODELIST.

    As Slurm's: the name column grows to the longest name; the others keep their width and a longer
    value (a 365-day duration) pushes the line right.
    """
    from shoal.hostlist import collect

    rows = [
        (info.name, state(info, resp.now), *_times(info), collect(info.nodes)) for info in resp.reservations
    ]
    heads = ("RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION", "NODELIST")
    widths = [max([9, *(len(r[0]) for r in rows)]), 8, 19, 19, 11]

    def line(cells: Sequence[str]) -> str:
        right = "  ".join(cell.rjust(widths[i + 1]) for i, cell in enumerate(cells[1:5]))
        return f"{cells[0].ljust(widths[0])}  {right}  {cells[5]}"

    return ([line(heads)] if header else []) + [line(r) for r in rows]


def print_lines(lines: Sequence[str]) -> None:
    sys.stdout.write("".join(line + "\n" for line in lines))
