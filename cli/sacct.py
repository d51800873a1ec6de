"""sacct: job history from the accounting daemon, formatted as Slurm 22.05 prints it.

It asks shoal-dbd (through the local agent, target "dbd") and never the controller, so it works while
ctld is down. dbd answers in columns (shoal.acct_records), decoded into one tuple per job and step.
Rendering is pure: `group_rows()` and `render()` turn those records into lines, so tests build records.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, NoReturn

from cli.common import CommandError, run_main
from shoal import version_line
from shoal.acct_records import AcctEntry, Record, decode, gc_paused
from shoal.timefmt import format_hms, format_time_limit, format_timestamp
from shoal.v1 import accounting_pb2 as pb

PROG = "sacct"
DEFAULT_FIELDS = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
BRIEF_FIELDS = "JobID,State,ExitCode"
LONG_FIELDS = (
    "JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,MaxRSSNode,"
    "MaxRSSTask,AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,MinCPUTask,AveCPU,NTasks,"
    "AllocCPUS,Elapsed,State,ExitCode,AveCPUFreq,ReqCPUFreqMin,ReqCPUFreqMax,ReqCPUFreqGov,ReqMem,ConsumedEnergy,"
    "MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,MaxDiskWrite,MaxDiskWriteNode,MaxDiskWriteTask,"
    "AveDiskWrite,ReqTRES,AllocTRES,TRESUsageInAve,TRESUsageInMax,TRESUsageInMaxNode,TRESUsageInMaxTask,"
    "TRESUsageInMin,TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot,TRESUsageOutMax,TRESUsageOutMaxNode,"
    "TRESUsageOutMaxTask,TRESUsageOutAve,TRESUsageOutTot"
)
STEP_NAMES = {-4: "batch", -5: "extern"}
STATE_CODES = {
    "CA": "CANCELLED",
    "CD": "COMPLETED",
    "F": "FAILED",
    "PD": "PENDING",
    "R": "RUNNING",
    "TO": "TIMEOUT",
    "NF": "NODE_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "PR": "PREEMPTED",
    "RQ": "REQUEUED",
    "S": "SUSPENDED",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "CG": "COMPLETING",
}


class Row:
    """One line: a job (or a group of never-started array tasks) or one of its steps."""

    __slots__ = ("job", "step", "job_id", "steps")

    def __init__(
        self, job: Record, step: Record | None = None, job_id: str = "", steps: Sequence[Record] = ()
    ) -> None:
        self.job = job
        self.step = step
        self.job_id = job_id or _job_id(job)
        self.steps = steps  # a job row: its steps, for TotalCPU

    @property
    def cpu_time_s(self) -> int:
        """A job row's TotalCPU: its steps' CPU time (summed only when the column is shown)."""
        return sum(step.cpu_time_s for step in self.steps)


def _job_id(job: Record) -> str:
    if job.array_job_id and job.array_task_id >= 0:
        return f"{job.array_job_id}_{job.array_task_id}"
    return str(job.job_id)


def _step_suffix(step_id: int) -> str:
    return STEP_NAMES.get(step_id, str(step_id))


def _elapsed(start: int, end: int, now: int) -> int:
    if not start:
        return 0
    return max(0, (end or now) - start)


def _suspended(job: Record, now: int) -> int:
    """Seconds the job spent suspended (scontrol suspend), the current suspension included."""
    ongoing = now - job.suspend_time if job.state == "SUSPENDED" and job.suspend_time else 0
    return int(job.suspended_secs) + max(int(ongoing), 0)


def _run(job: Record, now: int) -> int:
    """Elapsed: time it ran, without the time suspended (22.05)."""
    return max(0, _elapsed(job.start_time, job.end_time, now) - _suspended(job, now))


def _step_run(r: Row, step: Record, now: int) -> int:
    """A step's Elapsed leaves its job's suspensions out, as the job's does (22.05, running or ended:
    `122.0|COMPLETED|00:00:02` after 7 s with 5 suspended), counted up to the step's own wall time."""
    wall = _elapsed(step.start_time, step.end_time, now)
    return max(0, wall - min(_suspended(r.job, now), wall))


