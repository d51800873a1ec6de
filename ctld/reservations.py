"""Advance reservations in the controller: create, update, delete, list, expire; who may use one.

Reservations live in `ClusterState.reservations` (name -> ReservationInfo) and in the state store,
written before the caller is answered, so they survive a restart. Only operators and admins
change them. The scheduler sees them through ctld.snapshot (ctld.sched.reservations decides);
the checks here are the ones Slurm makes when a reservation is created or changed: known nodes and
users, no overlap with another reservation on the same nodes, no running job in the way unless
IGNORE_JOBS. Errors carry Slurm's words.
"""

from __future__ import annotations

import pwd
from collections.abc import Callable, Iterable

from ctld import privacy
from ctld.errors import ALREADY_EXISTS, FAILED_PRECONDITION, NOT_FOUND, PERMISSION_DENIED, SlurmError
from ctld.record import JobRecord
from ctld.sched import model as m
from ctld.sched.limits import FOREVER
from ctld.sched.reservations import overlaps, roll
from ctld.snapshot import reservation as to_core
from ctld.state import Caller, ClusterState, Transaction, user_name
from shoal import hostlist
from shoal.states import ACTIVE_STATES, FINISHED_STATES
from shoal.timefmt import UNLIMITED
from shoal.v1 import controller_pb2 as pb

UNLIMITED_SECONDS = 365 * 86400  # Slurm shows Duration=UNLIMITED as a year
INVALID_USER = "Invalid user id"  # what Slurm 22.05 answers a non-operator, and an unknown user
INVALID_RESERVATION = "Requested reservation is invalid"
ACCESS_DENIED = "Access denied to requested reservation"
NODES_BUSY = "Requested nodes are busy"
OVERLAP = "Requested reservation overlaps with another reservation"
IN_USE = "Requested reservation is in use"
LACKS_USERS = "Reservation request lacks users, groups or accounts"
INVALID_TIME = "Invalid time specification"
FLAG_ORDER = (
    "MAINT",
    "FLEX",
    "OVERLAP",
    "IGNORE_JOBS",
    "DAILY",
    "WEEKDAY",
    "WEEKEND",
    "WEEKLY",
    "SPEC_NODES",
)
ALLOW_OVERLAP = frozenset({"MAINT", "OVERLAP"})


# ---------------------------------------------------------------- jobs


def _usable_by(state: ClusterState, caller: Caller | None) -> Callable[[pb.ReservationInfo], bool]:
    """Whether a reservation admits the caller: its Users name them, or its Accounts one of theirs."""
    assert caller is not None
    user = user_name(caller.uid)
    accounts = state.accounting.accounts_of(user)

    def usable(info: pb.ReservationInfo) -> bool:
        if user in info.users:
            return True
        return bool(accounts & {a for a in info.accounts if not a.startswith("-")})

    return usable


def check_job_access(state: ClusterState, job: JobRecord) -> None:
    """At submit: the job's reservation must exist and admit its user (and account, when listed)."""
    name = job.spec.reservation
    if not name:
        return
    info = state.reservations.get(name)
    if info is None:
        raise SlurmError(INVALID_RESERVATION)
    if info.users and job.user_name not in info.users:
        raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)
    if info.accounts and job.account not in info.accounts:
        raise SlurmError(ACCESS_DENIED, PERMISSION_DENIED)


# ---------------------------------------------------------------- RPCs


def get(
    state: ClusterState, req: pb.GetReservationsRequest, caller: Caller | None = None
) -> pb.GetReservationsResponse:
    """The reservations as of now: an ended one is left out, a recurring one shows its next occurrence
    (housekeeping saves both changes; a read writes nothing). Under PrivateData=reservations a user
    sees only those they may use, as 22.05 (another reads as "Reservation NAME not found")."""
    now = state.now()
    with state.reading():
        names = set(req.names)
        out = pb.GetReservationsResponse(now=now)
        usable = _usable_by(state, caller) if privacy.private(state, caller, privacy.RESERVATIONS) else None
        for name in sorted(state.reservations):
            if names and name not in names:
                continue
            if usable is not None and not usable(state.reservations[name]):
                continue
            rolled = roll(to_core(state.reservations[name]), now)
            if rolled is None:
                continue
            shown = out.reservations.add()
            shown.CopyFrom(state.reservations[name])
            shown.start_time, shown.end_time = rolled.start_time, rolled.end_time
        return out


