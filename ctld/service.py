"""The Controller gRPC service: convert the message, check who calls, call the controller, map errors."""

from __future__ import annotations

import logging

import grpc

from ctld import configless, reservations, tokens
from ctld.controller import Caller, Controller
from ctld.diag import Diag, instrument
from ctld.errors import FAILED_PRECONDITION, SlurmError
from shoal.rpc.server import current_caller
from shoal.v1 import controller_pb2, controller_pb2_grpc


def _caller() -> Caller:
    c = current_caller()
    return Caller(uid=c.uid, gid=c.gid, host=c.host)


def _abort(context: grpc.ServicerContext, exc: SlurmError) -> None:
    context.abort(_CODES.get(exc.code, grpc.StatusCode.INVALID_ARGUMENT), exc.message)


_CODES = {code.value[0]: code for code in grpc.StatusCode}


@instrument  # sdiag's RPC statistics (ctld/diag.py)
class ControllerService(controller_pb2_grpc.ControllerServicer):
    def __init__(self, controller: Controller) -> None:
        self.ctl = controller
        self.diag = Diag(controller.clock)

    def _node_only(self, context: grpc.ServicerContext) -> None:
        if not self.ctl.is_operator(_caller()):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "Access/permission denied")

    def SubmitJob(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return self.ctl.submit(request.spec, _caller(), request.test_only)
        except SlurmError as exc:
            _abort(context, exc)

    def GetJobs(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return self.ctl.get_jobs(request, _caller())
        except SlurmError as exc:
            _abort(context, exc)

    def GetNodes(self, request, context):  # type: ignore[no-untyped-def]
        return self.ctl.get_nodes(request, _caller())

    def GetPartitions(self, request, context):  # type: ignore[no-untyped-def]
        return self.ctl.get_partitions(request, _caller())

    def GetConfig(self, request, context):  # type: ignore[no-untyped-def]
        return self.ctl.get_config()

    def SignalJobs(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return self.ctl.signal_jobs(request, _caller())
        except SlurmError as exc:
            _abort(context, exc)

    def UpdateJob(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return self.ctl.update_job(request, _caller())
        except SlurmError as exc:
            _abort(context, exc)

    def UpdateNode(self, request, context):  # type: ignore[no-untyped-def]
        try:
            self.ctl.update_node(request, _caller())
        except SlurmError as exc:
            _abort(context, exc)
        return controller_pb2.UpdateNodeResponse()

    def Ping(self, request, context):  # type: ignore[no-untyped-def]
        return controller_pb2.PingResponse(
            hostname=self.ctl.cfg.control_machine, role="primary", now=int(self.ctl.clock())
        )

    def RegisterNode(self, request, context):  # type: ignore[no-untyped-def]
        self._node_only(context)
        return self.ctl.register_node(request)

    def CreateStep(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return self.ctl.create_step(request, _caller())
        except SlurmError as exc:
            _abort(context, exc)

    def CompleteStep(self, request, context):  # type: ignore[no-untyped-def]
        try:
            self.ctl.complete_step(request, _caller())
        except SlurmError as exc:
            _abort(context, exc)
        return controller_pb2.CompleteStepResponse()

    def GetSteps(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return self.ctl.get_steps(request)
        except SlurmError as exc:
            _abort(context, exc)

    def GetPriorities(self, request, context):  # type: ignore[no-untyped-def]
        return self.ctl.get_priorities(request)

    def GetShares(self, request, context):  # type: ignore[no-untyped-def]
        return self.ctl.get_shares(request)

    def CompleteAllocation(self, request, context):  # type: ignore[no-untyped-def]
        try:
            self.ctl.complete_allocation(request, _caller())
        except SlurmError as exc:
            _abort(context, exc)
        return controller_pb2.CompleteAllocationResponse()

    def CompleteBatch(self, request, context):  # type: ignore[no-untyped-def]
        self._node_only(context)
        self.ctl.complete_batch(request)
        return controller_pb2.CompleteBatchResponse()

    def CreateReservation(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return reservations.create(self.ctl, request, _caller())
        except SlurmError as exc:
            _abort(context, exc)

    def UpdateReservation(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return reservations.update(self.ctl, request, _caller())
        except SlurmError as exc:
            _abort(context, exc)

    def DeleteReservation(self, request, context):  # type: ignore[no-untyped-def]
        try:
            reservations.delete(self.ctl, request, _caller())
        except SlurmError as exc:
            _abort(context, exc)
        return controller_pb2.DeleteReservationResponse()

    def GetReservations(self, request, context):  # type: ignore[no-untyped-def]
        return reservations.get(self.ctl, request)

    def PushLimits(self, request, context):  # type: ignore[no-untyped-def]
        self._node_only(context)  # shoal-dbd, with the cluster key
        return controller_pb2.PushLimitsResponse(version=self.ctl.accounting.push(request))

    def CreateToken(self, request, context):  # type: ignore[no-untyped-def]
        try:
            return tokens.create(self.ctl, request, _caller())
        except SlurmError as exc:
            _abort(context, exc)
    # configless: the files as loaded at start (ctld.main sets it from configless.snapshot)
    config_files: dict[str, str] | SlurmError = SlurmError(configless.DISABLED, FAILED_PRECONDITION)

    def GetConfigFiles(self, request, context):  # type: ignore[no-untyped-def]
        self._node_only(context)  # a noded or agentd with the cluster key (configless)
        files = self.config_files
        if isinstance(files, SlurmError):
            _abort(context, files)
            return None
        logging.getLogger("shoal.ctld").info("configless: sent %d file(s) to %s", len(files),
                                             request.host or _caller().host)
        return controller_pb2.GetConfigFilesResponse(files=files)

    # sdiag (ctld/diag.py): the counters; a reset is for operators (slurmctld's Access/permission denied)
    def caller_uid(self) -> int | None:
        try:
            return current_caller().uid
        except RuntimeError:
            return None

    def GetDiag(self, request, context):  # type: ignore[no-untyped-def]
        with self.ctl.lock:  # the job counts as of now, not of the last scheduling pass
            self.diag.observe(self.ctl.jobs.values())
        return self.diag.snapshot()

    def ResetDiag(self, request, context):  # type: ignore[no-untyped-def]
        if not self.ctl.is_operator(_caller()):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "Access/permission denied")
        self.diag.reset()
        return self.diag.snapshot()