def _step_state(r: Row, step: Record) -> str:
    """A running step of a suspended job shows SUSPENDED (sacct in 22.05; squeue and scontrol say RUNNING)."""
    return "SUSPENDED" if step.state == "RUNNING" and r.job.state == "SUSPENDED" else str(step.state)


def exit_code_text(code: int, sig: int) -> str:
    """sacct's ExitCode, "code:signal": an exit code of 128 or more shows less 128, as 22.05's sacct
    (measured: `exit 143` -> 15:0, 128 -> 0:0, 200 -> 72:0, still FAILED), though scontrol and
    DerivedExitCode keep the whole code (143:0)."""
    return f"{code - 128 if code >= 128 else code}:{sig}"


def _mem(mb: int, units: str) -> str:
    if units:
        factor = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[units]
        value = mb / factor
        return f"{value:.2f}{units}" if value != int(value) else f"{int(value)}{units}"
    return f"{mb}M" if mb % 1024 or not mb else f"{mb // 1024}G"


JobColumn = Callable[[Row, Record], str]
StepColumn = Callable[[Row, Record], str]


def _job_columns(now: int, units: str) -> dict[str, JobColumn]:
    """Each column's formatter for a job row, built once per listing."""
    return {
        "jobid": lambda r, j: r.job_id,
        "jobidraw": lambda r, j: str(j.job_id),
        "jobname": lambda r, j: j.name,
        "partition": lambda r, j: j.partition,
        "account": lambda r, j: j.account,
        "alloccpus": lambda r, j: str(j.alloc_cpus or j.req_cpus),  # never started: what it asked for
        "ncpus": lambda r, j: str(j.alloc_cpus or j.req_cpus),
        "reqcpus": lambda r, j: str(j.req_cpus),
        "state": lambda r, j: (
            f"CANCELLED by {j.cancelled_by}" if j.state == "CANCELLED" and j.cancelled_by >= 0 else j.state
        ),
        "exitcode": lambda r, j: exit_code_text(j.exit_code, j.exit_signal),
        "derivedexitcode": lambda r, j: f"{j.derived_exit_code}:{j.derived_exit_signal}",
        "elapsed": lambda r, j: format_hms(_run(j, now)),
        "elapsedraw": lambda r, j: str(_run(j, now)),
        "suspended": lambda r, j: format_hms(_suspended(j, now)),
        "cputime": lambda r, j: format_hms(_run(j, now) * j.alloc_cpus),
        "cputimeraw": lambda r, j: str(_run(j, now) * j.alloc_cpus),
        "totalcpu": lambda r, j: format_hms(r.cpu_time_s),
        "nodelist": lambda r, j: j.nodelist or "None assigned",
        "nnodes": lambda r, j: str(j.alloc_nodes or j.req_nodes),
        "reqnodes": lambda r, j: str(j.req_nodes),
        "user": lambda r, j: j.user,
        "uid": lambda r, j: str(j.uid),
        "gid": lambda r, j: str(j.gid),
        "group": lambda r, j: str(j.gid),
        "qos": lambda r, j: j.qos,
        "reason": lambda r, j: j.reason or "None",
        "workdir": lambda r, j: j.work_dir,
        "cluster": lambda r, j: j.cluster,
        "submit": lambda r, j: format_timestamp(j.submit_time),
        "eligible": lambda r, j: format_timestamp(j.eligible_time),
        "start": lambda r, j: format_timestamp(j.start_time),
        "end": lambda r, j: format_timestamp(j.end_time),
        "timelimit": lambda r, j: (
            format_time_limit(j.time_limit_min) if j.time_limit_min != -1 else "Partition_Limit"
        ),
        "reqmem": lambda r, j: _mem(j.req_mem_mb, units),
        "reqtres": lambda r, j: _by_tres_name(j.tres_req),
        "alloctres": lambda r, j: _by_tres_name(j.tres_alloc),
        "priority": lambda r, j: str(j.priority),
        "arrayjobid": lambda r, j: str(j.array_job_id) if j.array_job_id else "",
        "arraytaskid": lambda r, j: str(j.array_task_id) if j.array_task_id >= 0 else "",
        "reqcpufreqmin": lambda r, j: "Unknown",
        "reqcpufreqmax": lambda r, j: "Unknown",
        "reqcpufreqgov": lambda r, j: "Unknown",
    }


