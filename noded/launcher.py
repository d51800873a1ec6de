"""Turn a LaunchBatchRequest into a running stepd: job directory, script, launch.json, spawn.

Runs as root (jobs run as their user) or as an ordinary user, which can run only its own jobs.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from noded import jobs, spool, stepd_spawn
from noded.env import NodeName, batch_environment, hook_environment
from noded.hooks import HookConfig
from noded.isolation import Isolation, cgroup_request
from noded.launchspec import LaunchSpec
from shoal import rlimits
from shoal.outpath import resolve_streams
from shoal.v1 import jobs_pb2, node_pb2

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class LaunchRefused(Exception):
    """This node will not run the job (wrong user, unknown user); str() is the message."""


class LaunchFailed(Exception):
    """The job's supervisor could not be started; str() is the message."""


def _umask(env: dict[str, str]) -> int:
    try:
        return int(env.get("SLURM_UMASK", "0022"), 8)
    except ValueError:
        return 0o022


def build_spec(
    req: node_pb2.LaunchBatchRequest,
    node_conf: NodeName,
    spool_root: Path,
    kill_wait: float,
    local_gpu_index: bool = False,
    isolation: Isolation | None = None,
    identity: Mapping[str, str] | None = None,
    hooks: HookConfig | None = None,
) -> LaunchSpec:
    """Check who the job runs as and describe the launch (no files touched)."""
    hooks = hooks or HookConfig()
    job = req.job
    cgroup: dict[str, object] = {}
    alloc = next((a for a in job.allocation if a.node == node_conf.name), None)
    if isolation is not None:
        cgroup = cgroup_request(isolation, node_conf.name, job.job_id, alloc).to_dict()
        local_gpu_index = local_gpu_index or isolation.devices_constrained
    euid = os.geteuid()
    if euid != 0 and job.user_id != euid:
        raise LaunchRefused(
            f"shoal-noded runs as uid {euid} and can only run its own jobs, not jobs of uid {job.user_id}"
        )
    try:
        pw = pwd.getpwuid(job.user_id)
    except KeyError:
        raise LaunchRefused(f"User id {job.user_id} not found on node {node_conf.name}") from None
    groups = os.getgrouplist(pw.pw_name, job.group_id) if euid == 0 else []
    base_env = {
        "HOME": pw.pw_dir,
        "USER": pw.pw_name,
        "LOGNAME": pw.pw_name,
        "SHELL": pw.pw_shell or "/bin/sh",
        "PATH": DEFAULT_PATH,
    }
    env = batch_environment(req, node_conf, base_env, local_gpu_index)
    limits = rlimits.job_limits(env, hooks.rlimits)
    stdout, stderr, stdin = resolve_streams(job, node_conf.name)
    job_dir = spool.job_dir(spool_root, job.job_id)
    return LaunchSpec(
        job_id=job.job_id,
        script=str(job_dir / spool.SCRIPT),
        argv=list(job.spec.argv),
        env=env,
        uid=job.user_id,
        gid=job.group_id,
        groups=groups,
        user=pw.pw_name,
        home=pw.pw_dir,
        cwd=job.spec.work_dir or pw.pw_dir,
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        open_mode="append" if job.spec.open_mode == "append" else "truncate",
        kill_wait=float(kill_wait),
        umask=_umask(env),
        notify_socket=str(spool_root / spool.NOTIFY_SOCKET),
        cgroup=cgroup,
        run=job.restarts,
        node_ns=dict(identity or {}),
        prolog=[] if hooks.at_allocation else list(hooks.prolog),  # Alloc: it ran when the job started
        epilog=list(hooks.epilog),
        hook_serial="SERIAL" in hooks.flags,
        hook_env=hook_environment(
            job, node_conf.name, hooks.cluster_name or req.cluster_name, hooks.slurm_conf or req.slurm_conf
        ),
        hook_timeout=hooks.timeout,
        task_prolog=hooks.task_prolog,
        task_epilog=hooks.task_epilog,
        rlimits=limits,
        memory_cap=rlimits.memory_cap(alloc.mem_mb if alloc is not None else 0),
    )


def start_stepd(spec: LaunchSpec, script: bytes, spool_root: Path) -> None:
    """Write the job's directory and start its stepd, detached. Idempotent per run of a job."""
    job_dir = spool.job_dir(spool_root, spec.job_id)
    with jobs.DIRS_LOCK:
        try:
            if not jobs.make_way_for_run(spool_root, spec.job_id, spec.run):
                return  # launched already (a retried RPC): it runs or has finished
            os.mkdir(job_dir, 0o711)
        except OSError as exc:
            raise LaunchFailed(f"cannot create {job_dir}: {exc.strerror}") from exc
        try:
            os.chmod(job_dir, 0o711)
            fd = os.open(job_dir / spool.SCRIPT, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
            with os.fdopen(fd, "wb") as fh:
                fh.write(script)
                if os.geteuid() == 0:
                    os.fchown(fh.fileno(), spec.uid, spec.gid)
            spec.save(job_dir / spool.LAUNCH)
        except OSError as exc:
            shutil.rmtree(job_dir, ignore_errors=True)
            raise LaunchFailed(f"cannot start slurmstepd for job {spec.job_id}: {exc}") from exc
    try:
        code = stepd_spawn.spawn(job_dir / spool.LAUNCH)
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(job_dir, ignore_errors=True)
        raise LaunchFailed(f"cannot start slurmstepd for job {spec.job_id}: {exc}") from exc
    # Exit 0 means stepd recorded its pid. (A quick job may be finished, reported and its
    # directory removed already: ctld can see CompleteBatch before LaunchBatch returns.)
    if code != 0:
        shutil.rmtree(job_dir, ignore_errors=True)
        raise LaunchFailed(f"slurmstepd for job {spec.job_id} did not start (exit {code})")


def launch_batch(
    req: node_pb2.LaunchBatchRequest,
    node_conf: NodeName,
    spool_root: Path,
    kill_wait: float,
    local_gpu_index: bool = False,
    isolation: Isolation | None = None,
    identity: Mapping[str, str] | None = None,
    hooks: HookConfig | None = None,
) -> None:
    """Start the batch script of `req.job` on this node under its own stepd."""
    spec = build_spec(req, node_conf, spool_root, kill_wait, local_gpu_index, isolation, identity, hooks)
    _forget_stale_cancel(spool_root, req.job)
    start_stepd(spec, req.job.spec.script, spool_root)


def _forget_stale_cancel(spool_root: Path, job: jobs_pb2.JobInfo) -> None:
    """A cancel marker older than this start belongs to an earlier run of a requeued job."""
    marker = spool.cancel_marker(spool_root, job.job_id)
    try:
        if marker.stat().st_mtime < job.start_time - 1:
            marker.unlink()
    except OSError:
        pass
