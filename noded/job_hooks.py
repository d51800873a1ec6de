"""Prolog and Epilog run by noded itself: at a job's allocation (PrologFlags=Alloc) and on a node that
runs only steps of a job (not its batch script).

Slurm runs the Prolog on each node at the job's first step there, or, with PrologFlags=Alloc, on every
allocated node when the job starts; the Epilog at the job's end on every node that ran it. Without
Alloc the batch host's are run by the job's stepd (noded.stepd). Here noded runs the Prolog in
RunProlog (ctld's call at allocation) or in LaunchTasks before the first step's tasks start, and
records that it did (<spool>/prolog<job>.json, with the environment the Epilog gets and, under
PrologFlags=Contain, the job's extern cgroup); TerminateJob (the job ended, was cancelled or requeued)
runs the Epilog once the job's processes are gone. A batch script launched after an allocation-time
Prolog leaves the Epilog to its stepd (the record is handed over). A failure drains the node through
ctld (Reason "Prolog error" / "Epilog error"), as Slurm's slurmd has ctld do.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from noded import hooks, jobs, spool, tasks
from noded.cgroup.job import CgroupError, CgroupRequest, JobCgroup
from noded.cgroup.step import StepCgroup
from noded.env import hook_environment
from noded.isolation import cgroup_request
from noded.node import HostedNode
from shoal.v1 import jobs_pb2, node_pb2

log = logging.getLogger("shoal.noded")

MARKER_PREFIX = "prolog"
EXTERN = "step_extern"  # the extern step's cgroup in the job's (Slurm's <job>/step_extern)
STEPS_GONE_WAIT_S = 120.0  # how long the Epilog waits for the job's steps to end (KillWait and more)
Drain = Callable[[str, str], None]
"""drain(node, reason): ask ctld to drain the node."""

_LOCKS = tuple(threading.Lock() for _ in range(64))  # one Prolog per job and node at a time


def _job_lock(node: str, job_id: int) -> threading.Lock:
    """Steps of a job may launch together, and with NoHold a step may come while ctld's RunProlog runs:
    they wait for one another, and the later ones find the record of the run. (A fixed set of locks
    shared by hash: nothing to forget when a job ends.)"""
    return _LOCKS[hash((node, job_id)) % len(_LOCKS)]


def marker(spool_root: Path, job_id: int) -> Path:
    return Path(spool_root) / f"{MARKER_PREFIX}{job_id}.json"


def prolog_before_first_step(node: HostedNode, req: node_pb2.LaunchTasksRequest) -> hooks.HookResult:
    """Run the Prolog unless it ran for this run of the job here (or the batch script's stepd runs it)."""
    if spool.job_dir(node.spool, req.job.job_id).exists():
        return hooks.HookResult(True)  # the batch host: its stepd ran the Prolog (or it ran at allocation)
    return _prolog_once(node, req.job, extern=False)


def prolog_at_allocation(node: HostedNode, req: node_pb2.RunPrologRequest) -> hooks.HookResult:
    """PrologFlags=Alloc: the Prolog for a job ctld just started on this node (once per run of the job;
    a retried call, or one that comes after a step ran it, finds the record); under Contain the job's
    extern cgroup is made first, as Slurm's extern step starts before the Prolog."""
    return _prolog_once(node, req.job, extern=req.contain)


def _prolog_once(node: HostedNode, job: jobs_pb2.JobInfo, extern: bool) -> hooks.HookResult:
    if not node.hooks.prolog and not node.hooks.epilog and not extern:
        return hooks.HookResult(True)
    path = marker(node.spool, job.job_id)
    with _job_lock(node.name, job.job_id):
        recorded = spool.read_json(path)
        if recorded is not None and recorded.get("run") == job.restarts:
            return hooks.HookResult(True)
        record: dict[str, Any] = {"run": job.restarts}
        if extern:
            record["extern_cgroup"] = _make_extern_cgroup(node, job)
        env = hook_environment(job, node.name, node.hooks.cluster_name, node.hooks.slurm_conf)
        record["env"] = env
        result = _run_node_hook(node, node.hooks.prolog, env, "prolog")
        if result.ok or extern:
            # a failed Prolog's extern cgroup goes with the job's Epilog (TerminateJob), as in Slurm
            spool.write_json_atomic(path, record, mode=0o600)
        return result


def _run_node_hook(
    node: HostedNode, scripts: tuple[str, ...], env: dict[str, str], what: str
) -> hooks.HookResult:
    """The node's Prolog or Epilog as root in its namespaces (SLURM_SCRIPT_CONTEXT prolog_slurmd or
    epilog_slurmd), one at a time on the node under PrologFlags=Serial."""
    with hooks.serial(node.spool, "SERIAL" in node.hooks.flags):
        return hooks.run_all(
            scripts,
            {**env, "SLURM_SCRIPT_CONTEXT": f"{what}_slurmd"},
            hooks.timeout_of(node.hooks.timeout),
            what,
            node_ns=node.identity or None,
            threaded=True,
        )


def _make_extern_cgroup(node: HostedNode, job: jobs_pb2.JobInfo) -> dict[str, Any]:
    """The job's cgroup and its step_extern on this node (where processes that enter the node outside
    Slurm would be adopted); {} on a node that enforces no cgroups."""
    if node.isolation is None:
        return {}
    alloc = next((a for a in job.allocation if a.node == node.name), None)
    job_req = cgroup_request(node.isolation, node.name, job.job_id, alloc)
    extern = job_req.child(EXTERN)
    try:
        StepCgroup(job_req, extern).create()
    except CgroupError as exc:
        log.warning("%s: job %d: no extern cgroup: %s", node.name, job.job_id, exc)
        return {}
    return extern.to_dict()


def hand_over_epilog(node: HostedNode, job_id: int) -> None:
    """The batch script was launched after an allocation-time Prolog: its stepd runs the Epilog (and
    owns the job's cgroup), so the record noded would run it from goes."""
    path = marker(node.spool, job_id)
    with _job_lock(node.name, job_id):
        recorded = spool.read_json(path)
        if recorded is None:
            return
        if recorded.get("extern_cgroup"):  # kept for TerminateJob's cleanup; the Epilog is the stepd's
            kept = {"run": recorded.get("run"), "extern_cgroup": recorded["extern_cgroup"]}
            spool.write_json_atomic(path, kept, mode=0o600)
            return
        try:
            os.unlink(path)
        except OSError:
            pass


def epilog_after_job(node: HostedNode, job_id: int, drain: Drain) -> None:
    """On a thread: once the job's steps have ended here, its Epilog (if its Prolog ran here)."""
    path = marker(node.spool, job_id)
    if not path.exists() and not _job_lock(node.name, job_id).locked():
        return  # no Prolog ran here, and none is running (one that is: its Epilog follows it)
    threading.Thread(target=_epilog, args=(node, job_id, path, drain), daemon=True).start()


def _epilog(node: HostedNode, job_id: int, path: Path, drain: Drain) -> None:
    deadline = time.monotonic() + STEPS_GONE_WAIT_S
    while _still_running(node, job_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    with _job_lock(node.name, job_id):
        recorded = spool.read_json(path)
        try:
            os.unlink(path)
        except OSError:
            return  # another TerminateJob ran it, or no Prolog ran here
    if not isinstance(recorded, dict):
        return
    extern = recorded.get("extern_cgroup")
    if isinstance(extern, dict) and extern:
        try:
            JobCgroup(CgroupRequest.from_dict(extern)).remove(timeout=10.0)
        except (CgroupError, OSError, TypeError):
            pass
    env = recorded.get("env")
    if not isinstance(env, dict) or not node.hooks.epilog:
        return
    result = _run_node_hook(node, node.hooks.epilog, env, "epilog")
    if not result.ok:
        log.error("%s: job %d: %s", node.name, job_id, result.message)
        drain(node.name, "Epilog error")


def _still_running(node: HostedNode, job_id: int) -> bool:
    """The job's steps here, or its batch script (whose stepd has not written its status yet)."""
    return job_id in tasks.running_step_jobs(node.spool) or job_id in jobs.running_jobs(node.spool)