def _step_columns(now: int, units: str) -> dict[str, StepColumn]:
    """Each column's formatter for a step row (columns a step lacks are blank)."""
    return {
        "jobid": lambda r, s: f"{r.job_id}.{_step_suffix(s.step_id)}",
        "jobidraw": lambda r, s: f"{r.job.job_id}.{_step_suffix(s.step_id)}",
        "jobname": lambda r, s: s.name,
        "account": lambda r, s: r.job.account,
        "alloccpus": lambda r, s: str(s.num_cpus),
        "ncpus": lambda r, s: str(s.num_cpus),
        "ntasks": lambda r, s: str(s.num_tasks),
        "state": lambda r, s: _step_state(r, s),
        "exitcode": lambda r, s: exit_code_text(s.exit_code, s.exit_signal),
        "elapsed": lambda r, s: format_hms(_step_run(r, s, now)),
        "elapsedraw": lambda r, s: str(_step_run(r, s, now)),
        "suspended": lambda r, s: format_hms(_suspended(r.job, now)),
        "cputime": lambda r, s: format_hms(_step_run(r, s, now) * s.num_cpus),
        "cputimeraw": lambda r, s: str(_step_run(r, s, now) * s.num_cpus),
        "nodelist": lambda r, s: s.nodelist or "None assigned",
        "nnodes": lambda r, s: str(s.num_nodes),
        "user": lambda r, s: "",
        "uid": lambda r, s: "",
        "qos": lambda r, s: "",
        "cluster": lambda r, s: r.job.cluster,
        "start": lambda r, s: format_timestamp(s.start_time),
        "end": lambda r, s: format_timestamp(s.end_time),
        "submit": lambda r, s: format_timestamp(r.job.submit_time),
        "alloctres": lambda r, s: _by_tres_name(s.tres_alloc),
        "maxrss": lambda r, s: f"{s.max_rss_kb}K" if s.max_rss_kb else "",
        "totalcpu": lambda r, s: format_hms(s.cpu_time_s),
        "avecpufreq": lambda r, s: "0",
        "reqcpufreqmin": lambda r, s: "0",
        "reqcpufreqmax": lambda r, s: "0",
        "reqcpufreqgov": lambda r, s: "0",
        "consumedenergy": lambda r, s: "0",
        "tresusageinave": lambda r, s: _usage_in(s, s.gpu_util_avg) or "energy=0",
        "tresusageinmax": lambda r, s: _usage_in(s, s.gpu_util_max),
        "tresusageintot": lambda r, s: "energy=0",
        "tresusageoutave": lambda r, s: "energy=0",
        "tresusageouttot": lambda r, s: "energy=0",
    }


def _by_tres_name(tres: str) -> str:
    """sacct lists TRES by name ('billing=1,cpu=1,gres/gpu=2,mem=1000M,node=1'); scontrol by kind."""
    return ",".join(sorted(tres.split(","), key=lambda part: part.partition("=")[0])) if tres else ""


def _usage_in(step: Record, gpu_util: int) -> str:
    """TRESUsageInAve/Max of a step: its CPU time and peak RSS, and its GPUs' utilization and peak memory
    (gres/gpuutil, gres/gpumem, as later Slurm versions print them); blank when nothing was measured.
    The steps shoal measures have one task each on their node, so the peaks are also the averages over
    tasks; gpuutil is the mean over time in Ave and the peak in Max."""
    if not (step.cpu_time_s or step.max_rss_kb or step.gpu_util_max or step.gpu_mem_max_mb):
        return ""
    text = f"cpu={format_hms(step.cpu_time_s)},energy=0,mem={step.max_rss_kb}K"
    if step.gpu_util_max or step.gpu_mem_max_mb:
        text += f",gres/gpumem={step.gpu_mem_max_mb}M,gres/gpuutil={gpu_util}"
    return text