def create(state: ClusterState, req: pb.ReservationRequest, caller: Caller) -> pb.ReservationResponse:
    _require_operator(state, caller)
    now = state.now()
    with state.transaction() as tx:
        expire(state, tx, now)
    with state.transaction() as tx:
        name = req.name or _generated_name(state, req)
        if name in state.reservations:
            raise SlurmError("Duplicate reservation name", ALREADY_EXISTS)
        info = pb.ReservationInfo(name=name)
        _apply(state, info, req, now, creating=True)
        _save(state, tx, info)
    state.wake.set()
    return pb.ReservationResponse(name=name)


def update(state: ClusterState, req: pb.ReservationRequest, caller: Caller) -> pb.ReservationResponse:
    _require_operator(state, caller)
    now = state.now()
    with state.transaction() as tx:
        expire(state, tx, now)
    with state.transaction() as tx:
        current = state.reservations.get(req.name)
        if current is None:
            raise SlurmError(INVALID_RESERVATION, NOT_FOUND)
        info = pb.ReservationInfo()
        info.CopyFrom(current)
        _apply(state, info, req, now, creating=False)
        _save(state, tx, info)
    state.wake.set()
    return pb.ReservationResponse(name=info.name)


def delete(state: ClusterState, req: pb.DeleteReservationRequest, caller: Caller) -> None:
    _require_operator(state, caller)
    with state.transaction() as tx:
        if req.name not in state.reservations:
            raise SlurmError(INVALID_RESERVATION, NOT_FOUND)
        if any(
            j.spec.reservation == req.name and j.state not in FINISHED_STATES for j in state.jobs.values()
        ):
            raise SlurmError(IN_USE, FAILED_PRECONDITION)
        tx.delete_reservation(req.name)
        del state.reservations[req.name]
    state.wake.set()


def expire(state: ClusterState, tx: Transaction, now: int) -> None:
    """Reservations past their end go away (as Slurm deletes them); recurring ones move to their next
    occurrence."""
    for name, info in list(state.reservations.items()):
        rolled = roll(to_core(info), now)
        if rolled is None:
            tx.delete_reservation(name)
            del state.reservations[name]
        elif rolled.start_time != info.start_time:
            info.start_time, info.end_time = rolled.start_time, rolled.end_time
            _save(state, tx, info)


# ---------------------------------------------------------------- the checks


def _require_operator(state: ClusterState, caller: Caller) -> None:
    if not state.is_operator(caller):
        raise SlurmError(INVALID_USER, PERMISSION_DENIED)


def _save(state: ClusterState, tx: Transaction, info: pb.ReservationInfo) -> None:
    tx.save_reservation(info)
    state.reservations[info.name] = info


def _generated_name(state: ClusterState, req: pb.ReservationRequest) -> str:
    """Slurm's `<first user or account>_<n>` for a reservation created without a name."""
    owner = next(iter(req.users.values or req.accounts.values), "resv")
    n = 1
    while f"{owner}_{n}" in state.reservations:
        n += 1
    return f"{owner}_{n}"


def _changed(current: Iterable[str], change: pb.ListChange, *, add_on_set: bool = False) -> list[str]:
    """A list after `X=`, `X+=` or `X-=` (order kept, no repeats)."""
    values = [v for v in change.values if v]
    if change.op == "-":
        return [v for v in current if v not in values]
    base = list(current) if change.op == "+" or add_on_set else []
    return base + [v for v in values if v not in base]


def _apply(
    state: ClusterState, info: pb.ReservationInfo, req: pb.ReservationRequest, now: int, *, creating: bool
) -> None:
    """Fill `info` from the request and check it as Slurm does; nothing is saved here."""
    old_start, old_end, old_nodes = info.start_time, info.end_time, list(info.nodes)
    if req.flags.given:
        flags = _changed(info.flags, req.flags, add_on_set=not creating)
        del info.flags[:]
        info.flags.extend(flags)
    if req.users.given:
        for user in req.users.values:
            _check_user(user)
        users = _changed(info.users, req.users)
        del info.users[:]
        info.users.extend(users)
    if req.accounts.given:
        accounts = _changed(info.accounts, req.accounts)
        del info.accounts[:]
        info.accounts.extend(accounts)
    if not info.users and not info.accounts:
        raise SlurmError(LACKS_USERS)
    if req.partition:
        if req.partition not in {p.name for p in state.cfg.partitions}:
            raise SlurmError("Invalid partition name specified")
        info.partition = req.partition
    _apply_times(info, req, now, creating)
    if req.nodes:
        _set_nodes(state, info, _named_nodes(state, req.nodes))
        info.flags.append("SPEC_NODES")
    elif req.node_cnt:
        if not info.partition and state.cfg.default_partition is not None:
            info.partition = state.cfg.default_partition.name
        _set_nodes(state, info, _pick_nodes(state, info, req.node_cnt))
    elif creating:
        raise SlurmError("Node count specification invalid")
    _order_flags(info)
    times_or_nodes_changed = (
        creating or info.start_time != old_start or info.end_time != old_end or list(info.nodes) != old_nodes
    )
    if times_or_nodes_changed:
        _check_overlap(state, info)
        if "IGNORE_JOBS" not in info.flags:
            _check_busy(state, info)


