"""The controller as service.py, main.py and the tests see it: one ClusterState and the modules around it.

Nothing is decided here; each method names the module that does the work:
  queries (GetJobs/GetNodes/GetPartitions/GetConfig), priority_report (sprio, sshare), submit,
  applier (one scheduling cycle), job_lifecycle (completion, cancel/signal), job_update (hold,
  release, requeue, update, top), node_lifecycle (registration, pings, update_node), node_reboot
  (scontrol reboot), steps (srun),
  reservations, housekeeping, reconfigure (scontrol reconfigure, SIGHUP). ctld/state.py owns the lock, the store and the after-commit effects.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from ctld import (
    alloc_prolog,
    applier,
    housekeeping,
    job_lifecycle,
    job_update,
    live_usage,
    node_lifecycle,
    node_reboot,
    priority_report,
    queries,
    usage_reset,
    why,
)
from ctld import reconfigure as reconf
from ctld import reservations as resv
from ctld import steps as jobsteps
from ctld import submit as job_submit
from ctld.accounting import Accounting
from ctld.actions import NodeActions
from ctld.nodes import NodeRuntime
from ctld.record import JobRecord
from ctld.state import Caller, ClusterState
from ctld.store import StateStore
from shoal.conf import SlurmConfig
from shoal.v1 import cluster_pb2, controller_pb2, jobs_pb2, node_pb2

__all__ = ["Caller", "Controller"]


class Controller:
    def __init__(
        self,
        cfg: SlurmConfig,
        store: StateStore,
        key: bytes,
        actions: NodeActions,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state = ClusterState(cfg, store, key, actions, clock)
        alloc_prolog.resume(self.state)  # PrologFlags=Alloc: Prologs a previous ctld waited for

    # ------------------------------------------------------------------ what callers read
    @property
    def cfg(self) -> SlurmConfig:
        return self.state.cfg

    @property
    def store(self) -> StateStore:
        return self.state.store

    @property
    def clock(self) -> Callable[[], float]:
        return self.state.clock

    @property
    def wake(self) -> threading.Event:
        return self.state.wake

    @property
    def accounting(self) -> Accounting:
        return self.state.accounting

    @property
    def started(self) -> int:
        return self.state.started

    @property
    def jobs(self) -> dict[int, JobRecord]:
        return self.state.jobs

    @property
    def nodes(self) -> dict[str, NodeRuntime]:
        return self.state.nodes

    def is_operator(self, caller: Caller) -> bool:
        return self.state.is_operator(caller)

    def is_admin(self, caller: Caller) -> bool:
        return self.state.is_admin(caller)

    def is_slurm_user(self, caller: Caller) -> bool:
        return self.state.is_slurm_user(caller)

    # ------------------------------------------------------------------ jobs
    def submit(
        self, spec: jobs_pb2.JobSpec, caller: Caller, test_only: bool
    ) -> controller_pb2.SubmitJobResponse:
        return job_submit.submit(self.state, spec, caller, test_only)

    def schedule(self) -> int:
        return applier.schedule(self.state)

    def launch_failed(self, job_id: int, message: str, node_down: bool) -> None:
        job_lifecycle.launch_failed(self.state, job_id, message, node_down)

    def complete_batch(self, req: controller_pb2.CompleteBatchRequest) -> None:
        job_lifecycle.complete_batch(self.state, req)

    def signal_jobs(
        self, req: controller_pb2.SignalJobsRequest, caller: Caller
    ) -> controller_pb2.SignalJobsResponse:
        return job_lifecycle.signal_jobs(self.state, req, caller)

    def update_job(
        self, req: controller_pb2.UpdateJobRequest, caller: Caller
    ) -> controller_pb2.UpdateJobResponse:
        return job_update.update_job(self.state, req, caller)

    def housekeeping(self) -> None:
        housekeeping.housekeeping(self.state)

    def reconfigure(self) -> reconf.Outcome:
        return reconf.reconfigure(self.state)

    # ------------------------------------------------------------------ steps
    def create_step(
        self, req: controller_pb2.CreateStepRequest, caller: Caller
    ) -> controller_pb2.CreateStepResponse:
        return jobsteps.create_step(self.state, req, caller)

    def complete_step(
        self, req: controller_pb2.CompleteStepRequest, caller: Caller
    ) -> controller_pb2.CompleteStepResponse:
        return jobsteps.complete_step(self.state, req, caller)

    def get_steps(
        self, req: controller_pb2.GetStepsRequest, caller: Caller | None = None
    ) -> controller_pb2.GetStepsResponse:
        return jobsteps.get_steps(self.state, req, caller)

    def complete_allocation(self, req: controller_pb2.CompleteAllocationRequest, caller: Caller) -> None:
        jobsteps.complete_allocation(self.state, req, caller)

    # ------------------------------------------------------------------ nodes
    def register_node(self, req: controller_pb2.RegisterNodeRequest) -> controller_pb2.RegisterNodeResponse:
        return node_lifecycle.register_node(self.state, req)

    def node_contact(
        self,
        name: str,
        ok: bool,
        running: Sequence[int] | None = None,
        reply: node_pb2.NodePingResponse | None = None,
    ) -> None:
        node_lifecycle.node_contact(self.state, name, ok, running)
        if reply is not None:
            live_usage.record(self.state, name, reply)

    def live_usage(
        self,
        req: controller_pb2.GetLiveUsageRequest,
        wait_s: float = live_usage.FRESH_WAIT_S,
        caller: Caller | None = None,
    ) -> controller_pb2.GetLiveUsageResponse:
        """What runs on the nodes now; a step too young for the last pings is asked for first (sstat)."""
        if req.steps and req.job_ids:
            live_usage.refresh(self.state, req.job_ids, wait_s)
        return live_usage.query(self.state, req, caller)

    def update_node(self, req: controller_pb2.UpdateNodeRequest, caller: Caller) -> None:
        node_lifecycle.update_node(self.state, req, caller)

    def reboot_nodes(self, req: controller_pb2.RebootNodesRequest, caller: Caller) -> None:
        node_reboot.request(self.state, req, caller)

    def nodes_to_ping(self) -> list[cluster_pb2.NodeInfo]:
        return node_lifecycle.nodes_to_ping(self.state)

    def ping_nodes(self) -> None:
        """Ping every node; answers come back to node_contact."""
        for info in self.nodes_to_ping():
            self.state.actions.ping(info, self.state.incarnation, self.node_contact)

    # ------------------------------------------------------------------ reservations
    def create_reservation(
        self, req: controller_pb2.ReservationRequest, caller: Caller
    ) -> controller_pb2.ReservationResponse:
        return resv.create(self.state, req, caller)

    def update_reservation(
        self, req: controller_pb2.ReservationRequest, caller: Caller
    ) -> controller_pb2.ReservationResponse:
        return resv.update(self.state, req, caller)

    def delete_reservation(self, req: controller_pb2.DeleteReservationRequest, caller: Caller) -> None:
        resv.delete(self.state, req, caller)

    def get_reservations(
        self, req: controller_pb2.GetReservationsRequest, caller: Caller | None = None
    ) -> controller_pb2.GetReservationsResponse:
        return resv.get(self.state, req, caller)

    # ------------------------------------------------------------------ queries
    def get_jobs(
        self, req: controller_pb2.GetJobsRequest, caller: Caller | None = None
    ) -> controller_pb2.GetJobsResponse:
        return queries.get_jobs(self.state, req, caller)

    def get_jobs_wire(self, req: controller_pb2.GetJobsRequest, caller: Caller | None = None) -> bytes:
        return queries.get_jobs_wire(self.state, req, caller)

    def get_nodes(
        self, req: controller_pb2.GetNodesRequest, caller: Caller | None = None
    ) -> controller_pb2.GetNodesResponse:
        return queries.get_nodes(self.state, req, caller)

    def get_partitions(
        self, req: controller_pb2.GetPartitionsRequest, caller: Caller | None = None
    ) -> controller_pb2.GetPartitionsResponse:
        return queries.get_partitions(self.state, req, caller)

    def get_config(self) -> controller_pb2.GetConfigResponse:
        return queries.get_config(self.state)

    def get_priorities(
        self, req: controller_pb2.GetPrioritiesRequest, caller: Caller | None = None
    ) -> controller_pb2.GetPrioritiesResponse:
        return priority_report.get_priorities(self.state, req, caller)

    def get_shares(
        self, req: controller_pb2.GetSharesRequest, caller: Caller | None = None
    ) -> controller_pb2.GetSharesResponse:
        return priority_report.get_shares(self.state, req, caller)

    def why(self, req: controller_pb2.WhyRequest, caller: Caller) -> controller_pb2.WhyResponse:
        return why.why(self.state, req, caller)

    def reset_usage(
        self, req: controller_pb2.ResetUsageRequest, caller: Caller
    ) -> controller_pb2.ResetUsageResponse:
        return usage_reset.reset_usage(self.state, req, self.is_operator(caller))
