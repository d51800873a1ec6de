"""One step's cgroup inside its job's (Slurm's <job>/step_<id> and <job>/step_batch).

The step supervisor makes it before the tasks start and removes it after they end. The job's
group holds the job's limits and no process of its own (cgroup v2 allows processes only in
leaves once controllers are enabled for children), so the batch script lives in step_batch.
"""

from __future__ import annotations

from noded.cgroup.job import CgroupError, CgroupRequest, JobCgroup

BATCH = "step_batch"


def step_name(step_id: int) -> str:
    return f"step_{step_id}"


def oom_note(step: str, count: int) -> str:
    """What slurmstepd says on the step's stderr after the kernel's OOM killer struck."""
    return (
        f"slurmstepd: error: Detected {count} oom-kill event(s) in StepId={step} cgroup. "
        "Some of your processes may have been killed by the cgroup out-of-memory handler.\n"
    )


class StepCgroup:
    """Create, join, inspect and remove one step's group (and its job's group when missing)."""

    def __init__(self, job: CgroupRequest, step: CgroupRequest) -> None:
        self.job = JobCgroup(job)
        self.step = JobCgroup(step, make_parents=False)
        self.job_ooms = 0  # the job group's OOM kills before this step started (other steps' own)

    def create(self, attempts: int = 3) -> None:
        """The job's group first when it is not there (a node without a batch script, or the last
        step's cleanup removed it meanwhile), then the step's."""
        for attempt in range(attempts):
            try:
                if not self.job.exists():
                    self.job.create()
                self.step.create()
                self.job_ooms = self.job.oom_count()
                return
            except CgroupError:
                if attempt == attempts - 1:
                    raise

    def attach(self, pid: int) -> None:
        self.step.attach(pid)

    def oom_count(self) -> int:
        """OOM kills of this step's processes, at its own limit or at the job's (a step without
        --mem). The kernel counts a kill in the victim's group (v2 also in its parents, so the job's
        count would repeat it); older v1 kernels count it where the limit was hit, hence the job's
        increase since the step started."""
        if self.step.req.version == "v2":
            return self.step.oom_count()
        return max(self.step.oom_count(), self.job.oom_count() - self.job_ooms)

    def remove(self) -> None:
        """Remove the step's group (killing what is left in it), and the job's once it is empty."""
        self.step.remove()