# The JobRecord/StepRecord fields each column reads (dbd sends only those); grouping always needs GROUPING.
GROUPING = ("array_job_id", "array_task_id", "start_time", "state", "cancelled_by")
SUSPENSION = ("suspended_secs", "suspend_time")
NEEDS: dict[str, tuple[str, ...]] = {
    "jobname": ("name",),
    "partition": ("partition",),
    "account": ("account",),
    "alloccpus": ("alloc_cpus", "req_cpus", "num_cpus"),
    "ncpus": ("alloc_cpus", "req_cpus", "num_cpus"),
    "reqcpus": ("req_cpus",),
    "ntasks": ("num_tasks",),
    "exitcode": ("exit_code", "exit_signal"),
    "derivedexitcode": ("derived_exit_code", "derived_exit_signal"),
    "elapsed": ("end_time", *SUSPENSION),
    "elapsedraw": ("end_time", *SUSPENSION),
    "suspended": SUSPENSION,
    "cputime": ("end_time", "alloc_cpus", "num_cpus", *SUSPENSION),
    "cputimeraw": ("end_time", "alloc_cpus", "num_cpus", *SUSPENSION),
    "totalcpu": ("cpu_time_s",),
    "nodelist": ("nodelist",),
    "nnodes": ("alloc_nodes", "req_nodes", "num_nodes"),
    "reqnodes": ("req_nodes",),
    "user": ("user",),
    "uid": ("uid",),
    "gid": ("gid",),
    "group": ("gid",),
    "qos": ("qos",),
    "reason": ("reason",),
    "workdir": ("work_dir",),
    "eligible": ("eligible_time",),
    "end": ("end_time",),
    "timelimit": ("time_limit_min",),
    "reqmem": ("req_mem_mb",),
    "reqtres": ("tres_req",),
    "alloctres": ("tres_alloc",),
    "priority": ("priority",),
    "maxrss": ("max_rss_kb",),
    "tresusageinave": ("cpu_time_s", "max_rss_kb", "gpu_util_avg", "gpu_util_max", "gpu_mem_max_mb"),
    "tresusageinmax": ("cpu_time_s", "max_rss_kb", "gpu_util_max", "gpu_mem_max_mb"),
}


def needed_fields(fields: list[Column]) -> list[str]:
    """The record fields a listing of these columns reads (for JobQuery.fields)."""
    out = set(GROUPING)
    for name, *_ in fields:
        out.update(NEEDS.get(name.lower(), ()))
    return sorted(out)


# Default column widths of 22.05's sacct (measured on the real one: `sacct -o FIELD`); any other: 10.
WIDTHS = {
    "AdminComment": 15,
    "AssocID": 7,
    "AveDiskRead": 14,
    "AveDiskWrite": 14,
    "BlockID": 16,
    "Comment": 14,
    "Constraints": 19,
    "ConsumedEnergy": 14,
    "ConsumedEnergyRaw": 17,
    "Container": 19,
    "DerivedExitCode": 15,
    "Eligible": 19,
    "End": 19,
    "ExitCode": 8,
    "Flags": 19,
    "GID": 6,
    "Group": 9,
    "JobID": 12,
    "JobIDRaw": 12,
    "Layout": 9,
    "MaxDiskRead": 12,
    "MaxDiskReadNode": 15,
    "MaxDiskReadTask": 15,
    "MaxDiskWrite": 12,
    "MaxDiskWriteNode": 16,
    "MaxDiskWriteTask": 16,
    "MaxPages": 8,
    "MaxPagesNode": 12,
    "MaxPagesTask": 14,
    "MaxVMSizeNode": 14,
    "MaxVMSizeTask": 14,
    "McsLabel": 12,
    "NNodes": 8,
    "NodeList": 15,
    "NTasks": 8,
    "QOSRAW": 6,
    "Reason": 22,
    "ReqCPUFreqGov": 13,
    "ReqCPUFreqMax": 13,
    "ReqCPUFreqMin": 13,
    "ReqCPUS": 8,
    "ReqNodes": 8,
    "Reservation": 20,
    "ReservationId": 8,
    "Start": 19,
    "Submit": 19,
    "SubmitLine": 20,
    "SystemComment": 15,
    "TRESUsageInAve": 14,
    "TRESUsageInMax": 14,
    "TRESUsageInMaxNode": 18,
    "TRESUsageInMaxTask": 18,
    "TRESUsageInMin": 14,
    "TRESUsageInMinNode": 18,
    "TRESUsageInMinTask": 18,
    "TRESUsageInTot": 14,
    "TRESUsageOutAve": 15,
    "TRESUsageOutMax": 15,
    "TRESUsageOutMaxNode": 19,
    "TRESUsageOutMaxTask": 19,
    "TRESUsageOutMin": 15,
    "TRESUsageOutMinNode": 19,
    "TRESUsageOutMinTask": 19,
    "TRESUsageOutTot": 15,
    "UID": 6,
    "User": 9,
    "WorkDir": 20,
}
# Without a width, only these print left-aligned; with one (`JobID%20`) every column is right-aligned.
LEFT_BY_DEFAULT = ("JobID", "JobIDRaw", "DBIndex")


