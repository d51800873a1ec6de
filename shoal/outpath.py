"""Resolve Slurm's --output/--error/--input filename patterns (%j, %x, %A_%a ...) for one job.

sbatch stores the pattern as the user typed it; the node that runs the batch script turns it into
a path, because only then are the node name and (for array tasks) the task's own job id known.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

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
    return _compiled(pattern, job, node)(job)


def resolve_streams(job: JobView, node: str) -> tuple[str, str, str]:
    """(stdout, stderr, stdin) paths for the batch script: Slurm's defaults filled in."""
    return stream_resolver(job, node)(job)


def stream_resolver(job: JobView, node: str) -> Callable[[JobView], tuple[str, str, str]]:
    """`resolve_streams` for `job` and for any job alike but for its ids (the tasks of one array, built
    from one prototype): the patterns are read once, only %j, %J, %A and %a filled in per job."""
    spec = job.spec
    default = DEFAULT_ARRAY_OUTPUT if job.array_job_id else DEFAULT_OUTPUT  # an array's meta record too
    out = _compiled(spec.std_out or default, job, node)
    err = _compiled(spec.std_err, job, node) if spec.std_err else out
    stdin = _compiled(spec.std_in, job, node) if spec.std_in else None

    def resolve(task: JobView) -> tuple[str, str, str]:
        path = out(task)
        return path, err(task) if err is not out else path, stdin(task) if stdin else "/dev/null"

    return resolve


def _compiled(pattern: str, job: JobView, node: str) -> Callable[[JobView], str]:
    """The pattern as literal text and the tokens that differ between `job` and a job alike but for its
    ids; what does not differ (%x, %u, %N ...) is filled in from `job` now."""
    base = job.spec.work_dir or "/"
    if "\\" in pattern:
        literal = pattern.replace("\\", "")
        return lambda _task: _absolute(literal, base)
    parts: list[str | tuple[str, str]] = []
    at = 0
    for match in _TOKEN.finditer(pattern):
        parts.append(pattern[at : match.start()])
        width, letter = match.group(1), match.group(2)
        parts.append((width, letter) if letter in _PER_JOB else _formatted(_value(letter, job, node), width))
        at = match.end()
    parts.append(pattern[at:])

    def expand(task: JobView) -> str:
        text = "".join(p if isinstance(p, str) else _formatted(_value(p[1], task, node), p[0]) for p in parts)
        return _absolute(text, base)

    return expand


_PER_JOB = frozenset("jJAa")


def _formatted(value: str | int, width: str) -> str:
    if isinstance(value, int) and width:
        return str(value).zfill(int(width))
    return str(value)


def _absolute(path: str, work_dir: str) -> str:
    return path if os.path.isabs(path) else os.path.join(work_dir, path)
