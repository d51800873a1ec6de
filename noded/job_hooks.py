"""Prolog and Epilog on a node that runs only steps of a job (not its batch script).

Slurm runs the Prolog on each node at the job's first step there, and the Epilog at the job's end on
every node that ran it. The batch host's are run by the job's stepd (noded.stepd); here, noded runs
the Prolog in LaunchTasks before the first step's tasks start and records that it did
(<spool>/prolog<job>.json, with the environment the Epilog gets); TerminateJob (the job ended, was
cancelled or requeued) runs the Epilog once the job's steps are gone. A failure drains the node
through ctld (Reason "Prolog error" / "Epilog error"), as Slurm's slurmd has ctld do.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from noded import hooks, spool, tasks
from noded.env import hook_environment
from noded.node import HostedNode
from shoal.v1 import node_pb2

log = logging.getLogger("shoal.noded")

MARKER_PREFIX = "prolog"
STEPS_GONE_WAIT_S = 120.0  # how long the Epilog waits for the job's steps to end (KillWait and more)
Drain = Callable[[str, str], None]
"""drain(node, reason): ask ctld to drain the node."""

_LOCK = threading.Lock()  # one Prolog per job at a time: steps of a job may launch together


def marker(spool_root: Path, job_id: int) -> Path:
    return Path(spool_root) / f"{MARKER_PREFIX}{job_id}.json"


def prolog_before_first_step(node: HostedNode, req: node_pb2.LaunchTasksRequest) -> hooks.HookResult:
    """Run the Prolog unless it ran for this run of the job here (or the batch script's stepd runs it)."""
    job = req.job
    if not node.hooks.prolog and not node.hooks.epilog:
        return hooks.HookResult(True)
    if spool.job_dir(node.spool, job.job_id).exists():
        return hooks.HookResult(True)  # the batch host: its stepd ran the Prolog
    path = marker(node.spool, job.job_id)
    with _LOCK:
        recorded = spool.read_json(path)
        if recorded is not None and recorded.get("run") == job.restarts:
            return hooks.HookResult(True)
        env = hook_environment(job, node.name, node.hooks.cluster_name, node.hooks.slurm_conf)
        result = hooks.run_all(
            node.hooks.prolog,
            {**env, "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"},
            hooks.timeout_of(node.hooks.timeout),
            "prolog",
            node_ns=node.identity or None,
            threaded=True,
        )
        if result.ok:
            spool.write_json_atomic(path, {"run": job.restarts, "env": env}, mode=0o600)
        return result


def epilog_after_job(node: HostedNode, job_id: int, drain: Drain) -> None:
    """On a thread: once the job's steps have ended here, its Epilog (if its Prolog ran here)."""
    path = marker(node.spool, job_id)
    if not path.exists():
        return
    threading.Thread(target=_epilog, args=(node, job_id, path, drain), daemon=True).start()


def _epilog(node: HostedNode, job_id: int, path: Path, drain: Drain) -> None:
    deadline = time.monotonic() + STEPS_GONE_WAIT_S
    while job_id in tasks.running_step_jobs(node.spool) and time.monotonic() < deadline:
        time.sleep(0.2)
    with _LOCK:
        recorded = spool.read_json(path)
        try:
            os.unlink(path)
        except OSError:
            return  # another TerminateJob ran it
    env = recorded.get("env") if isinstance(recorded, dict) else None
    if not isinstance(env, dict) or not node.hooks.epilog:
        return
    result = hooks.run_all(
        node.hooks.epilog,
        {**env, "SLURM_SCRIPT_CONTEXT": "epilog_slurmd"},
        hooks.timeout_of(node.hooks.timeout),
        "epilog",
        node_ns=node.identity or None,
        threaded=True,
    )
    if not result.ok:
        log.error("%s: job %d: %s", node.name, job_id, result.message)
        drain(node.name, "Epilog error")