class Column(NamedTuple):
    """One -o column: Slurm's field name, its width, and whether its values are left-aligned."""

    name: str
    width: int
    left: bool = False


def _width(name: str) -> int:
    return WIDTHS.get(name, 10)


# Every field 22.05's sacct knows (`sacct --helpformat`), in its order: a name typed in -o stands for the
# first of these it begins (case aside); one that begins none is refused. Those shoal does not keep print blank.
FIELD_NAMES = (
    "Account",
    "AdminComment",
    "AllocCPUS",
    "AllocNodes",
    "AllocTRES",
    "AssocID",
    "AveCPU",
    "AveCPUFreq",
    "AveDiskRead",
    "AveDiskWrite",
    "AvePages",
    "AveRSS",
    "AveVMSize",
    "BlockID",
    "Cluster",
    "Comment",
    "Constraints",
    "ConsumedEnergy",
    "ConsumedEnergyRaw",
    "Container",
    "CPUTime",
    "CPUTimeRAW",
    "DBIndex",
    "DerivedExitCode",
    "Elapsed",
    "ElapsedRaw",
    "Eligible",
    "End",
    "ExitCode",
    "Flags",
    "GID",
    "Group",
    "JobID",
    "JobIDRaw",
    "JobName",
    "Layout",
    "MaxDiskRead",
    "MaxDiskReadNode",
    "MaxDiskReadTask",
    "MaxDiskWrite",
    "MaxDiskWriteNode",
    "MaxDiskWriteTask",
    "MaxPages",
    "MaxPagesNode",
    "MaxPagesTask",
    "MaxRSS",
    "MaxRSSNode",
    "MaxRSSTask",
    "MaxVMSize",
    "MaxVMSizeNode",
    "MaxVMSizeTask",
    "McsLabel",
    "MinCPU",
    "MinCPUNode",
    "MinCPUTask",
    "NCPUS",
    "NNodes",
    "NodeList",
    "NTasks",
    "Partition",
    "Priority",
    "QOS",
    "QOSRAW",
    "Reason",
    "ReqCPUFreq",
    "ReqCPUFreqGov",
    "ReqCPUFreqMax",
    "ReqCPUFreqMin",
    "ReqCPUS",
    "ReqMem",
    "ReqNodes",
    "ReqTRES",
    "Reservation",
    "ReservationId",
    "Reserved",
    "ResvCPU",
    "ResvCPURAW",
    "Start",
    "State",
    "Submit",
    "SubmitLine",
    "Suspended",
    "SystemComment",
    "SystemCPU",
    "Timelimit",
    "TimelimitRaw",
    "TotalCPU",
    "TRESUsageInAve",
    "TRESUsageInMax",
    "TRESUsageInMaxNode",
    "TRESUsageInMaxTask",
    "TRESUsageInMin",
    "TRESUsageInMinNode",
    "TRESUsageInMinTask",
    "TRESUsageInTot",
    "TRESUsageOutAve",
    "TRESUsageOutMax",
    "TRESUsageOutMaxNode",
    "TRESUsageOutMaxTask",
    "TRESUsageOutMin",
    "TRESUsageOutMinNode",
    "TRESUsageOutMinTask",
    "TRESUsageOutTot",
    "UID",
    "User",
    "UserCPU",
    "WCKey",
    "WCKeyID",
    "WorkDir",
)  # Fields of later Slurm versions that shoal also prints.
LATER_FIELDS = ("ArrayJobID", "ArrayTaskID")


