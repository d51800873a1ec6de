"""squeue: list jobs the way Slurm 22.05 prints them.

The command is a thin shell around pure functions (filter, group array tasks, sort, render) that take
JobInfo messages and the controller's clock, so tests build messages directly. It imports no grpc: the
controller is reached through the local agent, loaded only when the query runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from cli import fmt
from cli.options import OptionError, refuse_as_getopt
from shoal import states, version_line
from shoal.depshow import shown_dependency
from shoal.hostlist import collect
from shoal.timefmt import format_duration, format_limit_squeue, format_timestamp
from shoal.v1 import jobs_pb2

if TYPE_CHECKING:
    from shoal.v1 import controller_pb2

PROG = "squeue"

DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
STEPS_FORMAT = "%.15i %.8j %.9P %.8u %.9M %N"
DEFAULT_SORT = "P,t,-p"
START_SORT = "S,i"
ACCESS_DENIED = "Access/permission denied"

# What `-t` shows when not given: every job that has not finished yet.
UNFINISHED = frozenset(
    {jobs_pb2.PENDING, jobs_pb2.RUNNING, jobs_pb2.SUSPENDED, jobs_pb2.COMPLETING, jobs_pb2.REQUEUED}
)
# States whose %R shows the reason rather than the nodes (Slurm shows why these ended).
_REASON_STATES = frozenset(
    {jobs_pb2.PENDING, jobs_pb2.FAILED, jobs_pb2.TIMEOUT, jobs_pb2.OUT_OF_MEMORY, jobs_pb2.DEADLINE}
)

HEADERS: dict[str, str] = {
    "a": "ACCOUNT", "A": "JOBID", "b": "TRES_PER_NODE", "B": "EXEC_HOST", "c": "MIN_CPUS", "C": "CPUS",
    "d": "MIN_TMP_DISK", "D": "NODES", "e": "END_TIME", "E": "DEPENDENCY", "f": "FEATURES",
    "F": "ARRAY_JOB_ID", "g": "GROUP", "G": "GROUP", "h": "OVER_SUBSCRIBE", "H": "SOCKETS_PER_NODE",
    "i": "JOBID", "I": "CORES_PER_SOCKET", "j": "NAME", "J": "THREADS_PER_CORE", "k": "COMMENT",
    "K": "ARRAY_TASK_ID", "l": "TIME_LIMIT", "L": "TIME_LEFT", "m": "MIN_MEMORY", "M": "TIME",
    "n": "REQ_NODES", "N": "NODELIST", "o": "COMMAND", "O": "CONTIGUOUS", "p": "PRIORITY",
    "P": "PARTITION", "q": "QOS", "Q": "PRIORITY", "r": "REASON", "R": "NODELIST(REASON)",
    "s": "SELECT", "S": "START_TIME", "t": "ST", "T": "STATE", "u": "USER", "U": "UID",
    "v": "RESERVATION", "V": "SUBMIT_TIME", "w": "WCKEY", "W": "LICENSES", "x": "EXC_NODES",
    "X": "CORE_SPEC", "y": "NICE", "Y": "SCHEDNODES", "z": "S:C:T", "Z": "WORK_DIR",
}  # fmt: skip

# -O names -o has no letter for, added to shoal from 22.05 (measured: its headers, VIALBLE included);
# each is its own key in _VALUES
LONG_ONLY_HEADERS: dict[str, str] = {
    "admin_comment": "ADMIN_COMMENT", "allocsid": "ALLOC_SID", "boardspernode": "BOARDS_PER_NODE",
    "burstbuffer": "BURST_BUFFER", "burstbufferstate": "BURST_BUFFER_STATE",
    "clusterfeature": "CLUSTER_FEATURES", "container": "CONTAINER", "cores": "CORES_PER_SOCKET",
    "cpus-per-tres": "CPUS_PER_TRES", "deadline": "DEADLINE", "delayboot": "DELAY_BOOT",
    "derivedec": "DERIVED_EC", "hetjobid": "HET_JOB_ID", "hetjobidset": "HET_JOB_ID_SET",
    "hetjoboffset": "HET_JOB_OFFSET", "maxcpus": "MAX_CPUS", "maxnodes": "MAX_NODES",
    "mcslabel": "MCSLABEL", "mem-per-tres": "MEM_PER_TRES", "mintime": "TIME_MIN", "network": "NETWORK",
    "ntperboard": "NTASKS_PER_BOARD", "ntpercore": "NTASKS_PER_CORE", "ntpernode": "NTASKS_PER_NODE",
    "ntpersocket": "NTASKS_PER_SOCKET", "origin": "ORIGIN", "originraw": "ORIGIN_RAW",
    "preempttime": "PREEMPT_TIME", "prefer": "PREFER", "profile": "PROFILE", "reboot": "REBOOT",
    "reqswitch": "REQ_SWITCH", "resizetime": "RESIZE_TIME", "siblingsactive": "ACTIVE_SIBLINGS",
    "siblingsactiveraw": "ACTIVE_SIBLINGS_RAW", "siblingsviable": "VIABLE_SIBLINGS",
    "siblingsviableraw": "VIALBLE_SIBLINGS_RAW", "sockets": "SOCKETS_PER_NODE",
    "sperboard": "SOCKETS_PER_BOARD", "system_comment": "SYSTEM_COMMENT", "threads": "THREADS_PER_CORE",
    "tres-bind": "TRES_BIND", "tres-freq": "TRES_FREQ", "tres-per-job": "TRES_PER_JOB",
    "tres-per-socket": "TRES_PER_SOCKET", "tres-per-task": "TRES_PER_TASK", "wait4switch": "WAIT4SWITCH",
}  # fmt: skip

# -O/--Format names (lower-case) -> the -o letter, or a key of LONG_ONLY for fields -o lacks.
LONG_NAMES: dict[str, str] = {
    "account": "a", "arrayjobid": "F", "arraytaskid": "K", "batchhost": "B", "command": "o",
    "comment": "k", "contiguous": "O", "dependency": "E", "endtime": "e", "feature": "f",
    "groupid": "G", "groupname": "g", "jobarrayid": "i", "licenses": "W", "mincpus": "c",
    "minmemory": "m", "mintmpdisk": "d", "name": "j", "nice": "y", "nodelist": "N", "numcpus": "C",
    "numnodes": "D", "oversubscribe": "h", "partition": "P", "priority": "p", "prioritylong": "Q",
    "qos": "q", "reason": "r", "reasonlist": "R", "reqnodes": "n", "reservation": "v",
    "schednodes": "Y", "sct": "z", "starttime": "S", "state": "T", "statecompact": "t",
    "submittime": "V", "timeleft": "L", "timelimit": "l", "timeused": "M", "tres-per-node": "b",
    "userid": "U", "username": "u", "wckey": "w", "workdir": "Z", "excnodes": "x",
    "jobid": "jobid", "numtasks": "numtasks", "cpus-per-task": "cpus-per-task", "stdout": "stdout",
    "stderr": "stderr", "stdin": "stdin", "exit_code": "exit_code", "eligibletime": "eligibletime",
    "accruetime": "accruetime", "lastschedeval": "lastschedeval", "tres-alloc": "tres-alloc",
    "pendingtime": "pendingtime", "requeue": "requeue", "restartcnt": "restartcnt",
    "batchflag": "batchflag", "alloc_nodes": "allocnodes", "allocnodes": "allocnodes",
    "corespec": "X", **{name: name for name in LONG_ONLY_HEADERS},
}  # fmt: skip

LONG_HEADERS: dict[str, str] = {
    "jobid": "JOBID", "numtasks": "TASKS", "cpus-per-task": "CPUS_PER_TASK", "stdout": "STDOUT",
    "stderr": "STDERR", "stdin": "STDIN", "exit_code": "EXIT_CODE", "eligibletime": "ELIGIBLE_TIME",
    "accruetime": "ACCRUE_TIME", "lastschedeval": "LAST_SCHED_EVAL", "tres-alloc": "TRES_ALLOC",
    "pendingtime": "PENDING_TIME", "requeue": "REQUEUE", "restartcnt": "RESTART_COUNT",
    "batchflag": "BATCH_FLAG", "allocnodes": "ALLOC_NODES", "W": "LICENSES", "s": "SELECT",
    **LONG_ONLY_HEADERS,
}  # fmt: skip


class Row(NamedTuple):
    """One output line: a job, or the pending tasks of one array shown together (task_str "1-3")."""

    job: jobs_pb2.JobInfo
    task_str: str = ""


class JobFilter:
    """What -t/-u/-j/-p/-n/-A/-q/-w/-R select; None means no filter on that field."""

    def __init__(
        self,
        *,
        states: frozenset[int] | None = UNFINISHED,
        user_ids: set[int] | None = None,
        job_ids: list[tuple[int, int | None]] | None = None,
        partitions: set[str] | None = None,
        names: set[str] | None = None,
        accounts: set[str] | None = None,
        qos: set[str] | None = None,
        nodes: set[str] | None = None,
        pending_only: bool = False,
        reservations: set[str] | None = None,
    ) -> None:
        self.states = states
        self.user_ids = user_ids
        self.job_ids = job_ids
        self.partitions = partitions
        self.names = names
        self.accounts = accounts
        self.qos = qos
        self.nodes = nodes
        self.pending_only = pending_only
        self.reservations = reservations


# --- values ------------------------------------------------------------------------------------


def _null(text: str) -> str:
    return text if text else "(null)"


def job_id_str(row: Row) -> str:
    """%i: "12", "30_2", or "30_[1-3]" for pending tasks shown together."""
    job = row.job
    task_str = row.task_str or job.array_task_str
    if job.array_job_id and task_str:
        return f"{job.array_job_id}_[{task_str}]"
    if job.array_job_id and job.array_task_id >= 0:
        return f"{job.array_job_id}_{job.array_task_id}"
    return str(job.job_id)


def time_used(job: jobs_pb2.JobInfo, now: int) -> int:
    """Seconds a job has run: 0 while pending, up to now while running, start to end once over;
    time spent suspended is not run time."""
    return states.run_seconds(job, now)


def _time_left(job: jobs_pb2.JobInfo, now: int) -> str:
    if job.time_limit_min == -2:
        return "UNLIMITED"
    if job.time_limit_min < 0:
        return "N/A"
    return format_duration(max(job.time_limit_min * 60 - time_used(job, now), 0))


def _reason(job: jobs_pb2.JobInfo) -> str:
    return job.state_reason or "None"


def _start_time(job: jobs_pb2.JobInfo) -> int:
    """When the job started or is expected to; a pending job waits at least until its --begin time."""
    if job.state == jobs_pb2.PENDING and job.spec.begin_time > job.start_time:
        return job.spec.begin_time
    return max(job.start_time, 0)


def _reason_list(job: jobs_pb2.JobInfo) -> str:
    if job.state in states.FINISHED_STATES and not job.nodes:
        return ""  # as 22.05: a job that ended without ever running shows neither nodes nor reason
    if job.state in _REASON_STATES or not job.nodes:
        return f"({_reason(job)})"
    return job.nodes


def _memory(job: jobs_pb2.JobInfo) -> str:
    from shoal.sizefmt import format_size_mb

    if job.min_memory_cpu_mb:
        return format_size_mb(job.min_memory_cpu_mb)
    if job.min_memory_node_mb:
        return format_size_mb(job.min_memory_node_mb)
    return "0"


def _array_task(row: Row) -> str:
    job = row.job
    if row.task_str or job.array_task_str:
        return row.task_str or job.array_task_str
    if job.array_job_id and job.array_task_id >= 0:
        return str(job.array_task_id)
    return "N/A"


def _jobid_plain(row: Row) -> str:
    """-O JobID: the bare id (the array's id for tasks shown together)."""
    if row.task_str:
        return str(row.job.array_job_id)
    return str(row.job.job_id)


def _record_id(job: jobs_pb2.JobInfo) -> str:
    """%A: the id of the record that holds the job: the array's for a task still in its array's pending
    record, the task's own once it started or was split off (22.05: each running task's own id)."""
    from shoal.jobview import in_array_record

    return str(job.array_job_id if job.array_job_id and in_array_record(job) else job.job_id)


_VALUES: dict[str, Callable[[Row, int], str]] = {
    "a": lambda r, now: r.job.account,
    "A": lambda r, now: _record_id(r.job),
    "b": lambda r, now: r.job.tres_per_node or "N/A",
    "B": lambda r, now: r.job.batch_host or "n/a",
    "c": lambda r, now: str(r.job.min_cpus_node or 1),
    "C": lambda r, now: str(r.job.num_cpus),
    "d": lambda r, now: "0",
    "D": lambda r, now: str(r.job.num_nodes),
    "e": lambda r, now: format_timestamp(r.job.end_time, unknown="N/A"),
    "E": lambda r, now: shown_dependency(
        r.job.spec.dependency,
        r.job.state == jobs_pb2.PENDING,
        r.job.state_reason == "DependencyNeverSatisfied",
    ),
    "f": lambda r, now: _null(r.job.spec.constraint),
    "F": lambda r, now: str(r.job.array_job_id if r.job.array_job_id else r.job.job_id),
    "g": lambda r, now: r.job.group_name or str(r.job.group_id),
    "G": lambda r, now: str(r.job.group_id),
    "h": lambda r, now: _oversubscribe(r.job),
    "H": lambda r, now: "*",
    "i": lambda r, now: job_id_str(r),
    "I": lambda r, now: "*",
    "j": lambda r, now: r.job.spec.name,
    "J": lambda r, now: "*",
    "k": lambda r, now: _null(r.job.spec.comment),
    "K": lambda r, now: _array_task(r),
    "l": lambda r, now: format_limit_squeue(r.job.time_limit_min),
    "L": lambda r, now: _time_left(r.job, now),
    "m": lambda r, now: _memory(r.job),
    "M": lambda r, now: format_duration(time_used(r.job, now)),
    "n": lambda r, now: collect(r.job.req_nodes) if r.job.req_nodes else "",
    "N": lambda r, now: r.job.nodes,
    "o": lambda r, now: _null(r.job.spec.command),
    "O": lambda r, now: "1" if r.job.spec.contiguous else "0",
    "p": lambda r, now: f"{r.job.priority / 4294967295:.8f}",
    "P": lambda r, now: r.job.partition,
    "q": lambda r, now: r.job.qos,
    "Q": lambda r, now: str(r.job.priority),
    "r": lambda r, now: _reason(r.job),
    "R": lambda r, now: _reason_list(r.job),
    "s": lambda r, now: "(null)",
    "S": lambda r, now: format_timestamp(_start_time(r.job), unknown="N/A"),
    "t": lambda r, now: states.job_state_code(r.job.state),
    "T": lambda r, now: states.job_state_name(r.job.state),
    "u": lambda r, now: r.job.user_name or str(r.job.user_id),
    "U": lambda r, now: str(r.job.user_id),
    "v": lambda r, now: _null(r.job.spec.reservation),
    "V": lambda r, now: format_timestamp(r.job.submit_time, unknown="N/A"),
    "w": lambda r, now: _null(r.job.spec.wckey),
    "W": lambda r, now: _null(r.job.spec.licenses),
    "x": lambda r, now: collect(r.job.exc_nodes) if r.job.exc_nodes else "",
    "X": lambda r, now: "N/A",
    "y": lambda r, now: str(r.job.spec.nice),
    "Y": lambda r, now: r.job.sched_nodes or "(null)",
    "z": lambda r, now: "*:*:*",
    "Z": lambda r, now: r.job.spec.work_dir,
    # -O only
    "jobid": lambda r, now: _jobid_plain(r),
    "numtasks": lambda r, now: str(r.job.num_tasks or 1),
    "cpus-per-task": lambda r, now: str(r.job.spec.cpus_per_task or 1),
    "stdout": lambda r, now: r.job.std_out,
    "stderr": lambda r, now: r.job.std_err,
    "stdin": lambda r, now: r.job.std_in or "/dev/null",
    "exit_code": lambda r, now: f"{r.job.exit_code}:{r.job.exit_signal}",
    "eligibletime": lambda r, now: format_timestamp(r.job.eligible_time, unknown="N/A"),
    "accruetime": lambda r, now: format_timestamp(r.job.accrue_time, unknown="N/A"),
    "lastschedeval": lambda r, now: format_timestamp(r.job.last_sched_eval, unknown="N/A"),
    "tres-alloc": lambda r, now: r.job.tres_alloc or r.job.tres_req,
    "pendingtime": lambda r, now: str(
        max((r.job.start_time or now) - (r.job.eligible_time or r.job.submit_time), 0)
    ),
    "requeue": lambda r, now: "1" if r.job.requeue else "0",
    "restartcnt": lambda r, now: str(r.job.restarts),
    "batchflag": lambda r, now: str(r.job.batch_flag),
    "allocnodes": lambda r, now: r.job.alloc_node_sid.partition(":")[0] or "(null)",
    "allocsid": lambda r, now: r.job.alloc_node_sid.partition(":")[2] or "0",
    "maxcpus": lambda r, now: str(r.job.num_cpus),
    "maxnodes": lambda r, now: str(r.job.spec.max_nodes or r.job.num_nodes),
    "mintime": lambda r, now: format_limit_squeue(max(r.job.spec.time_min_min, 0)),
    "ntpernode": lambda r, now: str(r.job.spec.ntasks_per_node),
    "derivedec": lambda r, now: str(r.job.derived_exit_code * 256 + r.job.derived_exit_signal),
    "preempttime": lambda r, now: format_timestamp(r.job.preempt_time, unknown="N/A"),
    "deadline": lambda r, now: r.job.spec.deadline or "N/A",
    "reqswitch": lambda r, now: str(r.job.spec.switches),
    "wait4switch": lambda r, now: _minutes_seconds(r.job.spec.switch_wait_s if r.job.spec.switches else 0),
    "threads": lambda r, now: str(r.job.spec.threads_per_core or "*"),
    "tres-per-job": lambda r, now: _gres_tres(r.job.spec.gpus),
    "tres-per-task": lambda r, now: _gres_tres(r.job.spec.gpus_per_task),
    "tres-per-socket": lambda r, now: _gres_tres(r.job.spec.gpus_per_socket),
    "cpus-per-tres": lambda r, now: _gres_tres(str(r.job.spec.cpus_per_gpu or "")),
    "mem-per-tres": lambda r, now: _gres_tres(str(r.job.spec.mem_per_gpu_mb or "")),
    "tres-bind": lambda r, now: _gres_tres(r.job.spec.gpu_bind),
    # what 22.05 prints for features shoal does not have (measured)
    **dict.fromkeys(
        ("admin_comment", "burstbuffer", "burstbufferstate", "clusterfeature", "container", "mcslabel",
         "network", "prefer", "system_comment"),
        lambda r, now: "(null)",
    ),
    **dict.fromkeys(
        ("hetjobid", "hetjobidset", "hetjoboffset", "ntpercore", "ntpersocket", "resizetime", "tres-freq"),
        lambda r, now: "N/A",
    ),
    **dict.fromkeys(
        ("origin", "originraw", "siblingsactive", "siblingsactiveraw", "siblingsviable", "siblingsviableraw"),
        lambda r, now: "NA",
    ),
    **dict.fromkeys(("boardspernode", "ntperboard", "sperboard", "reboot"), lambda r, now: "0"),
    **dict.fromkeys(("cores", "sockets"), lambda r, now: "*"),
    "delayboot": lambda r, now: "0:00",
    "profile": lambda r, now: "NotSet",
}  # fmt: skip


def _oversubscribe(job: jobs_pb2.JobInfo) -> str:
    from shoal.jobview import oversubscribe_text

    return oversubscribe_text(job)


def _gres_tres(value: str) -> str:
    """A GPU request as 22.05's TRES_PER_* columns show it: --gpus=4 -> gres:gpu:4, none -> N/A."""
    return f"gres:gpu:{value}" if value else "N/A"


def _minutes_seconds(seconds: int) -> str:
    return f"{max(seconds, 0) // 60}:{max(seconds, 0) % 60:02d}"


SPECIFIERS = "".join(k for k in _VALUES if len(k) == 1)

# Columns and sort keys whose values come from a brief listing's fields alone (shoal.jobview
# BRIEF_FIELDS; the filters read only those too): a format and sort within these ask ctld for the
# brief listing, a quarter of the bytes to send, relay and decode. A key added here needs its fields
# there (tests/unit/ctld/test_listing.py prints every one of these both ways).
BRIEF_KEYS = frozenset("iAFKPjuUtTMDCRrNpQaqlLSYvVe") | {"jobid"}


def brief_enough(fields: Iterable[fmt.Field], sort: str) -> bool:
    """Whether these columns and this sort need nothing a brief listing leaves out."""
    return all(f.key in BRIEF_KEYS for f in fields if f.key) and all(
        key in BRIEF_KEYS for key, _ in parse_sort(sort)
    )


def job_value(row: Row, key: str, now: int) -> str:
    """The text of one column (a -o letter or a -O key) for one row."""
    getter = _VALUES.get(key)
    return getter(row, now) if getter else ""


def header_of(key: str) -> str:
    return HEADERS.get(key) or LONG_HEADERS.get(key, key.upper())


# --- selection ---------------------------------------------------------------------------------


def parse_job_ids(text: str) -> list[tuple[int, int | None]]:
    """`-j 12,30_2,30_[1-3]` -> [(12, None), (30, 2), (30, 1), (30, 2), (30, 3)]; ValueError names a bad id."""
    out: list[tuple[int, int | None]] = []
    for word in _split_outside_brackets(text):
        word = word.strip()
        if not word:
            continue
        base, sep, task = word.partition("_")
        if not sep and base[:1].isdigit():
            base = base.partition(".")[0]  # 22.05 takes `-j 12.0` (a step id, a stray operand) as job 12
        if not base.isdigit() or int(base) == 0:
            raise ValueError(f"Invalid job id: {word}")
        if not sep:
            out.append((int(base), None))
            continue
        tasks = task[1:-1] if task.startswith("[") and task.endswith("]") else task
        try:
            ids = _expand_ranges(tasks.split("%", 1)[0])
        except ValueError:
            raise ValueError(f"Invalid job id: {word}") from None
        if not ids:
            raise ValueError(f"Invalid job id: {word}")
        out.extend((int(base), t) for t in ids)
    return out


def parse_step_ids(text: str) -> list[str]:
    """`-s 12.0,13.1` -> ["12.0", "13.1"], read as 22.05 reads them: a step part that is no number is step 0
    (`12.batch` lists 12.0 there too); a job without a step, or a job part that is no number, is an error."""
    out: list[str] = []
    for word in text.split(","):
        word = word.strip()
        if not word:
            continue
        job_text, dot, step_text = word.partition(".")
        if not job_text.isdigit() or int(job_text) == 0:
            raise ValueError(f"Invalid job_step id: {word}")
        if not dot:
            raise ValueError(f"Invalid job_step id: {word}.??")
        digits = step_text[: len(step_text) - len(step_text.lstrip("0123456789"))]
        out.append(f"{int(job_text)}.{int(digits or 0)}")
    return out


def step_selected(step: jobs_pb2.JobStep, flt: JobFilter) -> bool:
    """Whether `squeue -s` lists the step: -j and -u/--me filter by its job, as in 22.05."""
    if flt.job_ids is not None and (step.job_id, None) not in flt.job_ids:
        return False
    return flt.user_ids is None or step.user_id in flt.user_ids


def _split_outside_brackets(text: str) -> list[str]:
    words: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            words.append("".join(current))
            current = []
        else:
            current.append(ch)
    words.append("".join(current))
    return words


def _expand_ranges(text: str) -> list[int]:
    """ "1-3,7" -> [1, 2, 3, 7]; "1-7:2" steps. ValueError on anything else."""
    from shoal.arrayspec import parse_array  # lazy: dataclasses/inspect cost ~10 ms at start-up

    return list(parse_array(text, max_size=1 << 31).task_ids)


def _matches_id(job: jobs_pb2.JobInfo, wanted: list[tuple[int, int | None]]) -> bool:
    for job_id, task in wanted:
        if task is None:
            if job.job_id == job_id or job.array_job_id == job_id:
                return True
        elif job.array_job_id == job_id:
            if job.array_task_id == task:
                return True
            if job.array_task_str and task in _expand_ranges(job.array_task_str.split("%", 1)[0]):
                return True
    return False


def filter_jobs(jobs: Iterable[jobs_pb2.JobInfo], flt: JobFilter) -> list[jobs_pb2.JobInfo]:
    """Keep the jobs every given selector accepts (selectors combine with AND, lists with OR)."""
    from shoal.hostlist import expand

    kept: list[jobs_pb2.JobInfo] = []
    for job in jobs:
        if flt.pending_only and job.state != jobs_pb2.PENDING:
            continue
        if flt.states is not None and job.state not in flt.states:
            continue
        if flt.user_ids is not None and job.user_id not in flt.user_ids:
            continue
        if flt.job_ids is not None and not _matches_id(job, flt.job_ids):
            continue
        if flt.partitions is not None and not set(job.partition.split(",")) & flt.partitions:
            continue
        if flt.names is not None and job.spec.name not in flt.names:
            continue
        if flt.accounts is not None and job.account not in flt.accounts:
            continue
        if flt.reservations is not None and job.spec.reservation not in flt.reservations:
            continue
        if flt.qos is not None and job.qos not in flt.qos:
            continue
        if flt.nodes is not None and not (job.nodes and set(expand(job.nodes)) & flt.nodes):
            continue
        kept.append(job)
    return kept


def without_unsplit_cancelled_tasks(jobs: Iterable[jobs_pb2.JobInfo]) -> list[jobs_pb2.JobInfo]:
    """Leave out an array task cancelled before it ever started while others of its array still wait:
    22.05 keeps those waiting tasks as one record and cancelling one only takes it out of that
    record (scenario 133: `scancel A_2` then `squeue -t all -r` lists A_1 and A_3 only)."""
    jobs = list(jobs)
    waiting = {
        j.array_job_id for j in jobs if j.array_job_id and j.state == jobs_pb2.PENDING and not j.restarts
    }
    return [
        j
        for j in jobs
        if not (
            j.array_job_id in waiting
            and j.array_task_id >= 0
            and not (j.restarts or j.array_split)  # split off: a record of its own that stays
            and j.state == jobs_pb2.CANCELLED
            and not j.start_time
        )
    ]


def group_array_tasks(jobs: Iterable[jobs_pb2.JobInfo], by_reason: bool = False) -> list[Row]:
    """Pending tasks of one array in one partition become one row ("30_[1-3]", their reasons joined,
    as 22.05's squeue merges its records); `by_reason`: one row per reason (its records themselves, as
    scontrol shows them: the tasks held or changed one by one are records of their own).

    The row stands where the array's first task stood; running and finished tasks stay one row each.
    """
    from shoal.jobview import fold_row, pending_row

    rows: list[Row] = []
    groups: dict[tuple[object, ...], list[jobs_pb2.JobInfo]] = {}
    slots: dict[tuple[object, ...], int] = {}
    for job in jobs:
        row = pending_row(job)
        if row is None:
            rows.append(Row(job))
            continue
        # scontrol's records: a task split off its array's pending record is one of its own
        key: tuple[object, ...] = (
            ((*row, "split", job.job_id) if job.array_split else (*row, job.state_reason))
            if by_reason
            else row
        )
        if key not in groups:
            groups[key] = []
            slots[key] = len(rows)
            rows.append(Row(job))
        groups[key].append(job)
    for group, members in groups.items():
        if len(members) == 1:
            continue
        first, listed, reason = fold_row(members)
        if reason != first.state_reason:
            shown = jobs_pb2.JobInfo()
            shown.CopyFrom(first)
            shown.state_reason = reason
            first = shown
        rows[slots[group]] = Row(first, listed)
    return rows


def split_rows(jobs: Iterable[jobs_pb2.JobInfo]) -> list[Row]:
    """-r/--array: one row per task, also for pending tasks the controller holds together."""
    rows: list[Row] = []
    for job in jobs:
        if job.array_task_str and job.array_job_id:
            for task in _expand_ranges(job.array_task_str.split("%", 1)[0]):
                copy = jobs_pb2.JobInfo()
                copy.CopyFrom(job)
                copy.array_task_str = ""
                copy.array_task_id = task
                rows.append(Row(copy))
        else:
            rows.append(Row(job))
    return rows


# --- sorting -----------------------------------------------------------------------------------


def _sort_key(key: str, now: int) -> Callable[[Row], object]:
    numeric: dict[str, Callable[[Row], object]] = {
        "i": lambda r: (r.job.array_job_id or r.job.job_id, r.job.array_task_id, r.job.job_id),
        "A": lambda r: r.job.array_job_id or r.job.job_id,
        "F": lambda r: r.job.array_job_id or r.job.job_id,
        # by the state's text, as 22.05 (CANCELLED before COMPLETED, PENDING before RUNNING)
        "t": lambda r: states.job_state_code(r.job.state),
        "T": lambda r: states.job_state_name(r.job.state),
        "p": lambda r: r.job.priority,
        "Q": lambda r: r.job.priority,
        "M": lambda r: time_used(r.job, now),
        "D": lambda r: r.job.num_nodes,
        "C": lambda r: r.job.num_cpus,
        "U": lambda r: r.job.user_id,
        "G": lambda r: r.job.group_id,
        "S": lambda r: _start_time(r.job) or float("inf"),
        "e": lambda r: r.job.end_time if r.job.end_time > 0 else float("inf"),
        "V": lambda r: r.job.submit_time,
        "l": lambda r: r.job.time_limit_min if r.job.time_limit_min >= 0 else float("inf"),
        "y": lambda r: r.job.spec.nice,
    }
    return numeric.get(key) or (lambda r: job_value(r, key, now))


def parse_sort(spec: str) -> list[tuple[str, bool]]:
    """ "-t,p" -> [("t", True), ("p", False)] (key, descending); ValueError on an unknown key."""
    keys: list[tuple[str, bool]] = []
    for word in spec.split(","):
        word = word.strip()
        if not word:
            continue
        descending = word.startswith("-")
        key = word.lstrip("+-")
        if key not in _VALUES or len(key) != 1:
            raise ValueError(f"Invalid sort specification: {word}")
        keys.append((key, descending))
    return keys


def sort_rows(rows: Sequence[Row], spec: str, now: int) -> list[Row]:
    """Sort by each key in turn (first key most significant); ties keep the controller's order."""
    out = list(rows)
    for key, descending in reversed(parse_sort(spec)):
        out.sort(key=_sort_key(key, now), reverse=descending)  # type: ignore[arg-type]
    return out


# --- rendering ---------------------------------------------------------------------------------


def format_rows(rows: Iterable[Row], fields: list[fmt.Field], now: int, header: bool = True) -> list[str]:
    """The lines squeue prints for these rows (header first unless -h)."""
    lines: list[str] = []
    if header:
        lines.append(fmt.render(fields, header_of))
    template, keys = fmt.row_template(fields)
    values = [_VALUES.get(key, _no_value) for key in keys]
    lines.extend(template(*[value(row, now) for value in values]) for row in rows)
    return lines


def _no_value(row: Row, now: int) -> str:
    return ""


# squeue -s's letters and their headers (22.05's own for steps: %A is TASKS, %b TRES_PER_JOB)
STEP_HEADERS: dict[str, str] = {
    "b": "TRES_PER_JOB", "i": "STEPID", "j": "NAME", "l": "TIME_LIMIT", "u": "USER", "A": "TASKS",
    "M": "TIME", "N": "NODELIST", "P": "PARTITION", "S": "START_TIME", "U": "UID",
}  # fmt: skip


def parse_step_format(text: str) -> tuple[list[fmt.Field], list[str]]:
    """An `-o` string for `squeue -s`, read as 22.05 reads it, and the letters it does not know.

    Each `%` starts a word (a run of `%`s is one break, so `%%` prints nothing): `.` to right-justify,
    a width, the letter, then literal text. A word whose letter is not a step's (`%T` too; `-` is no
    flag there) stays in the line as typed; 22.05 names each such letter in an error and goes on.
    """
    head, *words = text.split("%")
    fields = [fmt.Field("", literal=head)] if head else []
    unknown: list[str] = []
    for word in words:
        if not word:
            continue
        start = 1 if word.startswith(".") else 0
        end = start
        while end < len(word) and word[end].isdigit():
            end += 1
        letter = word[end : end + 1]
        if letter not in STEP_HEADERS or not letter:
            fields.append(fmt.Field("", literal=f"%{word}"))
            unknown.append(letter)
            continue
        width = int(word[start:end]) if end > start else None
        fields.append(fmt.Field(letter, width=width, right=start == 1))
        if word[end + 1 :]:
            fields.append(fmt.Field("", literal=word[end + 1 :]))
    return fields, unknown


# squeue -s -O: 22.05's names for steps (measured; its job names, State or Name, are not among them),
# as the keys of stepshow.squeue_value, and their headers
STEP_LONG_NAMES: dict[str, tuple[str, str]] = {
    "stepid": ("i", "STEPID"), "stepname": ("j", "NAME"), "stepstate": ("T", "STATE"),
    "timeused": ("M", "TIME"), "username": ("u", "USER"), "userid": ("U", "UID"),
    "partition": ("P", "PARTITION"), "nodes": ("N", "NODELIST"), "starttime": ("S", "START_TIME"),
    "timelimit": ("l", "TIME_LIMIT"), "numtasks": ("A", "TASKS"), "numcpus": ("C", "NUM_CPUS"),
    "jobid": ("jobid", "JOB_ID"), "network": ("network", "NETWORK"),
    "tres-per-node": ("b", "TRES_PER_JOB"), "tres-per-step": ("tres-per-step", "TRES_PER_STEP"),
    "tres-per-task": ("tres-per-task", "TRES_PER_TASK"),
    "tres-per-socket": ("tres-per-socket", "TRES_PER_SOCKET"), "tres-bind": ("tres-bind", "TRES_BIND"),
    "tres-freq": ("tres-freq", "TRES_FREQ"),
}  # fmt: skip
STEP_LONG_HEADERS = dict(STEP_LONG_NAMES.values())


def parse_step_long_format(spec: str) -> tuple[list[fmt.Field], list[str]]:
    """A `-O` list for `squeue -s`, and the names it does not know: 22.05 names each in an error and
    leaves it out of the line (an empty column)."""
    known = {name: key for name, (key, _) in STEP_LONG_NAMES.items()}
    fields: list[fmt.Field] = []
    unknown: list[str] = []
    for item in spec.split(","):
        name = item.strip().partition(":")[0]
        if not name:
            continue
        if name.lower() not in known:
            unknown.append(name)
            continue
        fields.extend(fmt.parse_long_format(item, known))
    return fields, unknown


def build_fields(format_str: str | None, long_format: str | None) -> list[fmt.Field]:
    if long_format is not None:
        return fmt.parse_long_format(long_format, LONG_NAMES)
    return fmt.parse_format(format_str or DEFAULT_FORMAT, SPECIFIERS)


# --- command line ------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{PROG}: {message}", file=sys.stderr)
        print(f'Try "{PROG} --help" for more information', file=sys.stderr)
        raise SystemExit(1)


USAGE = (  # 22.05's, which the error for a stray operand prints too (its last line starts with a tab)
    "Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]\n"
    "              [-n name] [-o format] [-p partitions] [--qos qos]\n"
    "              [--reservation reservation] [--sort fields] [--start]\n"
    "              [--step step_id] [-t states] [-u user_name] [--usage]\n"
    "              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]\n"
    "\t      [-ahjlrsv]\n"
)

HELP = """Usage: squeue [OPTIONS]
  -A, --account=accounts          show jobs of these accounts (comma list)
  -a, --all                       show jobs of hidden partitions too
  -r, --array                     one line per array task, pending tasks too
  -h, --noheader                  print no header line
  -i, --iterate=seconds           print again every so many seconds
  -j, --jobs=job(s)               show these jobs (12, 30_2, 30 = every task of array 30)
  -l, --long                      the long format, with a date line
      --me                        show only my jobs
  -n, --name=job_name(s)          show jobs with these names
      --noconvert                 print memory in MB, unconverted
  -o, --format=format             columns as %-specifiers ("%.18i %.9P %.8j ...")
  -O, --Format=format             columns by name ("JobID,Name:30,State:.8")
  -p, --partition=partition(s)    show jobs of these partitions
  -q, --qos=qos(s)                show jobs of these QOS
  -S, --sort=fields               sort order ("P,t,-p" by default)
      --start                     pending jobs with their expected start time
  -s, --steps                     show job steps
  -t, --states=state(s)           show jobs in these states ("all" for every state)
  -u, --user=user_name(s)         show jobs of these users (names or uids)
  -w, --nodelist=hostlist         show jobs on these nodes
  -v, --verbose                   say more
  -V, --version                   print the version and exit

Help options:
  --help                          show this help message
  --usage                         show a short usage message
"""


class _ListOption(argparse.Action):
    """-j/-s: the flag (`jobs_flag`, `steps_flag`), and the list when one is attached. 22.05 tells a bare
    -j (no list: every job; with -s an error) from `--jobs=` (an empty list: no job), and a bare flag
    after a list keeps that list (`-j12 -j` is job 12)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, f"{self.dest}_flag", True)
        if values is not None:
            setattr(namespace, self.dest, values)


def _parser() -> _Parser:
    p = _Parser(prog=PROG, add_help=False, allow_abbrev=False)
    p.add_argument("-A", "--account", "--accounts")
    p.add_argument("-a", "--all", action="store_true")
    p.add_argument("-r", "--array", action="store_true")
    p.add_argument("-h", "--noheader", action="store_true")
    p.add_argument("-i", "--iterate", type=int)
    p.add_argument("-j", "--jobs", "--job", nargs="?", action=_ListOption)
    p.add_argument("-l", "--long", action="store_true")
    p.add_argument("--me", action="store_true")
    p.add_argument("-n", "--name")
    p.add_argument("--noconvert", action="store_true")
    p.add_argument("-o", "--format")
    p.add_argument("-O", "--Format")
    p.add_argument("-p", "--partition")
    p.add_argument("-q", "--qos")
    p.add_argument("-S", "--sort")
    p.add_argument("--start", action="store_true")
    p.add_argument("-s", "--steps", "--step", nargs="?", action=_ListOption)
    p.add_argument("-t", "--states", "--state")
    p.add_argument("-u", "--user", "--users")
    p.add_argument("-w", "--nodelist", "--nodes")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("-V", "--version", action="store_true")
    p.add_argument("-M", "--clusters")
    p.add_argument("-L", "--licenses")
    p.add_argument("-R", "--reservation")
    p.add_argument("--federation", action="store_true")
    p.add_argument("--local", action="store_true")
    p.add_argument("--sibling", action="store_true")
    p.add_argument("--help", action="store_true")
    p.add_argument("--usage", action="store_true")
    p.set_defaults(jobs_flag=False, steps_flag=False)
    return p


# Built once, when the module is imported: the command runner imports the commands before it forks
# a child per call, so every child parses with this parser instead of building its own (building
# one is ~1 ms of a fresh fork's CPU, most of it copy-on-write faults). parse_args leaves it as is.
PARSER = _parser()


# -j/--jobs and -s/--steps take their list only attached (-j12, --jobs=12), as with 22.05's getopt
_OPTIONAL_LIST = {"-j", "--jobs", "--job", "-s", "--steps", "--step"}


def split_operands(argv: Sequence[str], parser: argparse.ArgumentParser) -> tuple[list[str], list[str]]:
    """(options, operands): 22.05 reads squeue's command line with getopt, so `-j 12` is the flag -j and
    the operand 12, and the operands are dealt with afterwards (apply_operands)."""
    takes_value = {o for a in parser._actions for o in a.option_strings if a.nargs is None}
    options: list[str] = []
    operands: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--":
            operands.extend(words)
        elif word.startswith("--"):
            options.append(word)
            if "=" not in word and word in takes_value:
                options.extend(_value(words))
        elif word.startswith("-") and len(word) > 1:
            options.append(word)
            for i, letter in enumerate(word[1:], 1):
                short = f"-{letter}"
                if short in _OPTIONAL_LIST or short in takes_value:
                    if short in takes_value and i == len(word) - 1:
                        options.extend(_value(words))
                    break  # the rest of the word is the option's value
        else:
            operands.append(word)
    return options, operands


def _value(words: Iterator[str]) -> list[str]:
    """The next word, an option's value even when it looks like an operand ([] at the end)."""
    word = next(words, None)
    return [] if word is None else [word]


def parse_command_line(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The options, and the operands no option took. 22.05's reading of operands: the first is the job
    list when -j was given (it wins over an attached one), else the step list when -s was; any other
    is an error (Unrecognized option)."""
    parser = PARSER
    options, operands = split_operands(argv, parser)
    try:
        options = refuse_as_getopt(PROG, parser, options)
    except OptionError as exc:
        sys.stderr.write("".join(line + "\n" for line in exc.lines))
        raise SystemExit(exc.exit_code) from None
    args = parser.parse_args(options)
    if operands and args.jobs_flag:
        args.jobs = operands.pop(0)
    elif operands and args.steps_flag:
        args.steps = operands.pop(0)
    return args, operands


def resolve_users(text: str) -> set[int]:
    """Names or uids (comma list) -> uids; an unknown name is an error."""
    import pwd

    uids: set[int] = set()
    for word in text.split(","):
        word = word.strip()
        if not word:
            continue
        if word.isdigit():
            uids.add(int(word))
            continue
        try:
            uids.add(pwd.getpwnam(word).pw_uid)
        except KeyError:
            raise ValueError(f"Invalid user: {word}") from None
    return uids


def _words(text: str | None) -> set[str] | None:
    if text is None:
        return None
    return {w.strip() for w in text.split(",") if w.strip()}


def build_filter(args: argparse.Namespace) -> JobFilter:
    """Turn the options (and SQUEUE_* variables) into a JobFilter; ValueError carries the message."""
    flt = JobFilter()
    if args.jobs_flag and args.jobs is None and args.steps_flag:  # `-s -j`: no job list to take steps of
        raise ValueError("Incompatible options --jobs and --steps")
    state_text = args.states if args.states is not None else os.environ.get("SQUEUE_STATES")
    if state_text is not None:
        parsed = states.parse_job_states(state_text)
        flt.states = None if parsed is None else frozenset(parsed)
    if args.jobs is not None:  # `--jobs=` or `-j ''`: an empty list, which no job is on (22.05)
        flt.job_ids = parse_job_ids(args.jobs)
        if state_text is None:
            flt.states = None  # jobs named with -j show in any state
    users = args.user if args.user is not None else os.environ.get("SQUEUE_USERS")
    if users:
        flt.user_ids = resolve_users(users)
    if args.me:
        flt.user_ids = (flt.user_ids or set()) | {os.getuid()}
    partitions = args.partition if args.partition is not None else os.environ.get("SQUEUE_PARTITION")
    flt.partitions = _words(partitions)
    flt.names = _words(args.name)
    flt.accounts = _words(args.account if args.account is not None else os.environ.get("SQUEUE_ACCOUNT"))
    flt.qos = _words(args.qos)
    flt.reservations = _words(args.reservation)
    if args.nodelist:
        from shoal.hostlist import expand

        flt.nodes = set(expand(args.nodelist))
    flt.pending_only = bool(args.start)
    return flt


def _choose_format(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(-o string, -O string): options first, then SQUEUE_FORMAT/SQUEUE_FORMAT2, then the defaults."""
    if args.format is not None:
        return args.format, None
    if args.Format is not None:
        return None, args.Format
    if args.steps_flag:
        return STEPS_FORMAT, None
    if args.start:
        return START_FORMAT, None
    if args.long:
        return LONG_FORMAT, None
    if os.environ.get("SQUEUE_FORMAT"):
        return os.environ["SQUEUE_FORMAT"], None
    if os.environ.get("SQUEUE_FORMAT2"):
        return None, os.environ["SQUEUE_FORMAT2"]
    return DEFAULT_FORMAT, None


class _Listing(NamedTuple):
    jobs: list[jobs_pb2.JobInfo]
    now: int
    partitions_private: bool  # PrivateData=partitions keeps them from this caller


def listing_request(args: argparse.Namespace, flt: JobFilter, brief: bool) -> controller_pb2.GetJobsRequest:
    """What squeue asks ctld for."""
    from shoal.v1 import controller_pb2

    request = controller_pb2.GetJobsRequest(
        include_finished=flt.states is None or bool(flt.states - UNFINISHED),
        show_all=bool(args.all or args.jobs or args.partition),  # naming jobs or partitions shows hidden ones
        brief=brief,
        # -r lists every task; `-j A_T` lists the tasks named, not the record they wait in
        fold_pending_tasks=not args.array and all(task is None for _, task in flt.job_ids or ()),
    )
    if args.jobs:
        request.job_id_strs.extend(w for w in _split_outside_brackets(args.jobs) if w.strip())
    return request


def _query(args: argparse.Namespace, flt: JobFilter, brief: bool) -> _Listing:
    from cli.common import ctld
    from shoal.v1 import controller_pb2

    request = listing_request(args, flt, brief)
    resp = ctld("GetJobs", request, controller_pb2.GetJobsResponse)
    now = resp.now
    if not now:
        import time

        now = int(time.time())
    return _Listing(list(resp.jobs), now, resp.partitions_private)


def render_queue(
    jobs: Sequence[jobs_pb2.JobInfo],
    now: int,
    flt: JobFilter,
    fields: list[fmt.Field],
    *,
    sort: str = DEFAULT_SORT,
    expand_arrays: bool = False,
    header: bool = True,
) -> list[str]:
    """Filter, group (or split) array tasks, sort and format: the whole of squeue's output."""
    kept = filter_jobs(without_unsplit_cancelled_tasks(jobs), flt)
    rows = split_rows(kept) if expand_arrays else group_array_tasks(kept)
    return format_rows(sort_rows(rows, sort, now), fields, now, header)


def _run(argv: Sequence[str] | None) -> int:
    args, stray = parse_command_line(sys.argv[1:] if argv is None else argv)
    if args.help:
        sys.stdout.write(HELP)
        return 0
    if args.usage:
        sys.stdout.write(USAGE)
        return 0
    if args.version:
        print(version_line())
        return 0
    if stray:
        print(f"{PROG}: error: Unrecognized option: {stray[0]}", file=sys.stderr)
        sys.stdout.write(USAGE)
        return 1
    try:
        flt = build_filter(args)
        step_ids = parse_step_ids(args.steps) if args.steps is not None else None
        format_str, long_format = _choose_format(args)
        unknown: list[str] = []
        if args.steps_flag and long_format is None:
            fields, unknown = parse_step_format(format_str or STEPS_FORMAT)
        elif args.steps_flag:
            fields, unknown = parse_step_long_format(long_format or "")
        else:
            fields = build_fields(format_str, long_format)
        sort = args.sort or os.environ.get("SQUEUE_SORT") or (START_SORT if args.start else DEFAULT_SORT)
        parse_sort(sort)
    except ValueError as exc:  # includes fmt.FormatError and HostlistError
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    for letter in unknown:  # 22.05 goes on, the word kept as typed
        print(f"{PROG}: error: Invalid job step format specification: {letter}", file=sys.stderr)
    if args.verbose:
        _print_settings(args, format_str, long_format, sort)
    header = not args.noheader
    if args.steps_flag:
        from cli.common import CommandError as StepError
        from cli.stepshow import squeue_rows, squeue_value

        if header:
            headers = STEP_HEADERS if long_format is None else STEP_LONG_HEADERS
            print(fmt.render(fields, lambda key: headers[key]))
        if step_ids == [] or flt.job_ids == []:  # `--steps=`, `--jobs=`: an empty list, no step on it
            return 0
        try:
            if not step_ids and flt.job_ids:  # only the named jobs' steps need to come
                step_ids = sorted({str(j) for j, task in flt.job_ids if task is None})
            for value in squeue_rows(squeue_value, step_ids or [], lambda step: step_selected(step, flt)):
                print(fmt.render(fields, value))
        except StepError as exc:
            print(f"slurm_load_job_steps error: {exc.message}", file=sys.stderr)
            return 1
        return 0

    from cli.common import CommandError

    brief = brief_enough(fields, sort)
    while True:
        try:
            jobs, now, partitions_private = _query(args, flt, brief)
        except CommandError as exc:
            print(f"slurm_load_jobs error: {exc.message}", file=sys.stderr)
            return 1
        if (
            flt.job_ids is not None
            and len(flt.job_ids) == 1
            and not filter_jobs(jobs, JobFilter(states=None, job_ids=flt.job_ids))
        ):
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            return 1
        if partitions_private:  # 22.05 loads the partitions after the jobs, says it may not, lists anyway
            print(f"slurm_load_partitions: {ACCESS_DENIED}", file=sys.stderr)
        lines = render_queue(jobs, now, flt, fields, sort=sort, expand_arrays=args.array, header=header)
        if args.long or args.iterate:
            lines.insert(0, fmt.long_date(now))
        sys.stdout.write("".join(line + "\n" for line in lines))
        if not args.iterate:
            return 0
        sys.stdout.write("\n")
        sys.stdout.flush()
        import time

        time.sleep(max(args.iterate, 1))


def _print_settings(
    args: argparse.Namespace, format_str: str | None, long_format: str | None, sort: str
) -> None:
    for key, value in (
        ("accounts", args.account),
        ("array", args.array),
        ("format", format_str or long_format),
        ("iterate", args.iterate),
        ("job_flag", args.jobs_flag),
        ("jobs", args.jobs),
        ("partitions", args.partition),
        ("sort", sort),
        ("start_flag", args.start),
        ("states", args.states),
        ("users", args.user),
    ):
        print(f"{key:<11}= {value if value not in (None, '') else '(null)'}", file=sys.stderr)
    print("-----------------------------", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    from cli.common import run_main

    return run_main(PROG, lambda: _run(argv))


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "DEFAULT_FORMAT",
    "JobFilter",
    "LONG_FORMAT",
    "Row",
    "START_FORMAT",
    "brief_enough",
    "build_fields",
    "filter_jobs",
    "format_rows",
    "group_array_tasks",
    "job_id_str",
    "job_value",
    "main",
    "parse_job_ids",
    "parse_sort",
    "render_queue",
    "sort_rows",
    "split_rows",
    "time_used",
]
