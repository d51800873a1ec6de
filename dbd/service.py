"""The Accounting gRPC servicer: thin, converts messages and calls dbd's plain functions.

Every method is wrapped by `_admin_errors`: a refused sacctmgr request becomes INVALID_ARGUMENT with
the words sacctmgr prints, the one mapping for all of them.
"""

from __future__ import annotations

import functools
import logging
import os
import pwd
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import grpc
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from dbd import admin, ingest, privacy, queries
from shoal.rpc.server import current_caller
from shoal.v1 import accounting_pb2 as pb
from shoal.v1 import accounting_pb2_grpc

if TYPE_CHECKING:
    from shoal.rpc.client import Stub

log = logging.getLogger("shoal.dbd")

PUSH_LIMITS = "/shoal.v1.Controller/PushLimits"
PUSH_TIMEOUT_S = (
    5.0  # a down ctld refuses at once; only a hung one holds sacctmgr this long (its poll catches up)
)
NOT_ADMIN = "Your user doesn't have privilege to perform this action"
STORAGE_DOWN = "Unable to connect to the accounting storage"

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Method = Callable[["AccountingService", Req, grpc.ServicerContext], Resp]


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _admin_errors(method: Method[Req, Resp]) -> Method[Req, Resp]:
    """Answer an AdminError as INVALID_ARGUMENT, its text as the details."""

    @functools.wraps(method)
    def wrapper(self: AccountingService, request: Req, context: grpc.ServicerContext) -> Resp:
        try:
            return method(self, request, context)
        except admin.AdminError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise  # abort raises; this line is for the type checker

    return wrapper


class AccountingService(accounting_pb2_grpc.AccountingServicer):
    def __init__(
        self,
        sessions: sessionmaker[Session],
        slurm_uid: int = 0,
        key: bytes | None = None,
        private_data: frozenset[str] = frozenset(),
    ) -> None:
        self._sessions = sessions
        self._private = private_data  # slurmdbd.conf PrivateData (dbd/privacy.py)
        self._slurm_uid = slurm_uid
        self._ingest_lock = threading.Lock()  # one ingest at a time keeps sequence checks simple
        self._key = key  # the cluster key: signs the pushes to ctld (none: ctlds only poll)
        self._ctlds: dict[str, str] = {}  # cluster -> "host:port" of its ctld, learnt from its polls
        self._stubs: dict[str, Stub] = {}
        self._push_lock = threading.Lock()

    def _push_limits(self) -> None:
        """Hand every known ctld its cluster's associations/QOS after a change, before the change's RPC
        returns: a `sbatch -q` right after `sacctmgr modify user ... set qos+=` sees the new QOS, as with
        slurmdbd. A ctld that does not answer gets the change from its next poll."""
        if self._key is None:
            return
        from shoal.rpc.client import Stub
        from shoal.v1 import controller_pb2

        with self._push_lock:
            for cluster, target in list(self._ctlds.items()):
                try:
                    with self._sessions() as session:
                        limits = admin.limits(session, cluster, 0)
                    stub = self._stubs.get(target)
                    if stub is None:
                        stub = self._stubs[target] = Stub(target, self._key)
                    stub.call(PUSH_LIMITS, limits, controller_pb2.PushLimitsResponse, timeout=PUSH_TIMEOUT_S)
                except (grpc.RpcError, OperationalError) as exc:
                    detail = exc.details() if isinstance(exc, grpc.RpcError) else str(exc)
                    log.info("cluster %s: ctld at %s not updated (%s); it polls", cluster, target, detail)

    def _privileged(self, uid: int) -> bool:
        return uid in (0, self._slurm_uid, os.getuid())

    def set_private_data(self, words: frozenset[str]) -> None:
        self._private = words

    def _viewer(self, session: Session) -> privacy.Viewer | None:
        """The caller (credential uid) as slurmdbd.conf PrivateData limits them; None: sees everything."""
        if not self._private:
            return None
        uid = current_caller().uid
        return privacy.viewer(session, self._private, _user_name(uid), self._privileged(uid))

    @_admin_errors
    def SendRecords(
        self, request: pb.SendRecordsRequest, context: grpc.ServicerContext
    ) -> pb.SendRecordsResponse:
        if not self._privileged(current_caller().uid):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, NOT_ADMIN)
        try:
            with self._ingest_lock, self._sessions.begin() as session:
                through, applied = ingest.apply_records(session, request)
        except OperationalError as exc:
            log.warning("storing records failed: %s", exc)
            context.abort(grpc.StatusCode.UNAVAILABLE, STORAGE_DOWN)
        return pb.SendRecordsResponse(applied_through=through, applied=applied)

    @_admin_errors
    def GetLimits(self, request: pb.GetLimitsRequest, context: grpc.ServicerContext) -> pb.GetLimitsResponse:
        if request.control_addr and request.cluster and self._privileged(current_caller().uid):
            self._ctlds[request.cluster] = request.control_addr
        with self._sessions() as session:
            return admin.limits(session, request.cluster, request.known_version)

    @_admin_errors
    def GetJobs(self, request: pb.AcctJobsRequest, context: grpc.ServicerContext) -> pb.AcctJobsResponse:
        with self._sessions() as session:
            who = self._viewer(session)
            only = (who.user, who.accounts) if who is not None and who.limits(privacy.JOBS) else None
            return queries.find_jobs(session, request.query, only)

    @_admin_errors
    def Modify(self, request: pb.ModifyRequest, context: grpc.ServicerContext) -> pb.ModifyResponse:
        uid = current_caller().uid
        try:
            with self._sessions() as session:
                user = _user_name(uid)
                if (
                    not self._privileged(uid)
                    and not admin.is_admin(session, user)
                    and not admin.coordinator_may(session, user, request)
                ):
                    if request.action != "add":
                        context.abort(grpc.StatusCode.PERMISSION_DENIED, NOT_ADMIN)
                    # 22.05 shows a user the plan of an add, then refuses it: compute it, keep nothing
                    changes = admin.modify(session, request)
                    session.rollback()
                    return pb.ModifyResponse(changes=changes, denied=True)
                changes = admin.modify(session, request)
                if request.commit:
                    session.commit()
                else:
                    session.rollback()
        except IntegrityError:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, "Nothing new added (it already exists).")
        if request.commit and changes:
            self._push_limits()
        return pb.ModifyResponse(changes=changes)

    @_admin_errors
    def Show(self, request: pb.ShowRequest, context: grpc.ServicerContext) -> pb.ShowResponse:
        with self._sessions() as session:
            rows = admin.show(session, request)
            who = self._viewer(session)
            if who is not None:
                kind = admin.kind_of(request.kind)
                rows = privacy.filter_rows(session, kind, rows, who)
                if kind == "account" and who.limits(privacy.ACCOUNTS) and not who.accounts:
                    context.abort(grpc.StatusCode.PERMISSION_DENIED, privacy.ACCESS_DENIED)
        return pb.ShowResponse(rows=[pb.AcctRow(fields=r) for r in rows])

    @_admin_errors
    def GetUsage(self, request: pb.GetUsageRequest, context: grpc.ServicerContext) -> pb.GetUsageResponse:
        with self._sessions() as session:
            return queries.decayed_usage(session, request)

    @_admin_errors
    def Report(self, request: pb.ReportRequest, context: grpc.ServicerContext) -> pb.ReportResponse:
        with self._sessions() as session:
            return queries.report(session, request)