def parse_format(text: str) -> list[Column]:
    """'jobid%20,stat' -> [Column("JobID", 20), Column("State", 10)] (Slurm's names, default widths).

    A width typed with the name also right-aligns the column, as 22.05 does for every field.
    """
    out = []
    for item in [i for i in text.split(",") if i]:
        typed, _, width = item.partition("%")
        if width and not width.isdigit():
            raise CommandError(f"Invalid field width in '{item}'")
        known = (*FIELD_NAMES, *LATER_FIELDS)
        name = next((n for n in known if n.lower().startswith(typed.lower())), None) if typed else None
        if name is None:
            raise CommandError(f'Invalid field requested: "{typed}"')
        if width:
            out.append(Column(name, int(width)))
        else:
            out.append(Column(name, _width(name), name in LEFT_BY_DEFAULT))
    return out


def group_rows(jobs: Iterable[AcctEntry], with_steps: bool) -> list[Row]:
    """One row per job and step; an array's never-started tasks in one state fold into `A_[1-3]`."""
    from shoal.arrayspec import format_task_ids

    rows: list[Row] = []
    pending_tasks: dict[tuple[int, str], tuple[Row, list[int]]] = {}
    for acct in jobs:
        j = acct.job
        if j.array_job_id and j.array_task_id >= 0 and not j.start_time and not acct.steps:
            key = (j.array_job_id, f"{j.state}/{j.cancelled_by}")
            if key in pending_tasks:
                pending_tasks[key][1].append(j.array_task_id)
                continue
            row = Row(j)
            pending_tasks[key] = (row, [j.array_task_id])
            rows.append(row)
            continue
        row = Row(j, steps=acct.steps)
        rows.append(row)
        if with_steps and acct.steps:
            rows.extend(Row(j, step, row.job_id) for step in acct.steps)
    for (array_id, _), (row, task_ids) in pending_tasks.items():
        if len(task_ids) > 1:
            row.job_id = f"{array_id}_[{format_task_ids(task_ids)}]"
    return rows


def render(
    rows: Sequence[Row], fields: list[Column], *, parsable: str, header: bool, now: int, units: str = ""
) -> list[str]:
    """Lines as sacct prints them: fixed width (aligned as each Column says, '+' marks truncation) or '|'."""
    lines: list[str] = []
    job_columns, step_columns = _job_columns(now, units), _step_columns(now, units)
    job_fns = [job_columns.get(c.name.lower(), _blank) for c in fields]
    step_fns = [step_columns.get(c.name.lower(), _blank) for c in fields]

    def values(row: Row) -> list[str]:
        step = row.step
        if step is None:
            return [f(row, row.job) for f in job_fns]
        return [f(row, step) for f in step_fns]

    if parsable:
        end = "|" if parsable == "p" else ""
        if header:
            lines.append("|".join(c.name for c in fields) + end)
        lines.extend("|".join(values(row)) + end for row in rows)
        return lines

    def cell(value: str, column: Column) -> str:
        if len(value) > column.width:
            value = value[: column.width - 1] + "+"
        return value.ljust(column.width) if column.left else value.rjust(column.width)

    if header:  # a title is cut to its column, without the "+" that marks a cut value
        lines.append(" ".join(cell(c.name[: c.width], c) for c in fields) + " ")
        lines.append(" ".join("-" * c.width for c in fields) + " ")
    # one format string for the whole line; a line longer than the widths allow has a value to truncate
    template = " ".join(("{:<%d}" if c.left else "{:>%d}") % c.width for c in fields) + " "
    width = sum(c.width + 1 for c in fields)
    for row in rows:
        vals = values(row)
        line = template.format(*vals)
        if len(line) != width:
            line = " ".join(cell(v, c) for v, c in zip(vals, fields, strict=True)) + " "
        lines.append(line)
    return lines


def _blank(_row: Row, _record: object) -> str:
    return ""


_ID = re.compile(r"^(\d+)(?:_(\d+|\[[^\]]+\]))?(?:\.(\w+))?$")


