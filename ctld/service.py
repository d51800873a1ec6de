"""The Controller gRPC service: convert the message, check who calls, call the controller, map errors.

Every method is wrapped by `_slurm_errors`: a SlurmError becomes the gRPC status of its code with
Slurm's words as details, the one mapping for all of them. A ctld standing by (no controller: it does
not hold the leadership lease, docs/ha.md) answers Ping and UNAVAILABLE "not the primary" to the rest,
which clients take as "try the next SlurmctldHost"; so does a deposed one (FencedError).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import grpc

from ctld import tokens
from ctld.controller import Caller, Controller
from ctld.diag import Diag, instrument
from ctld.errors import PERMISSION_DENIED, UNAVAILABLE, SlurmError
from ctld.state import uid_of
from ctld.store import FencedError
from shoal.conf import SlurmConfig
from shoal.rpc import NOT_PRIMARY
from shoal.rpc.server import current_caller
from shoal.v1 import accounting_pb2, controller_pb2_grpc
from shoal.v1 import controller_pb2 as pb

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Method = Callable[["ControllerService", Req, grpc.ServicerContext], Resp]

_CODES = {code.value[0]: code for code in grpc.StatusCode}
_STANDBY_METHODS = ("Ping", "Takeover")  # what a ctld that does not lead still answers


def _caller() -> Caller:
    c = current_caller()
    return Caller(uid=c.uid, gid=c.gid, host=c.host)


def _slurm_errors(method: Method[Req, Resp]) -> Method[Req, Resp]:
    """Answer a SlurmError as its gRPC status (INVALID_ARGUMENT when its code is not one)."""

    @functools.wraps(method)
    def wrapper(self: ControllerService, request: Req, context: grpc.ServicerContext) -> Resp:
        if self._ctl is None and method.__name__ not in _STANDBY_METHODS:
            context.abort(grpc.StatusCode.UNAVAILABLE, NOT_PRIMARY)
        try:
            return method(self, request, context)
        except FencedError:
            context.abort(grpc.StatusCode.UNAVAILABLE, NOT_PRIMARY)  # deposed: the new primary decides
            raise
        except SlurmError as exc:
            context.abort(_CODES.get(exc.code, grpc.StatusCode.INVALID_ARGUMENT), exc.message)
            raise  # abort raises; this line is for the type checker

    return wrapper


class _Handlers:
    """Stands in for the server while the generated code registers the Controller's handlers."""

    def __init__(self) -> None:
        self.service = ""
        self.methods: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass  # the same handlers come again, by name, in add_registered_method_handlers

    def add_registered_method_handlers(self, service: str, methods: dict[str, grpc.RpcMethodHandler]) -> None:
        self.service, self.methods = service, dict(methods)


def add_to_server(service: ControllerService, server: grpc.Server) -> None:
    """Register the Controller service as the generated code does, except that GetJobs' answer goes
    out as the bytes ctld built for it (no message to build and serialise again)."""
    handlers = _Handlers()
    controller_pb2_grpc.add_ControllerServicer_to_server(service, handlers)
    handlers.methods["GetJobs"] = grpc.unary_unary_rpc_method_handler(
        service.GetJobs, request_deserializer=pb.GetJobsRequest.FromString, response_serializer=_as_sent
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(handlers.service, handlers.methods),)
    )
    server.add_registered_method_handlers(handlers.service, handlers.methods)


def _as_sent(answer: bytes) -> bytes:
    return answer


