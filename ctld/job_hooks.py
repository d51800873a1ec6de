"""What ctld does around a job's hooks, as Slurm 22.05 does it.

A node's failed Prolog drains the node with reason "Prolog error", and the batch job, whose script
never ran, goes back to the queue held: PENDING, priority 0, Reason "launch failed requeued held" (an
operator releases it with `scontrol release`). A failed Epilog drains its node with reason
"Epilog error"; the job keeps the state its script earned.

PrologSlurmctld runs as SlurmUser before a batch job is launched (the launch waits for it); if it
fails, the job is requeued. EpilogSlurmctld runs as SlurmUser when a job ends; a failure is logged.
Both run on threads of their own, so ctld's lock is never held while a script runs. Plain functions
on the records and callbacks, so the controller calls them from one place each.
"""

from __future__ import annotations

import logging
import os
import pwd
import threading
from collections.abc import Callable

from ctld.record import JobRecord
from shoal import hookrun, states
from shoal.conf import SlurmConfig
from shoal.hookenv import job_environment
from shoal.v1 import cluster_pb2

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


def hold_requeued(job: JobRecord) -> None:
    """The requeued job of a failed Prolog waits for an operator, as Slurm holds it."""
    job.held = True
    job.held_by_admin = True
    job.priority = 0
    job.state_reason = LAUNCH_FAILED_REQUEUED_HELD


def slurmctld_environment(cfg: SlurmConfig, job: JobRecord, context: str) -> dict[str, str]:
    """What PrologSlurmctld/EpilogSlurmctld are given (shoal.hookenv; the epilog also how the job ended)."""
    env = job_environment(job, cfg.cluster_name, os.path.abspath(cfg.path))
    env["SLURM_SCRIPT_CONTEXT"] = context
    if context == "epilog_slurmctld":
        code = job.exit_signal if job.exit_signal else job.exit_code << 8
        env["SLURM_JOB_EXIT_CODE"] = str(code)
        env["SLURM_JOB_EXIT_CODE2"] = f"{job.exit_code}:{job.exit_signal}"
        env["SLURM_JOB_STATE"] = states.job_state_name(job.state)
    return env


def _slurm_user(cfg: SlurmConfig) -> hookrun.RunAs | None:
    """SlurmUser, when ctld runs as root and SlurmUser is someone else."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(cfg.slurm_user)
    except KeyError:
        return None
    return hookrun.RunAs(pw.pw_uid, pw.pw_gid, tuple(os.getgrouplist(pw.pw_name, pw.pw_gid)))


def _run(cfg: SlurmConfig, scripts: tuple[str, ...], env: dict[str, str], what: str) -> hookrun.HookResult:
    run_as = _slurm_user(cfg)
    timeout = hookrun.timeout_of(cfg.prolog_epilog_timeout)
    return hookrun.run_all(
        scripts, env, timeout, what, lambda path: hookrun.run_script(path, env, timeout, what, run_as=run_as)
    )


def launch_after_prolog_slurmctld(
    cfg: SlurmConfig, job: JobRecord, launch: Callable[[], None], requeue: Callable[[str], None]
) -> None:
    """Launch a batch job now, or once PrologSlurmctld has succeeded (requeue(message) if it fails)."""
    if not cfg.prolog_slurmctld:
        launch()
        return
    env = slurmctld_environment(cfg, job, "prolog_slurmctld")
    job_id = job.job_id

    def body() -> None:
        result = _run(cfg, cfg.prolog_slurmctld, env, "PrologSlurmctld")
        if result.ok:
            launch()
        else:
            log.error("job %d: %s; requeued", job_id, result.message)
            requeue(result.message)

    threading.Thread(target=body, name=f"prolog_slurmctld-{job_id}", daemon=True).start()


def epilog_slurmctld(cfg: SlurmConfig, job: JobRecord) -> None:
    """EpilogSlurmctld for a job that just ended, on a thread; a failure is logged."""
    if not cfg.epilog_slurmctld:
        return
    env = slurmctld_environment(cfg, job, "epilog_slurmctld")
    job_id = job.job_id

    def body() -> None:
        result = _run(cfg, cfg.epilog_slurmctld, env, "EpilogSlurmctld")
        if not result.ok:
            log.error("job %d: %s", job_id, result.message)

    threading.Thread(target=body, name=f"epilog_slurmctld-{job_id}", daemon=True).start()


def gpu_idle_notify(cfg: SlurmConfig, job: JobRecord, program: str, idle_since: int) -> None:
    """The site's shoal_gpu_idle_notify program for a job flagged idle, as SlurmUser on a thread, with
    the job's environment (SLURM_JOB_ID, SLURM_JOB_USER, ...) and SHOAL_GPU_IDLE_SINCE (unix time)."""
    env = slurmctld_environment(cfg, job, "gpu_idle")
    env["SHOAL_GPU_IDLE_SINCE"] = str(idle_since)
    job_id = job.job_id

    def body() -> None:
        result = _run(cfg, (program,), env, "shoal_gpu_idle_notify")
        if not result.ok:
            log.error("job %d: %s", job_id, result.message)

    threading.Thread(target=body, name=f"gpu_idle_notify-{job_id}", daemon=True).start()
