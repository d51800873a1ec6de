"""Job steps for `scontrol show step` and `squeue -s` (formatting only; the data is GetSteps)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cli.common import CommandError, ctld
from shoal.sizefmt import format_size_mb
from shoal.timefmt import format_duration, format_limit_squeue, format_time_limit, format_timestamp
from shoal.v1 import controller_pb2, jobs_pb2

BATCH_STEP = -4
EXTERN_STEP = -5  # PrologFlags=Contain
WAITING_STEP = -3  # an srun waiting for resources (scontrol show step only)
STEP_WORDS = {BATCH_STEP: "batch", EXTERN_STEP: "extern", WAITING_STEP: "TDB"}
STATE_NAMES = {v: k for k, v in jobs_pb2.JobState.items()}


def step_id_text(step: jobs_pb2.JobStep) -> str:
    return f"{step.job_id}.{STEP_WORDS.get(step.step_id, step.step_id)}"


def load_steps(
    ids: Iterable[str], include_finished: bool, include_waiting: bool = False
) -> tuple[list[jobs_pb2.JobStep], int]:
    request = controller_pb2.GetStepsRequest(
        step_ids=[i for i in ids if i], include_finished=include_finished, include_waiting=include_waiting
    )
    reply = ctld("GetSteps", request, controller_pb2.GetStepsResponse)
    # a job's waiting srun (J.TDB) after its steps, as 22.05's scontrol lists it
    steps = sorted(reply.steps, key=lambda s: (s.job_id, s.step_id == WAITING_STEP, s.step_id))
    return steps, reply.now


def run_time(step: jobs_pb2.JobStep, now: int) -> int:
    """Its wall time less the time its job was suspended meanwhile (TIME stops, as in 22.05)."""
    return max(0, (step.end_time or now) - step.start_time - step.suspended_secs)


def format_step(step: jobs_pb2.JobStep) -> str:
    """One `scontrol show step` record, as 22.05's for a running step: the batch step (and the extern)
    has no srun, and the batch step counts no CPUs or TRES of its own."""
    state = STATE_NAMES.get(step.state, "UNKNOWN")  # RUNNING while its job is suspended, as 22.05's
    batch = step.step_id == BATCH_STEP
    waiting = step.step_id == WAITING_STEP  # no name, TRES or distribution yet
    tres = f"cpu={step.num_cpus},{f'mem={format_size_mb(step.mem_mb)},' if step.mem_mb else ''}node={step.num_nodes}"
    dist = "Unknown" if waiting else (step.distribution or "block").partition("=")[0].capitalize()
    srun = f"{step.srun_host}:{step.srun_pid}" if step.srun_host else "(null):0"
    lines = [
        f"StepId={step_id_text(step)} UserId={step.user_id} StartTime={format_timestamp(step.start_time)} "
        f"TimeLimit={format_time_limit(step.time_limit_min)}",
        f"   State={state} Partition={step.partition} NodeList={step.nodes}",
        f"   Nodes={step.num_nodes} CPUs={0 if batch else step.num_cpus} Tasks={step.num_tasks}"
        f" Name={step.name or '(null)'} Network=(null)",
        f"   TRES={'(null)' if batch or waiting else tres}",
        "   ResvPorts=(null)",
        "   CPUFreqReq=Default" + ("" if batch else f" Dist={dist}"),
        f"   SrunHost:Pid={srun}",
    ]
    return "\n".join(lines) + "\n"


class StepNotFound(CommandError):
    """A known job without that step: 22.05 says so on stdout (`Job step 12.3 not found`), exit 1."""


def read_step_id(text: str) -> str:
    """`JOB.STEP` as 22.05's scontrol reads it: the step is a number, and a word there is step 0
    (`12.extern` and `12.batch` show 12.0, measured); JOB alone names every step of the job."""
    job, dot, step = text.partition(".")
    if not dot:
        return text
    digits = step[: len(step) - len(step.lstrip("0123456789"))]
    return f"{job}.{int(digits or 0)}"


def show_steps(step_id: str) -> list[str]:
    """Records for `scontrol show step [id]`: running steps only, since 22.05 forgets a step once it
    ends (`Job step J.0 not found` while its job still runs, MinJobAge=300: scenario 218)."""
    if step_id.lower().startswith("stepid="):
        step_id = step_id[7:]
    wanted = read_step_id(step_id)
    try:
        steps, _ = load_steps([wanted], include_finished=False, include_waiting=True)
    except CommandError as exc:
        raise CommandError(f"slurm_get_job_steps error: {exc.message}") from exc
    if not steps and step_id:
        job, dot, _ = wanted.partition(".")
        if dot and _job_known(job):
            raise StepNotFound(f"Job step {wanted} not found")
        raise CommandError("slurm_get_job_steps error: Invalid job id specified")
    return [format_step(s) for s in steps]


def _job_known(job: str) -> bool:
    request = controller_pb2.GetJobsRequest(job_id_strs=[job], include_finished=True, show_all=True)
    try:
        reply = ctld("GetJobs", request, controller_pb2.GetJobsResponse)
    except CommandError:
        return False
    return any(str(j.job_id) == job for j in reply.jobs)


def squeue_rows(
    value_of: Callable[[jobs_pb2.JobStep, int], Callable[[str], str]],
    ids: Iterable[str],
    wanted: Callable[[jobs_pb2.JobStep], bool],
) -> list[Callable[[str], str]]:
    """The running steps `ids` names ("12", "12.0"; all without) that `wanted` keeps, as squeue -s rows."""
    steps, now = load_steps(ids, include_finished=False)
    return [value_of(s, now) for s in sorted(steps, key=squeue_order) if wanted(s)]


def squeue_order(step: jobs_pb2.JobStep) -> tuple[int, int, int]:
    """squeue -s's order in 22.05: by job, its numbered steps first, then `.batch`, then `.extern`."""
    return (step.job_id, 1, -step.step_id) if step.step_id < 0 else (step.job_id, 0, step.step_id)


def squeue_value(step: jobs_pb2.JobStep, now: int) -> Callable[[str], str]:
    """squeue -s's % letters for one step."""
    values = {
        "i": step_id_text(step),
        "j": step.name,
        "P": step.partition,
        "u": step.user_name,
        "U": str(step.user_id),
        "b": "(null)",  # what a step asked for with --gres/--gpus is not kept; 22.05's are (null) without
        "C": str(
            0 if step.step_id == BATCH_STEP else step.num_cpus
        ),  # as scontrol show step: none of its own
        "jobid": str(step.job_id),
        "network": "(null)",
        "tres-per-step": "(null)",
        "tres-per-task": "(null)",
        "tres-per-socket": "(null)",
        "tres-bind": "(null)",
        "tres-freq": "(null)",
        "M": format_duration(run_time(step, now)),
        "N": step.nodes,
        "T": STATE_NAMES.get(step.state, "UNKNOWN"),
        "l": format_limit_squeue(step.time_limit_min),  # squeue's form: srun -t 1 is "1:00" (22.05)
        "S": format_timestamp(step.start_time),
        "A": str(step.num_tasks),
    }
    return lambda key: values.get(key, "")