@instrument  # sdiag's RPC statistics (ctld/diag.py)
class ControllerService(controller_pb2_grpc.ControllerServicer):
    def __init__(self, controller: Controller | None, cfg: SlurmConfig | None = None, host: str = "") -> None:
        self._ctl = controller
        self.cfg = cfg if cfg is not None else controller.cfg if controller is not None else None
        self.host = host or (self.cfg.control_machine if self.cfg is not None else "")
        self.diag = Diag(controller.clock if controller is not None else time.time)

    @property
    def ctl(self) -> Controller:
        ctl = self._ctl
        if ctl is None:  # a standby's methods never get here (`_slurm_errors`), but a step-down may race
            raise SlurmError(NOT_PRIMARY, UNAVAILABLE)
        return ctl

    def serve(self, controller: Controller | None) -> None:
        """Take over (a controller) or stand by (None)."""
        self._ctl = controller

    # `scontrol takeover` (ctld.main sets them): a standby asks the primary to hand over; the primary,
    # asked so by a standby, releases the lease and stands by
    request_handover: Callable[[], None] | None = None
    hand_over: Callable[[], None] | None = None

    def _node_only(self, context: grpc.ServicerContext) -> None:
        """The daemons' own RPCs (a noded, dbd, agentd): root or SlurmUser only, never an AdminLevel."""
        if not self.ctl.is_slurm_user(_caller()):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "Access/permission denied")

    @_slurm_errors
    def SubmitJob(self, request: pb.SubmitJobRequest, context: grpc.ServicerContext) -> pb.SubmitJobResponse:
        return self.ctl.submit(request.spec, _caller(), request.test_only)

    @_slurm_errors
    def GetJobs(self, request: pb.GetJobsRequest, context: grpc.ServicerContext) -> bytes:  # type: ignore[override]
        """The answer already serialised (ctld/listing.py); `add_to_server` sends it as it is."""
        return self.ctl.get_jobs_wire(request, _caller())

    @_slurm_errors
    def GetNodes(self, request: pb.GetNodesRequest, context: grpc.ServicerContext) -> pb.GetNodesResponse:
        return self.ctl.get_nodes(request, _caller())

    @_slurm_errors
    def GetPartitions(
        self, request: pb.GetPartitionsRequest, context: grpc.ServicerContext
    ) -> pb.GetPartitionsResponse:
        return self.ctl.get_partitions(request, _caller())

    @_slurm_errors
    def GetConfig(self, request: pb.GetConfigRequest, context: grpc.ServicerContext) -> pb.GetConfigResponse:
        return self.ctl.get_config()

    @_slurm_errors
    def SignalJobs(
        self, request: pb.SignalJobsRequest, context: grpc.ServicerContext
    ) -> pb.SignalJobsResponse:
        return self.ctl.signal_jobs(request, _caller())

    @_slurm_errors
    def UpdateJob(self, request: pb.UpdateJobRequest, context: grpc.ServicerContext) -> pb.UpdateJobResponse:
        return self.ctl.update_job(request, _caller())

    @_slurm_errors
    def UpdateNode(
        self, request: pb.UpdateNodeRequest, context: grpc.ServicerContext
    ) -> pb.UpdateNodeResponse:
        self.ctl.update_node(request, _caller())
        return pb.UpdateNodeResponse()

    @_slurm_errors
    def RebootNodes(
        self, request: pb.RebootNodesRequest, context: grpc.ServicerContext
    ) -> pb.RebootNodesResponse:
        self.ctl.reboot_nodes(request, _caller())
        return pb.RebootNodesResponse()

    @_slurm_errors
    def Reconfigure(self, request: pb.ReconfigRequest, context: grpc.ServicerContext) -> pb.ReconfigResponse:
        if not self.ctl.is_admin(_caller()):  # an Operator too is refused, as 22.05's
            raise SlurmError("Invalid user id", PERMISSION_DENIED)  # slurmctld's answer to a user
        try:
            outcome = self.ctl.reconfigure()
        except SlurmError as exc:
            logging.getLogger("shoal.ctld").error(
                "reconfigure refused, the configuration is unchanged: %s", exc.message
            )
            raise
        return pb.ReconfigResponse(changed=outcome.changed, failed_jobs=outcome.failed_jobs)

    @_slurm_errors
    def Ping(self, request: pb.PingRequest, context: grpc.ServicerContext) -> pb.PingResponse:
        return pb.PingResponse(
            hostname=self.host, role="primary" if self._ctl is not None else "backup", now=int(time.time())
        )

    @_slurm_errors
    def Takeover(self, request: pb.TakeoverRequest, context: grpc.ServicerContext) -> pb.TakeoverResponse:
        caller = current_caller()
        if caller.uid != 0 and (self.cfg is None or caller.uid != uid_of(self.cfg.slurm_user)):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "Access/permission denied")
        role = "primary" if self._ctl is not None else "backup"
        if request.relinquish and self._ctl is not None and self.hand_over is not None:
            logging.getLogger("shoal.ctld").info("scontrol takeover: handing over to a backup")
            self.hand_over()
        elif not request.relinquish and self._ctl is None and self.request_handover is not None:
            logging.getLogger("shoal.ctld").info("scontrol takeover: asking the primary to hand over")
            self.request_handover()
        return pb.TakeoverResponse(role=role)

    @_slurm_errors
    def RegisterNode(
        self, request: pb.RegisterNodeRequest, context: grpc.ServicerContext
    ) -> pb.RegisterNodeResponse:
        self._node_only(context)
        return self.ctl.register_node(request)

    @_slurm_errors
    def CreateStep(
        self, request: pb.CreateStepRequest, context: grpc.ServicerContext
    ) -> pb.CreateStepResponse:
        return self.ctl.create_step(request, _caller())

    @_slurm_errors
    def CompleteStep(
        self, request: pb.CompleteStepRequest, context: grpc.ServicerContext
    ) -> pb.CompleteStepResponse:
        return self.ctl.complete_step(request, _caller())

    @_slurm_errors
    def GetSteps(self, request: pb.GetStepsRequest, context: grpc.ServicerContext) -> pb.GetStepsResponse:
        return self.ctl.get_steps(request, _caller())

    @_slurm_errors
    def GetPriorities(
        self, request: pb.GetPrioritiesRequest, context: grpc.ServicerContext
    ) -> pb.GetPrioritiesResponse:
        return self.ctl.get_priorities(request, _caller())

    @_slurm_errors
    def Why(self, request: pb.WhyRequest, context: grpc.ServicerContext) -> pb.WhyResponse:
        return self.ctl.why(request, _caller())

    @_slurm_errors
    def GetShares(self, request: pb.GetSharesRequest, context: grpc.ServicerContext) -> pb.GetSharesResponse:
        return self.ctl.get_shares(request, _caller())

    @_slurm_errors
    def ResetUsage(
        self, request: pb.ResetUsageRequest, context: grpc.ServicerContext
    ) -> pb.ResetUsageResponse:
        return self.ctl.reset_usage(request, _caller())

    @_slurm_errors
    def CompleteAllocation(
        self, request: pb.CompleteAllocationRequest, context: grpc.ServicerContext
    ) -> pb.CompleteAllocationResponse:
        self.ctl.complete_allocation(request, _caller())
        return pb.CompleteAllocationResponse()

    @_slurm_errors
    def CompleteBatch(
        self, request: pb.CompleteBatchRequest, context: grpc.ServicerContext
    ) -> pb.CompleteBatchResponse:
        self._node_only(context)
        self.ctl.complete_batch(request)
        return pb.CompleteBatchResponse()

    @_slurm_errors
    def CreateReservation(
        self, request: pb.ReservationRequest, context: grpc.ServicerContext
    ) -> pb.ReservationResponse:
        return self.ctl.create_reservation(request, _caller())

    @_slurm_errors
    def UpdateReservation(
        self, request: pb.ReservationRequest, context: grpc.ServicerContext
    ) -> pb.ReservationResponse:
        return self.ctl.update_reservation(request, _caller())

    @_slurm_errors
    def DeleteReservation(
        self, request: pb.DeleteReservationRequest, context: grpc.ServicerContext
    ) -> pb.DeleteReservationResponse:
        self.ctl.delete_reservation(request, _caller())
        return pb.DeleteReservationResponse()

    @_slurm_errors
    def GetReservations(
        self, request: pb.GetReservationsRequest, context: grpc.ServicerContext
    ) -> pb.GetReservationsResponse:
        return self.ctl.get_reservations(request, _caller())

    @_slurm_errors
    def PushLimits(
        self, request: accounting_pb2.GetLimitsResponse, context: grpc.ServicerContext
    ) -> pb.PushLimitsResponse:
        self._node_only(context)  # shoal-dbd, with the cluster key
        return pb.PushLimitsResponse(version=self.ctl.accounting.push(request))

    @_slurm_errors
    def CreateToken(
        self, request: pb.CreateTokenRequest, context: grpc.ServicerContext
    ) -> pb.CreateTokenResponse:
        caller = _caller()
        # a token for another user: Administrators only (22.05 refuses an Operator one)
        return tokens.create(self.ctl.cfg, self.ctl.is_admin(caller), request, caller, self.ctl.clock())

    # configless: the files as loaded at start or at the last reconfigure (ClusterState.config_files)
    @_slurm_errors
    def GetConfigFiles(
        self, request: pb.GetConfigFilesRequest, context: grpc.ServicerContext
    ) -> pb.GetConfigFilesResponse:
        self._node_only(context)  # a noded or agentd with the cluster key (configless)
        files = self.ctl.state.config_files  # as loaded at start or at the last reconfigure
        if isinstance(files, SlurmError):
            raise files
        logging.getLogger("shoal.ctld").info(
            "configless: sent %d file(s) to %s", len(files), request.host or _caller().host
        )
        return pb.GetConfigFilesResponse(files=files)

    # sdiag (ctld/diag.py): the counters; a reset is for operators (slurmctld's Access/permission denied)
    def caller_uid(self) -> int | None:
        try:
            return current_caller().uid
        except RuntimeError:
            return None

    @_slurm_errors
    def GetDiag(self, request: pb.GetDiagRequest, context: grpc.ServicerContext) -> pb.GetDiagResponse:
        with self.ctl.state.reading():  # the job counts as of now, not of the last scheduling pass
            self.diag.observe(self.ctl.jobs.values())
        return self.diag.snapshot()

    @_slurm_errors
    def GetLiveUsage(
        self, request: pb.GetLiveUsageRequest, context: grpc.ServicerContext
    ) -> pb.GetLiveUsageResponse:
        """The nodes' GPUs and running steps as their last pings said (issue 17): anyone may read them;
        under PrivateData=jobs another user's jobs and steps are left out (ctld/privacy.py)."""
        return self.ctl.live_usage(request, caller=_caller())

    @_slurm_errors
    def ResetDiag(self, request: pb.ResetDiagRequest, context: grpc.ServicerContext) -> pb.GetDiagResponse:
        if not self.ctl.is_operator(_caller()):  # an Operator may (measured on 22.05)
            raise SlurmError("Access/permission denied", PERMISSION_DENIED)
        self.diag.reset()
        return self.diag.snapshot()
