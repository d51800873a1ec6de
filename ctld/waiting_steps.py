"""sruns waiting inside their allocation for CPUs, memory or GPUs that other steps hold: 22.05's
scontrol show step lists each as a `J.TDB` record, State=PENDING (squeue -s does not).

Memory only, never saved: a waiting srun asks again every half second, so an entry it has not renewed
for a few seconds is an srun that gave up (Ctrl-C, killed) and is no longer listed; after a restart
the next ask lists it again.
"""

from __future__ import annotations

from shoal.timefmt import UNLIMITED
from shoal.v1 import controller_pb2, jobs_pb2

WAITING_STEP = -3  # shown as `J.TDB` (Slurm's pending step id)
STALE_S = 3  # not asked again for this long: the srun stopped waiting

SrunKey = tuple[int, str, int]  # job id, srun's host and pid


def waiting_record(
    req: controller_pb2.CreateStepRequest, job_nodes: str, partition: str, user_id: int
) -> jobs_pb2.JobStep:
    """The record 22.05 shows for a waiting srun: what it asks (tasks, CPUs), the job's nodes, no
    start, no name and no limit of its own (its -t is not shown until the step exists)."""
    tasks = max(req.num_tasks, 1)
    return jobs_pb2.JobStep(
        job_id=req.job_id,
        step_id=WAITING_STEP,
        state=jobs_pb2.PENDING,
        nodes=job_nodes,
        num_nodes=max(req.min_nodes, 1),
        num_tasks=tasks,
        num_cpus=tasks * max(req.cpus_per_task, 1),
        user_id=user_id,
        partition=partition,
        time_limit_min=UNLIMITED,
        srun_host=req.srun_host,
        srun_pid=req.srun_pid,
    )


class WaitingSteps:
    """The sruns told to retry, by (job, srun host, srun pid), with when each last asked."""

    def __init__(self) -> None:
        self._asked: dict[SrunKey, tuple[jobs_pb2.JobStep, int]] = {}

    def note(self, record: jobs_pb2.JobStep, now: int) -> None:
        self._asked[(record.job_id, record.srun_host, record.srun_pid)] = (record, now)
        for key in [k for k, (_, seen) in self._asked.items() if now - seen > STALE_S]:
            del self._asked[key]

    def drop(self, job_id: int, srun_host: str, srun_pid: int) -> None:
        """The srun got its step, or was refused for good."""
        self._asked.pop((job_id, srun_host, srun_pid), None)

    def of_job(self, job_id: int, now: int) -> list[jobs_pb2.JobStep]:
        return [
            record
            for (job, _, _), (record, seen) in sorted(self._asked.items())
            if job == job_id and now - seen <= STALE_S
        ]
