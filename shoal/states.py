"""Job and node state names as Slurm prints them (long, compact), and what counts as finished."""

from __future__ import annotations

from shoal.jobview import JobView
from shoal.v1 import jobs_pb2

JobState = jobs_pb2.JobState

# Long names (squeue -t/%T, scontrol JobState=) and compact codes (squeue %t / ST).
JOB_STATE_NAMES: dict[int, str] = {
    jobs_pb2.PENDING: "PENDING",
    jobs_pb2.RUNNING: "RUNNING",
    jobs_pb2.SUSPENDED: "SUSPENDED",
    jobs_pb2.COMPLETING: "COMPLETING",
    jobs_pb2.COMPLETED: "COMPLETED",
    jobs_pb2.FAILED: "FAILED",
    jobs_pb2.CANCELLED: "CANCELLED",
    jobs_pb2.TIMEOUT: "TIMEOUT",
    jobs_pb2.NODE_FAIL: "NODE_FAIL",
    jobs_pb2.OUT_OF_MEMORY: "OUT_OF_MEMORY",
    jobs_pb2.PREEMPTED: "PREEMPTED",
    jobs_pb2.REQUEUED: "REQUEUED",
    jobs_pb2.BOOT_FAIL: "BOOT_FAIL",
    jobs_pb2.DEADLINE: "DEADLINE",
}

JOB_STATE_CODES: dict[int, str] = {
    jobs_pb2.PENDING: "PD",
    jobs_pb2.RUNNING: "R",
    jobs_pb2.SUSPENDED: "S",
    jobs_pb2.COMPLETING: "CG",
    jobs_pb2.COMPLETED: "CD",
    jobs_pb2.FAILED: "F",
    jobs_pb2.CANCELLED: "CA",
    jobs_pb2.TIMEOUT: "TO",
    jobs_pb2.NODE_FAIL: "NF",
    jobs_pb2.OUT_OF_MEMORY: "OOM",
    jobs_pb2.PREEMPTED: "PR",
    jobs_pb2.REQUEUED: "RQ",
    jobs_pb2.BOOT_FAIL: "BF",
    jobs_pb2.DEADLINE: "DL",
}

# What users may type for -t/--states (long names, compact codes, any case).
JOB_STATE_BY_NAME: dict[str, int] = {
    **{name: value for value, name in JOB_STATE_NAMES.items()},
    **{code: value for value, code in JOB_STATE_CODES.items()},
}

FINISHED_STATES: frozenset[int] = frozenset(
    {
        jobs_pb2.COMPLETED,
        jobs_pb2.FAILED,
        jobs_pb2.CANCELLED,
        jobs_pb2.TIMEOUT,
        jobs_pb2.NODE_FAIL,
        jobs_pb2.OUT_OF_MEMORY,
        jobs_pb2.PREEMPTED,
        jobs_pb2.BOOT_FAIL,
        jobs_pb2.DEADLINE,
    }
)

ACTIVE_STATES: frozenset[int] = frozenset({jobs_pb2.RUNNING, jobs_pb2.SUSPENDED, jobs_pb2.COMPLETING})


def job_state_name(state: int) -> str:
    return JOB_STATE_NAMES.get(state, "UNKNOWN")


def job_state_code(state: int) -> str:
    return JOB_STATE_CODES.get(state, "?")


def parse_job_states(text: str) -> set[int] | None:
    """`-t pd,r` -> state set; None means 'all'. Raises ValueError naming a bad state."""
    wanted: set[int] = set()
    for word in text.split(","):
        word = word.strip().upper()
        if not word:
            continue
        if word == "ALL":
            return None
        if word not in JOB_STATE_BY_NAME:
            raise ValueError(f"Invalid job state specified: {word.lower()}")
        wanted.add(JOB_STATE_BY_NAME[word])
    return wanted


# Node states (sinfo compact names, scontrol long names).
NODE_BASE_STATES = ("IDLE", "ALLOCATED", "MIXED", "DOWN", "UNKNOWN", "FUTURE")

NODE_STATE_SHORT: dict[str, str] = {
    "IDLE": "idle",
    "ALLOCATED": "alloc",
    "MIXED": "mix",
    "DOWN": "down",
    "UNKNOWN": "unk",
    "FUTURE": "futr",
    "COMPLETING": "comp",
}


def run_seconds(job: JobView, now: int) -> int:
    """Seconds a job has run (squeue TIME, RunTime=, Elapsed): 0 while pending, the run before the
    latest suspension while suspended, and never the time it spent suspended."""
    if job.state == jobs_pb2.PENDING or job.start_time <= 0:
        return 0
    if job.state == jobs_pb2.SUSPENDED:
        return job.pre_suspend_secs
    if job.state in (jobs_pb2.RUNNING, jobs_pb2.COMPLETING) or job.end_time <= 0:
        end = now
    else:
        end = job.end_time
    return max(end - job.start_time - job.suspended_secs, 0)
