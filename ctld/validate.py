"""Every field of a submitted JobSpec checked by ctld itself, with Slurm's limits and words.

The commands check their options too, but they are not a trust boundary: anyone with a credential can
send a crafted SubmitJob. So before the controller builds anything from a spec, this module refuses
values that are out of Slurm's ranges, that would overflow a field later (an INTERNAL error), or that
would make one request cost unbounded memory or time. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctld.errors import NODE_CONFIG_UNAVAILABLE, NODE_COUNT_INVALID, SlurmError
from shoal.arrayspec import INVALID as INVALID_ARRAY
from shoal.arrayspec import MAX_ARRAY_SIZE_LIMIT, check_array
from shoal.v1 import jobs_pb2

TOO_LONG = "Pathname of a file, directory or other parameter too long"
TASK_COUNT_INVALID = "Task count specification invalid"
INVALID_TIME_LIMIT = "Requested time limit is invalid (missing or exceeds some limit)"
INVALID_TIME = "Invalid time specified"
INVALID_NICE = "Invalid --nice value"
INVALID_SIGNAL = "Invalid --signal specification"
INVALID_SPEC = "Invalid job specification"

INT32_MAX = 2**31 - 1
NICE_MAX = 2147483645  # Slurm's NICE_OFFSET - 3: the largest |--nice|
DEFAULT_MAX_SCRIPT_SIZE = 4 * 1024 * 1024  # SchedulerParameters max_script_size default (4 MB)
MAX_SCRIPT_SIZE_LIMIT = 512 * 1024 * 1024  # the largest max_script_size Slurm accepts
MAX_ARG_STRLEN = 128 * 1024  # one argument or environment string execve takes (Linux)
MAX_ARGS_BYTES = 2 * 1024 * 1024  # argv + environment a job's execve takes (ARG_MAX of an 8 MB stack)
MAX_TIME_MIN = 0xFFFFFFFD  # Slurm's largest finite time limit (below NO_VAL and INFINITE)
MAX_BEGIN = 253402300799  # 9999-12-31T23:59:59Z: the last time squeue can print
MAX_SIGNAL = 0x7FFFFFFF  # 22.05 takes any positive number (`sbatch --signal=9999`); kill() refuses it later
MAX_SIGNAL_SECS = 0xFFFF  # Slurm keeps --signal's @time in 16 bits
MAX_REQUEST_BYTES = 256 * 1024 * 1024  # what one SubmitJob may cost: its records (one per array task)

# Slurm's length limits per field (its names in comments where they differ); any other string 4096.
_STRING_LIMITS = {
    "account": 1024,
    "array": 4 * 1024,  # array_inx
    "comment": 1024,
    "dependency": 128 * 1024,
    "constraint": 1024,  # features
    "licenses": 1024,
    "mail_user": 1024,
    "name": 1024,
    "partition": 1024,
    "qos": 1024,
    "nodelist": 64 * 1024,  # req_nodes
    "exclude": 64 * 1024,  # exc_nodes
    "reservation": 1024,
    "wckey": 1024,
}
_PATH_MAX = 4096  # MAXPATHLEN: std_out, std_err, std_in, work_dir and every other string
# every single string field of JobSpec, so one added later is bounded too
_STRING_FIELDS = tuple(
    (f.name, _STRING_LIMITS.get(f.name, _PATH_MAX))
    for f in jobs_pb2.JobSpec.DESCRIPTOR.fields
    if f.type == f.TYPE_STRING and not f.is_repeated
)
_COUNTS = (
    "min_nodes",
    "max_nodes",
    "num_tasks",
    "ntasks_per_node",
    "cpus_per_task",
    "cpus_per_gpu",
    "threads_per_core",
    "switches",
)
_MEMORY = ("mem_per_node_mb", "mem_per_cpu_mb", "mem_per_gpu_mb")
MAX_MEMORY_MB = 2**40  # one exbibyte: beyond any node, and far from overflowing a product


@dataclass(frozen=True)
class Limits:
    """The slurm.conf limits a submission is checked against."""

    max_script_size: int = DEFAULT_MAX_SCRIPT_SIZE
    max_array_size: int = 1001


def limits_from(max_array_size: int, scheduler_parameters: tuple[str, ...]) -> Limits:
    """MaxArraySize and SchedulerParameters max_script_size= (a value that is not a number is ignored)."""
    size = DEFAULT_MAX_SCRIPT_SIZE
    for word in scheduler_parameters:
        key, _, value = word.partition("=")
        if key.strip().lower() == "max_script_size" and value.strip().isascii() and value.strip().isdigit():
            size = min(int(value.strip()), MAX_SCRIPT_SIZE_LIMIT)
    return Limits(max_script_size=size, max_array_size=min(max_array_size, MAX_ARRAY_SIZE_LIMIT))


def validate_spec(spec: jobs_pb2.JobSpec, limits: Limits, operator: bool) -> None:
    """Refuse (SlurmError) a spec ctld must not accept.

    Cheap and bounded whatever the spec holds: every check is linear in the request's size, and the
    array is checked for syntax and MaxArraySize before any task id is built."""
    _check_strings(spec, limits)
    _check_counts(spec)
    _check_times(spec)
    if spec.signal_num < 0 or spec.signal_num > MAX_SIGNAL or not 0 <= spec.signal_secs <= MAX_SIGNAL_SECS:
        raise SlurmError(INVALID_SIGNAL)
    if abs(spec.nice) > NICE_MAX or (spec.nice < 0 and not operator):
        raise SlurmError(INVALID_NICE)  # 22.05: only operators may raise a job's priority
    if spec.requeue not in (-1, 0, 1) or spec.switch_wait_s < -1:
        raise SlurmError(INVALID_SPEC)
    if spec.open_mode not in ("", "truncate", "append") or spec.kill_on_invalid_dep not in ("", "yes", "no"):
        raise SlurmError(INVALID_SPEC)
    count = _array_count(spec.array, limits.max_array_size)
    if spec.ByteSize() * count > MAX_REQUEST_BYTES:
        raise SlurmError(TOO_LONG)  # every task is a record with its own copy of the script


def _check_strings(spec: jobs_pb2.JobSpec, limits: Limits) -> None:
    if len(spec.script) > limits.max_script_size:
        raise SlurmError(TOO_LONG)
    for name, limit in _STRING_FIELDS:
        value: str = getattr(spec, name)
        if len(value) > limit or "\x00" in value:
            raise SlurmError(TOO_LONG)
    total = 0
    for arg in spec.argv:
        if len(arg) > MAX_ARG_STRLEN or "\x00" in arg:
            raise SlurmError(TOO_LONG)
        total += len(arg) + 9  # the string, its NUL and its pointer, as execve counts them
    for key, value in spec.environment.items():
        if len(key) + len(value) + 1 > MAX_ARG_STRLEN or not key or "=" in key or "\x00" in key + value:
            raise SlurmError(TOO_LONG)
        total += len(key) + len(value) + 10
        if total > MAX_ARGS_BYTES:  # more than the job's execve could take: it could never start
            raise SlurmError(TOO_LONG)
    if total > MAX_ARGS_BYTES:
        raise SlurmError(TOO_LONG)


def _check_counts(spec: jobs_pb2.JobSpec) -> None:
    if spec.min_nodes > INT32_MAX or spec.max_nodes > INT32_MAX:
        raise SlurmError(NODE_COUNT_INVALID)
    if any(getattr(spec, name) > INT32_MAX for name in _COUNTS):
        raise SlurmError(TASK_COUNT_INVALID)
    if any(getattr(spec, name) > MAX_MEMORY_MB for name in _MEMORY):
        raise SlurmError(NODE_CONFIG_UNAVAILABLE)
    tasks = spec.num_tasks or (spec.ntasks_per_node or 1) * max(1, spec.min_nodes)
    if tasks > INT32_MAX:
        raise SlurmError(TASK_COUNT_INVALID)
    per_task = max(1, spec.cpus_per_task)
    # the CPUs it asks (in all, and on one node) are kept in 32 bits: more than that is no configuration
    if tasks * per_task > INT32_MAX or max(1, spec.ntasks_per_node) * per_task > INT32_MAX:
        raise SlurmError(NODE_CONFIG_UNAVAILABLE)


def _check_times(spec: jobs_pb2.JobSpec) -> None:
    for value in (spec.time_limit_min, spec.time_min_min):
        if value not in (-1, -2) and not 0 <= value <= MAX_TIME_MIN:
            raise SlurmError(INVALID_TIME_LIMIT)
    if not 0 <= spec.begin_time <= MAX_BEGIN:
        raise SlurmError(INVALID_TIME)


def _array_count(text: str, max_size: int) -> int:
    """At most how many tasks the array makes (1 without one), checked without expanding it."""
    if not text:
        return 1
    try:
        ranges, _ = check_array(text)
    except ValueError as exc:
        raise SlurmError(INVALID_ARRAY) from exc
    if max(r[-1] for r in ranges) >= max_size:
        raise SlurmError(INVALID_ARRAY)
    return min(sum(len(r) for r in ranges), max_size)
