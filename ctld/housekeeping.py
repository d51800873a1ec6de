"""The controller's periodic pass: time limits (jobs', and steps' own) and --signal warnings, reservations that ended,
nodes that stopped answering, reboots to issue and reboots past ResumeTimeout, jobs whose GPUs sit
idle, finished jobs past MinJobAge, and saving the fair-share ledger — one transaction of the cluster
state."""

from __future__ import annotations

from ctld import job_lifecycle, live_usage, node_lifecycle, node_reboot, step_limits
from ctld import reservations as resv
from ctld.state import ClusterState


def housekeeping(state: ClusterState) -> None:
    now = state.now()
    with state.transaction() as tx:
        job_lifecycle.enforce_time_limits(state, tx, now)
        step_limits.enforce_step_limits(state, tx, now)
        resv.expire(state, tx, now)
        node_lifecycle.down_unresponsive(state, tx, now)
        node_reboot.time_out(state, tx, now)
        node_reboot.issue_due(state, tx, now)
        live_usage.enforce_gpu_idle(state, tx, now)
        job_lifecycle.forget_finished(state, tx, now)
        state.save_usage_if_due(tx)
