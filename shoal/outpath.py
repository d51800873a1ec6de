"""Resolve Slurm's --output/--error/--input filename patterns (%j, %x, %A_%a ...) for one job.

sbatch stores the pattern as the user typed it; the node that runs the batch script turns it into
a path, because only then are the node name and (for array tasks) the task's own job id known.
"""

from __future__ import annotations

import os
import re

from shoal.jobview import JobView

# Slurm prints NO_VAL (0xfffffffe) for %a when the job is not an array task.
NO_VAL = 4294967294

DEFAULT_OUTPUT = "slurm-%j.out"
DEFAULT_ARRAY_OUTPUT = "slurm-%A_%a.out"

_TOKEN = re.compile(r"%(\d*)([%AaJjNnstux])")


def _is_array_task(job: JobView) -> bool:
    return job.array_job_id != 0 and job.array_task_id >= 0


def _value(letter: str, job: JobView, node: str) -> str | int:
    """The replacement for one pattern letter; ints get zero-padded when a width is given."""
    array_task = _is_array_task(job)
    if letter == "j" or letter == "J":
        return job.job_id
    if letter == "A":
        return job.array_job_id if array_task else job.job_id
    if letter == "a":
        return job.array_task_id if array_task else NO_VAL
    if letter == "x":
        return job.spec.name
    if letter == "u":
        return job.user_name
    if letter == "N":
        return node.split(".")[0]
    if letter == "n" or letter == "t":
        return 0
    if letter == "s":
        return "batch"
    return "%"


def resolve_output_path(pattern: str, job: JobView, node: str) -> str:
    """Expand a filename pattern for the batch step of `job` on `node` into an absolute path.

    A pattern holding a backslash is taken literally (backslashes dropped), as sbatch documents.
    Relative results are relative to the job's working directory.
    """
    if "\\" in pattern:
        path = pattern.replace("\\", "")
    else:

        def replace(match: re.Match[str]) -> str:
            width, letter = match.group(1), match.group(2)
            value = _value(letter, job, node)
            if isinstance(value, int) and width:
                return str(value).zfill(int(width))
            return str(value)

        path = _TOKEN.sub(replace, pattern)
    if not os.path.isabs(path):
        path = os.path.join(job.spec.work_dir or "/", path)
    return path


def resolve_streams(job: JobView, node: str) -> tuple[str, str, str]:
    """(stdout, stderr, stdin) paths for the batch script: Slurm's defaults filled in."""
    spec = job.spec
    default = DEFAULT_ARRAY_OUTPUT if job.array_job_id else DEFAULT_OUTPUT  # an array's meta record too
    out = resolve_output_path(spec.std_out or default, job, node)
    err = resolve_output_path(spec.std_err, job, node) if spec.std_err else out
    stdin = resolve_output_path(spec.std_in, job, node) if spec.std_in else "/dev/null"
    return out, err, stdin
