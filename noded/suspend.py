"""Stopping and continuing a job's processes on one node (scontrol suspend/resume, Slurm's
proctrack/cgroup freeze): the job's cgroup freezer where the node enforces cgroups and has one
(v1 freezer.state, v2 cgroup.freeze; the steps' groups inside are frozen with it), else SIGSTOP and
SIGCONT to the batch script's process group and every step's tasks."""

from __future__ import annotations

import logging
import signal

from noded import jobs, tasks
from noded.cgroup import CgroupError, JobCgroup
from noded.isolation import cgroup_request
from noded.node import HostedNode

log = logging.getLogger("shoal.noded")

FREEZER = "freezer"
SIGNALS = "signals"
NOT_HERE = ""


def _job_cgroup(node: HostedNode, job_id: int) -> JobCgroup | None:
    if node.isolation is None:
        return None
    group = JobCgroup(cgroup_request(node.isolation, node.name, job_id, None))
    return group if group.exists() and group.can_freeze() else None


def suspend_job(node: HostedNode, job_id: int, suspend: bool) -> str:
    """Stop (`suspend`) or continue the job's processes here; how it was done, NOT_HERE when the job
    has nothing running on this node."""
    group = _job_cgroup(node, job_id)
    if group is not None:
        try:
            group.freeze(suspend)
            return FREEZER
        except CgroupError as exc:
            log.warning("%s: job %d: %s; using signals", node.name, job_id, exc)
    sig = signal.SIGSTOP if suspend else signal.SIGCONT
    shell = jobs.signal_job(node.spool, job_id, sig, batch_only=False)
    steps = tasks.signal_steps(node.spool, job_id, None, sig)
    if not shell and not steps:
        return NOT_HERE
    log.info(
        "%s: job %d: no cgroup freezer here, %s its processes with %s",
        node.name,
        job_id,
        "stopped" if suspend else "continued",
        sig.name,
    )
    return SIGNALS


def thaw_for_termination(node: HostedNode, job_id: int) -> None:
    """A suspended job must run again to die: frozen (v1) or stopped processes do not act on SIGTERM.
    Harmless for a job that is not suspended (its group is thawed, SIGCONT is ignored)."""
    group = _job_cgroup(node, job_id)
    if group is None:
        jobs.signal_job(node.spool, job_id, signal.SIGCONT, batch_only=False)
        tasks.signal_steps(node.spool, job_id, None, signal.SIGCONT)
    elif group.frozen():
        try:
            group.freeze(False)
        except CgroupError as exc:
            log.warning("%s: job %d: %s", node.name, job_id, exc)
