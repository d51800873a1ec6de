"""The job's identity as Slurm gives it to a Prolog or Epilog (noded's and ctld's alike).

Slurm's prolog/epilog guide: who and what the job is, never the user's environment, and no PATH.
Each caller adds what only it knows (the node, its GPUs, SLURM_SCRIPT_CONTEXT, the exit code).
"""

from __future__ import annotations

import grp

from shoal.jobview import JobView


def job_environment(job: JobView, cluster_name: str, slurm_conf: str) -> dict[str, str]:
    try:
        group = grp.getgrgid(job.group_id).gr_name
    except KeyError:
        group = str(job.group_id)
    env = {
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOBID": str(job.job_id),
        "SLURM_JOB_NAME": job.spec.name,
        "SLURM_JOB_USER": job.user_name,
        "SLURM_JOB_UID": str(job.user_id),
        "SLURM_JOB_GID": str(job.group_id),
        "SLURM_JOB_GROUP": group,
        "SLURM_JOB_NODELIST": job.nodes,
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_JOB_ACCOUNT": job.account,
        "SLURM_CLUSTER_NAME": cluster_name,
        "SLURM_CONF": slurm_conf,
    }
    if job.array_job_id and job.array_task_id >= 0:
        env["SLURM_ARRAY_JOB_ID"] = str(job.array_job_id)
        env["SLURM_ARRAY_TASK_ID"] = str(job.array_task_id)
    if job.spec.reservation:
        env["SLURM_JOB_RESERVATION"] = job.spec.reservation
    if job.restarts:
        env["SLURM_RESTART_COUNT"] = str(job.restarts)
    return env