def parse_job_ids(values: Iterable[str]) -> tuple[list[str], dict[str, set[str]]]:
    """-j values -> (query ids, wanted steps per job id); "A_[0-4%2]" expands to its tasks."""
    from shoal.arrayspec import parse_array

    ids: list[str] = []
    steps: dict[str, set[str]] = {}
    whole: set[str] = set()
    for value in values:
        for item in _split_ids(value):
            match = _ID.match(item)
            if match is None:
                raise CommandError(f"Invalid job id: {item}")
            job, task, step = match.groups()
            if task is None:
                found = [job]
            elif task.startswith("["):
                try:
                    found = [f"{job}_{t}" for t in parse_array(task[1:-1], 10**9).task_ids]
                except ValueError as exc:
                    raise CommandError(f"Invalid job id: {item}") from exc
            else:
                found = [f"{job}_{task}"]
            ids.extend(found)
            for f in found:
                if step is None:
                    whole.add(f)
                else:
                    steps.setdefault(f, set()).add(step)
    # a job named whole as well as by step shows its job line and every step (22.05: `-j 5,5.batch`)
    return ids, {f: want for f, want in steps.items() if f not in whole}


def _split_ids(value: str) -> list[str]:
    """Split on commas outside brackets: '1,2_[1,3],4' -> ['1', '2_[1,3]', '4']."""
    out, depth, cur = [], 0, ""
    for ch in value:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    out.append(cur)
    return [i.strip() for i in out if i.strip()]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """Slurm's words for a bad command line, exit 1 (not argparse's usage dump and exit 2)."""
        match = re.match(r"argument (-\w)(?:/--[\w-]+)?: expected one argument", message)
        if match:
            message = f"option requires an argument -- '{match.group(1)[1]}'"
        _bad_command_line(message)


def _bad_command_line(message: str) -> NoReturn:
    print(f"{PROG}: {message}", file=sys.stderr)
    raise SystemExit(1)


def _unknown_arguments(extra: list[str]) -> None:
    """What 22.05 says for what it does not know: an option as getopt does, else the stray words."""
    for arg in extra:
        if arg.startswith("--"):
            _bad_command_line(f"unrecognized option '{arg.split('=', 1)[0]}'")
        if arg.startswith("-") and arg != "-":
            _bad_command_line(f"invalid option -- '{arg[1]}'")
    print(f"{PROG}: error: Unknown arguments:", file=sys.stderr)
    for arg in extra:
        print(f"{PROG}: error:  {arg}", file=sys.stderr)
    raise SystemExit(1)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, add_help=True, description="job accounting data")
    p.add_argument("-V", "--version", action="version", version=version_line())
    p.add_argument("-a", "--allusers", action="store_true")
    p.add_argument("-A", "--accounts", action="append", default=[])
    p.add_argument("-b", "--brief", action="store_true")
    p.add_argument("-D", "--duplicates", action="store_true")
    p.add_argument("-E", "--endtime")
    p.add_argument("-j", "--jobs", action="append", default=[])
    p.add_argument("-l", "--long", action="store_true")
    p.add_argument("-L", "--allclusters", action="store_true")
    p.add_argument("-M", "--clusters", action="append", default=[])
    p.add_argument("-n", "--noheader", action="store_true")
    p.add_argument("-N", "--nodelist", action="append", default=[])
    p.add_argument("--name", action="append", default=[])
    p.add_argument("-o", "--format", action="append", default=[])
    p.add_argument("-p", "--parsable", action="store_true")
    p.add_argument("-P", "--parsable2", action="store_true")
    p.add_argument("-r", "--partition", action="append", default=[])
    p.add_argument("-s", "--state", action="append", default=[])
    p.add_argument("-S", "--starttime")
    p.add_argument("-u", "--user", action="append", default=[])
    p.add_argument("--units", choices=["K", "M", "G", "T"], type=str.upper, default="")
    p.add_argument("-X", "--allocations", action="store_true")
    p.add_argument("-e", "--helpformat", action="store_true")
    return p


def _csv(values: Iterable[str]) -> list[str]:
    return [v for value in values for v in value.split(",") if v]


def _clusters(args: argparse.Namespace) -> list[str]:
    """The clusters to ask for; none (every one) for `-M all` or `-L`, as Snakemake's plugin passes."""
    names = _csv(args.clusters)
    if args.allclusters or any(n.lower() == "all" for n in names):
        return []
    return names