def _order_flags(info: pb.ReservationInfo) -> None:
    rank = {flag: i for i, flag in enumerate(FLAG_ORDER)}
    flags = sorted(dict.fromkeys(f.upper() for f in info.flags), key=lambda f: rank.get(f, len(rank)))
    del info.flags[:]
    info.flags.extend(flags)


def _check_user(user: str) -> None:
    try:
        pwd.getpwnam(user)
    except KeyError:
        if not user.isdigit():
            raise SlurmError(INVALID_USER) from None


def _apply_times(info: pb.ReservationInfo, req: pb.ReservationRequest, now: int, creating: bool) -> None:
    duration = info.end_time - info.start_time
    start = req.start_time or info.start_time
    if creating:
        start = max(start, now)  # "now" as the command read its clock
    if req.end_time:
        end = req.end_time
    elif req.duration_min == UNLIMITED:
        end = start + UNLIMITED_SECONDS
    elif req.duration_min >= 0:
        end = start + req.duration_min * 60
    else:
        end = start + duration
    if end <= start:
        raise SlurmError(INVALID_TIME)
    info.start_time, info.end_time = start, end


def _named_nodes(state: ClusterState, text: str) -> list[str]:
    if text.upper() == "ALL":
        return list(state.nodes)
    try:
        names = hostlist.expand(text)
    except hostlist.HostlistError as exc:
        raise SlurmError("Invalid node name specified") from exc
    if not names or any(name not in state.nodes for name in names):
        raise SlurmError("Invalid node name specified")
    return names


def _set_nodes(state: ClusterState, info: pb.ReservationInfo, names: Iterable[str]) -> None:
    order = {name: i for i, name in enumerate(state.nodes)}
    chosen = sorted(set(names), key=lambda n: order[n])
    del info.nodes[:]
    info.nodes.extend(chosen)
    info.core_cnt = sum(state.nodes[n].conf.cpus for n in chosen)


def _pick_nodes(state: ClusterState, info: pb.ReservationInfo, count: int) -> list[str]:
    """NodeCnt=N: the first N usable nodes of the partition free of other reservations (and jobs).

    As Slurm 22.05, fewer than N free nodes give a smaller reservation; none at all is refused.
    """
    part = next((p for p in state.cfg.partitions if p.name == info.partition), None)
    members = list(part.nodes) if part is not None else list(state.nodes)
    taken = _reserved_nodes(state, info)
    busy = set() if "IGNORE_JOBS" in info.flags else _busy_nodes(state, info)
    free = [
        n
        for n in members
        if n in state.nodes and state.nodes[n].available and n not in taken and n not in busy
    ]
    if not free:
        raise SlurmError(NODES_BUSY)
    return free[:count]


def _reserved_nodes(state: ClusterState, info: pb.ReservationInfo) -> set[str]:
    """Nodes of other reservations that overlap `info` in time (and may not be shared)."""
    if ALLOW_OVERLAP & set(info.flags):
        return set()
    mine = to_core(info)
    out: set[str] = set()
    for other in state.reservations.values():
        if other.name == info.name:
            continue
        theirs = to_core(other)
        if _times_overlap(mine, theirs):
            out.update(other.nodes)
    return out


def _times_overlap(a: m.Reservation, b: m.Reservation) -> bool:
    return overlaps(b, a.start_time, a.end_time) or overlaps(a, b.start_time, b.end_time)


def _check_overlap(state: ClusterState, info: pb.ReservationInfo) -> None:
    if _reserved_nodes(state, info) & set(info.nodes):
        raise SlurmError(OVERLAP)


def _busy_nodes(state: ClusterState, info: pb.ReservationInfo) -> set[str]:
    """Nodes running jobs that would still run when the reservation starts (outside it)."""
    resv = to_core(info)
    out: set[str] = set()
    for job in state.jobs.values():
        if job.state not in ACTIVE_STATES or (job.spec.reservation and job.spec.reservation == info.name):
            continue
        limit = job.time_limit_min
        end = FOREVER if limit < 0 else job.start_time + limit * 60
        if overlaps(resv, job.start_time, end):
            out.update(a.node for a in job.allocation)
    return out


def _check_busy(state: ClusterState, info: pb.ReservationInfo) -> None:
    if _busy_nodes(state, info) & set(info.nodes):
        raise SlurmError(NODES_BUSY)
