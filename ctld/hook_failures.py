"""What ctld does when a node's Prolog or Epilog failed, as Slurm 22.05 does it.

A failed Prolog drains its node with reason "Prolog error", and the batch job, whose script never
ran, goes back to the queue held: PENDING, priority 0, Reason "launch failed requeued held" (an
operator releases it with `scontrol release`). A failed Epilog drains its node with reason
"Epilog error"; the job keeps the state its script earned. Plain functions on the records, so
the controller calls them from one place.
"""

from __future__ import annotations

import logging

from shoal.v1 import cluster_pb2, jobs_pb2

log = logging.getLogger("shoal.ctld")

PROLOG_ERROR = "Prolog error"
EPILOG_ERROR = "Epilog error"
LAUNCH_FAILED_REQUEUED_HELD = "launch failed requeued held"


def drain(info: cluster_pb2.NodeInfo, reason: str, now: int, message: str) -> None:
    """Drain the node for a failed hook (the reason shows as set by slurm, as for other system drains)."""
    info.drain = True
    info.reason = reason
    info.reason_time = now
    info.reason_uid = 0
    info.reason_user = "slurm"
    log.error("node %s drained (%s): %s", info.name, reason, message)


def hold_requeued(job: jobs_pb2.JobInfo) -> None:
    """The requeued job of a failed Prolog waits for an operator, as Slurm holds it."""
    job.held = True
    job.held_by_admin = True
    job.priority = 0
    job.state_reason = LAUNCH_FAILED_REQUEUED_HELD