def _states(values: Iterable[str]) -> list[str]:
    out = []
    for value in _csv(values):
        name = STATE_CODES.get(value.upper(), value.upper())
        if name not in STATE_CODES.values():
            raise CommandError(f"Invalid state: {value}")
        out.append(name)
    return out


def build_query(args: argparse.Namespace, now: int, uid: int) -> tuple[pb.JobQuery, dict[str, set[str]]]:
    from shoal.timefmt import parse_datetime

    ids, steps = parse_job_ids(args.jobs)
    q = pb.JobQuery(
        job_ids=ids,
        accounts=_csv(args.accounts),
        states=_states(args.state),
        names=_csv(args.name),
        partitions=_csv(args.partition),
        duplicates=args.duplicates,
        clusters=_clusters(args),
    )
    if args.nodelist:
        from shoal import hostlist

        for value in args.nodelist:
            try:
                q.nodes.extend(hostlist.expand(value))
            except hostlist.TooManyHosts as exc:
                raise CommandError(
                    "Invalid argument", exit_code=22
                ) from exc  # 22.05: EINVAL, after the header
            except hostlist.HostlistError:
                q.nodes.append(value)  # 22.05 matches it as a name: no job ran there, so only the header
    users = _csv(args.user)
    if not users and not args.allusers and not q.accounts and uid != 0:
        import pwd

        try:
            users = [pwd.getpwuid(uid).pw_name]
        except KeyError:
            users = [str(uid)]
    q.users.extend(users)
    try:
        if args.starttime:
            q.start = parse_datetime(args.starttime, now)
        elif not ids:
            q.start = _midnight(now)  # Slurm's default window: since midnight today
        if args.endtime:
            q.end = parse_datetime(args.endtime, now)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc  # already "Invalid time specification: ..."
    return q, steps


def _midnight(now: int) -> int:
    import datetime

    return int(
        datetime.datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    )


def main(argv: list[str] | None = None) -> int:
    def body() -> int:
        args, extra = _parser().parse_known_args(argv)
        if extra:  # Snakemake's plugin runs `sacct -nu USER -o Account%256 | tail -1` without a shell
            _unknown_arguments(extra)
        if args.helpformat:  # the fields -o takes, as 22.05 lists them (no dbd needed)
            from cli.fmt import help_columns

            sys.stdout.write("".join(line + "\n" for line in help_columns(FIELD_NAMES)))
            return 0
        now = int(time.time())
        if args.format:
            text = ",".join(args.format)
        elif args.long:
            text = LONG_FIELDS
        elif args.brief:
            text = BRIEF_FIELDS
        else:
            text = os.environ.get("SACCT_FORMAT") or DEFAULT_FIELDS
        fields = parse_format(text)
        query, wanted_steps = build_query(args, now, os.getuid())
        query.fields.extend(needed_fields(fields))
        from shoal.agent.client import AgentError, call

        try:
            resp = call(
                "/shoal.v1.Accounting/GetJobs",
                pb.AcctJobsRequest(query=query),
                pb.AcctJobsResponse,
                target="dbd",
            )
        except AgentError as exc:
            raise CommandError(exc.message) from exc
        with gc_paused():
            jobs = decode(resp)
            step_only: set[int] = set()
            if wanted_steps:
                for acct in jobs:
                    want = wanted_steps.get(_job_id(acct.job)) or wanted_steps.get(str(acct.job.job_id))
                    if want:
                        acct.steps[:] = [s for s in acct.steps if _step_suffix(s.step_id) in want]
                        step_only.add(id(acct.job))
            rows = group_rows(jobs, with_steps=not args.allocations)
            if step_only and not args.allocations:
                # `-j 5.0` lists that step alone, and nothing when job 5 has no step 0 (22.05)
                rows = [r for r in rows if r.step is not None or id(r.job) not in step_only]
            parsable = "P" if args.parsable2 else ("p" if args.parsable else "")
            lines = render(
                rows, fields, parsable=parsable, header=not args.noheader, now=now, units=args.units
            )
            sys.stdout.write("".join(line + "\n" for line in lines))
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    raise SystemExit(main())
