"""sstat: what running job steps use now, in 22.05's columns (and gres/gpuutil, gres/gpumem as later
Slurm versions name them in the TRES columns).

`sstat -j JOB[.STEP][,...] [-a] [-o FIELDS] [-p|-P] [-n] [--noconvert] [-i] [-e]`. The figures are
what each node's last ping answer said (ctld's GetLiveUsage, through the local agent): the step's live
processes on that node (CPU time, resident and virtual memory, disk I/O) and the job's GPUs there
(utilization now, used memory). A step's tasks on one node are measured together: the Max/Min
columns compare nodes, the Ave ones divide by the step's task count.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cli.common import CommandError, ctld, run_main
from cli.options import NO_ARG, Opt, OptionError, parse_argv
from shoal import hostlist
from shoal.timefmt import format_hms
from shoal.v1 import cluster_pb2, jobs_pb2
from shoal.v1 import controller_pb2 as pb

PROG = "sstat"
BATCH, EXTERN = -4, -5
STEP_NAMES = {BATCH: "batch", EXTERN: "extern"}
DEFAULT_FIELDS = (
    "JobID,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS,MaxPages,"
    "MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,MinCPUTask,AveCPU,NTasks,AveCPUFreq,ReqCPUFreqMin,"
    "ReqCPUFreqMax,ReqCPUFreqGov,ConsumedEnergy,MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,"
    "MaxDiskWrite,MaxDiskWriteNode,MaxDiskWriteTask,AveDiskWrite,TRESUsageInAve,TRESUsageInMax,"
    "TRESUsageInMaxNode,TRESUsageInMaxTask,TRESUsageInMin,TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot,"
    "TRESUsageOutAve,TRESUsageOutMax,TRESUsageOutMaxNode,TRESUsageOutMaxTask,TRESUsageOutMin,"
    "TRESUsageOutMinNode,TRESUsageOutMinTask,TRESUsageOutTot"
)
PID_FIELDS = "JobID,Nodelist,Pids"
# every field and its default width, as 22.05's sstat (--helpformat lists them in this order)
WIDTHS = {
    "AveCPU": 10,
    "AveCPUFreq": 10,
    "AveDiskRead": 12,
    "AveDiskWrite": 12,
    "AvePages": 10,
    "AveRSS": 10,
    "AveVMSize": 10,
    "ConsumedEnergy": 14,
    "ConsumedEnergyRaw": 15,
    "JobID": 12,
    "MaxDiskRead": 12,
    "MaxDiskReadNode": 15,
    "MaxDiskReadTask": 15,
    "MaxDiskWrite": 12,
    "MaxDiskWriteNode": 16,
    "MaxDiskWriteTask": 16,
    "MaxPages": 8,
    "MaxPagesNode": 12,
    "MaxPagesTask": 14,
    "MaxRSS": 10,
    "MaxRSSNode": 10,
    "MaxRSSTask": 10,
    "MaxVMSize": 10,
    "MaxVMSizeNode": 14,
    "MaxVMSizeTask": 14,
    "MinCPU": 10,
    "MinCPUNode": 10,
    "MinCPUTask": 10,
    "Nodelist": 20,
    "NTasks": 8,
    "Pids": 20,
    "ReqCPUFreq": 13,
    "ReqCPUFreqMin": 13,
    "ReqCPUFreqMax": 13,
    "ReqCPUFreqGov": 13,
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
}
_BY_LOWER = {name.lower(): name for name in WIDTHS}
USAGE = "Usage: sstat [options] -j <job(.stepid)>"
HELP = """\
sstat [<OPTION>] -j <job(.stepid)>
    Valid <OPTION> values are:
      -a, --allsteps:
                   Print all steps for the given job(s) when no step is
                   specified.
      -e, --helpformat:
                   Print a list of fields that can be specified with the
                   '--format' option
     -h, --help:   Print this description of use.
     -i, --pidformat:
                   Predefined format to list the pids running for each
                   job step.  (JobId,Nodes,Pids)
     -j, --jobs:
                   Format is <job(.step)>. Stat this job step
                   or comma-separated list of job steps. This option is
                   required.  The step portion will default to the lowest
                   numbered (not batch, extern, etc) step running if not
                   specified, unless the --allsteps flag is set where not
                   specifying a step will result in all running steps
                   to be displayed. A step id of 'batch' will display the
                   information about the batch step. A step id of 'extern'
                   will display the information about the extern step
                   when using PrologFlags=contain.
     -n, --noheader:
                   No header will be added to the beginning of output.
                   The default is to print a header.
     --noconvert:  Don't convert units from their original type
                   (e.g. 2048M won't be converted to 2G).
     -o, --format:
                   Comma separated list of fields. (use "--helpformat"
                   for a list of available fields).
     -p, --parsable: output will be '|' delimited with a '|' at the end
     -P, --parsable2: output will be '|' delimited without a '|' at the end
     --usage:      Display brief usage message.
     -v, --verbose:
                   Primarily for debugging purposes, report the state of
                   various variables during processing.
     -V, --version: Print version."""

OPTIONS = (
    Opt("allsteps", ("allsteps",), "a", NO_ARG),
    Opt("helpformat", ("helpformat",), "e", NO_ARG),
    Opt("help", ("help",), "h", NO_ARG),
    Opt("pidformat", ("pidformat",), "i", NO_ARG),
    Opt("jobs", ("jobs",), "j"),
    Opt("noheader", ("noheader",), "n", NO_ARG),
    Opt("noconvert", ("noconvert",), arg=NO_ARG),
    Opt("format", ("format", "fields"), "o"),
    Opt("parsable", ("parsable",), "p", NO_ARG),
    Opt("parsable2", ("parsable2",), "P", NO_ARG),
    Opt("usage", ("usage",), arg=NO_ARG),
    Opt("verbose", ("verbose",), "v", NO_ARG),
    Opt("version", ("version",), "V", NO_ARG),
)


class SstatError(Exception):
    """A refusal printed as `sstat: LEVEL: message`, exit 1."""

    def __init__(self, message: str, level: str = "error") -> None:
        super().__init__(message)
        self.message = message
        self.level = level


@dataclass(frozen=True)
class Field:
    name: str
    width: int


def parse_fields(text: str) -> list[Field]:
    """`JobID,MaxRSS%20,avecpu` -> fields with widths; an unknown one is 22.05's error."""
    out: list[Field] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, width = part.partition("%")
        known = _BY_LOWER.get(name.lower())
        if known is None:
            raise SstatError(f'Invalid field requested: "{name}"')
        out.append(Field(known, int(width) if width.isdigit() else WIDTHS[known]))
    return out


@dataclass(frozen=True)
class Wanted:
    job_id: int
    step: str  # "" = the default (lowest numbered running step; all with -a), "batch", "extern", "N"


def parse_jobs(values: Sequence[str]) -> list[Wanted]:
    out: list[Wanted] = []
    for value in values:
        for word in value.split(","):
            word = word.strip()
            if not word:
                continue
            job, dot, step = word.partition(".")
            if not job.isdigit() or (dot and step not in ("batch", "extern") and not step.isdigit()):
                raise SstatError(f"Bad job/step specified: {word}", "fatal")
            out.append(Wanted(int(job), step))
    return out


# --- the figures of one step -------------------------------------------------------------------------


@dataclass(frozen=True)
class StepStat:
    """One step as its nodes last reported it (one StepUsage per node)."""

    job_id: int
    step_id: int
    parts: tuple[cluster_pb2.StepUsage, ...]

    @property
    def ntasks(self) -> int:
        return max(1, sum(p.ntasks for p in self.parts))


def _step_text(job_id: int, step_id: int) -> str:
    return f"{job_id}.{STEP_NAMES.get(step_id, step_id)}"


def _per_task(part: cluster_pb2.StepUsage, value: int) -> int:
    return value // max(1, part.ntasks)


def _kb(value_kb: int, noconvert: bool) -> str:
    return str(value_kb * 1024) if noconvert else f"{value_kb}K"


def _disk(value: int, noconvert: bool) -> str:
    if noconvert or value < 1024 * 1024:
        return str(value)
    return f"{value / (1024 * 1024):.2f}M"


class _Extremes:
    """Max, min and average over the step's nodes of one per-task figure."""

    def __init__(self, stat: StepStat, value: Callable[[cluster_pb2.StepUsage], int]) -> None:
        figures = [(_per_task(p, value(p)), p.node) for p in stat.parts]
        self.max, self.max_node = max(figures, key=lambda f: f[0])
        self.min, self.min_node = min(figures, key=lambda f: f[0])
        self.total = sum(value(p) for p in stat.parts)
        self.ave = self.total // stat.ntasks


def _tres(values: dict[str, str]) -> str:
    return ",".join(f"{name}={values[name]}" for name in sorted(values))


def _gpu(stat: StepStat) -> tuple[int, int] | None:
    """(utilization now, used memory MB) over the step's GPUs; None without a GPU."""
    utils = [p.gpu_util for p in stat.parts if p.gpu_util >= 0]
    if not utils:
        return None
    return round(sum(utils) / len(utils)), sum(p.gpu_mem_mb for p in stat.parts)


def columns(stat: StepStat, noconvert: bool) -> dict[str, str]:
    """Every field's text for one step."""
    rss = _Extremes(stat, lambda p: p.rss_kb)
    vmem = _Extremes(stat, lambda p: p.vmem_kb)
    cpu = _Extremes(stat, lambda p: p.cpu_time_us // 1_000_000)
    read = _Extremes(stat, lambda p: p.disk_read)
    write = _Extremes(stat, lambda p: p.disk_write)
    gpu = _gpu(stat)
    gpu_in = {"gres/gpumem": f"{gpu[1]}M", "gres/gpuutil": str(gpu[0])} if gpu else {}

    def usage_in(c: int, d: int, m: int, v: int) -> str:
        return _tres(
            {
                "cpu": format_hms(c),
                "energy": "0",
                "fs/disk": str(d),
                "mem": _kb(m, noconvert),
                "pages": "0",
                "vmem": _kb(v, noconvert),
                **gpu_in,
            }
        )

    def nodes_in(c: str, d: str, m: str, v: str) -> str:
        gres = {k: rss.max_node for k in gpu_in}
        return _tres({"cpu": c, "energy": c, "fs/disk": d, "mem": m, "pages": m, "vmem": v, **gres})

    tasks_in = _tres(
        {
            "cpu": format_hms(0),
            "fs/disk": "0",
            "mem": "0",
            "pages": "0",
            "vmem": "0",
            **dict.fromkeys(gpu_in, "0"),
        }
    )
    nodes = hostlist.collect(p.node for p in stat.parts)
    return {
        "JobID": _step_text(stat.job_id, stat.step_id),
        "MaxVMSize": _kb(vmem.max, noconvert),
        "MaxVMSizeNode": vmem.max_node,
        "MaxVMSizeTask": "0",
        "AveVMSize": _kb(vmem.ave, noconvert),
        "MaxRSS": _kb(rss.max, noconvert),
        "MaxRSSNode": rss.max_node,
        "MaxRSSTask": "0",
        "AveRSS": _kb(rss.ave, noconvert),
        "MaxPages": "0",
        "MaxPagesNode": rss.max_node,
        "MaxPagesTask": "0",
        "AvePages": "0",
        "MinCPU": format_hms(cpu.min),
        "MinCPUNode": cpu.min_node,
        "MinCPUTask": "0",
        "AveCPU": format_hms(cpu.ave),
        "NTasks": str(stat.ntasks),
        "AveCPUFreq": "0",
        "ReqCPUFreq": "0",
        "ReqCPUFreqMin": "0",
        "ReqCPUFreqMax": "0",
        "ReqCPUFreqGov": "0",
        "ConsumedEnergy": "0",
        "ConsumedEnergyRaw": "0",
        "MaxDiskRead": _disk(read.max, noconvert),
        "MaxDiskReadNode": read.max_node,
        "MaxDiskReadTask": "0",
        "AveDiskRead": _disk(read.ave, noconvert),
        "MaxDiskWrite": _disk(write.max, noconvert),
        "MaxDiskWriteNode": write.max_node,
        "MaxDiskWriteTask": "0",
        "AveDiskWrite": _disk(write.ave, noconvert),
        "Nodelist": nodes,
        "Pids": ",".join(str(pid) for p in stat.parts for pid in p.pids),
        "TRESUsageInAve": usage_in(cpu.ave, read.ave, rss.ave, vmem.ave),
        "TRESUsageInMax": usage_in(cpu.max, read.max, rss.max, vmem.max),
        "TRESUsageInMaxNode": nodes_in(cpu.max_node, read.max_node, rss.max_node, vmem.max_node),
        "TRESUsageInMaxTask": tasks_in,
        "TRESUsageInMin": usage_in(cpu.min, read.min, rss.min, vmem.min),
        "TRESUsageInMinNode": nodes_in(cpu.min_node, read.min_node, rss.min_node, vmem.min_node),
        "TRESUsageInMinTask": tasks_in,
        "TRESUsageInTot": usage_in(cpu.total, read.total, rss.total, vmem.total),
        "TRESUsageOutAve": _tres({"energy": "0", "fs/disk": str(write.ave)}),
        "TRESUsageOutMax": _tres({"energy": "0", "fs/disk": str(write.max)}),
        "TRESUsageOutMaxNode": _tres({"energy": write.max_node, "fs/disk": write.max_node}),
        "TRESUsageOutMaxTask": "fs/disk=0",
        "TRESUsageOutMin": _tres({"energy": "0", "fs/disk": str(write.min)}),
        "TRESUsageOutMinNode": _tres({"energy": write.min_node, "fs/disk": write.min_node}),
        "TRESUsageOutMinTask": "fs/disk=0",
        "TRESUsageOutTot": _tres({"energy": "0", "fs/disk": str(write.total)}),
    }


def _cell(text: str, width: int, left: bool) -> str:
    if len(text) > width:
        text = text[: width - 1] + "+"
    return text.ljust(width) if left else text.rjust(width)


def render_header(fields: Sequence[Field], parsable: str) -> list[str]:
    """The header: names and dashes, or the names '|'-separated."""
    if parsable:
        return ["|".join(f.name for f in fields) + ("|" if parsable == "p" else "")]
    return [
        " ".join(_cell(f.name, f.width, f.name == "JobID") for f in fields) + " ",
        " ".join("-" * f.width for f in fields) + " ",
    ]


def render_row(values: dict[str, str], fields: Sequence[Field], parsable: str) -> str:
    """One line: aligned columns (JobID on the left, the rest on the right), or '|'-separated
    (`parsable`: "p" ends the line with '|', "P" does not)."""
    if parsable:
        line = "|".join(values[f.name] for f in fields)
        return line + "|" if parsable == "p" else line
    return " ".join(_cell(values[f.name], f.width, f.name == "JobID") for f in fields) + " "


def select_steps(wanted: Wanted, steps: Sequence[cluster_pb2.StepUsage], all_steps: bool) -> list[StepStat]:
    """The steps of one -j word: that step, or the lowest numbered running one (every one with -a)."""
    by_step: dict[int, list[cluster_pb2.StepUsage]] = {}
    for s in steps:
        if s.job_id == wanted.job_id:
            by_step.setdefault(s.step_id, []).append(s)
    if wanted.step:
        step_id = {"batch": BATCH, "extern": EXTERN}.get(wanted.step)
        chosen = [step_id if step_id is not None else int(wanted.step)]
    elif all_steps:  # as 22.05 lists them: extern, batch, then the numbered steps
        chosen = sorted(by_step, key=lambda s: (s >= 0, s))
    else:
        numbered = sorted(s for s in by_step if s >= 0)
        chosen = numbered[:1]
    return [StepStat(wanted.job_id, s, tuple(by_step[s])) for s in chosen if s in by_step]


def helpformat() -> list[str]:
    from cli.fmt import help_columns

    return help_columns(list(WIDTHS))


def _body(argv: list[str]) -> int:
    try:
        opts, _ = parse_argv(PROG, argv, OPTIONS, stop_at_positional=False)
    except OptionError as exc:
        print(exc.lines[0], file=sys.stderr)
        return exc.exit_code
    jobs: list[str] = []
    fmt = DEFAULT_FIELDS
    all_steps = noheader = noconvert = False
    parsable = ""
    for parsed in opts:
        dest, value = parsed.opt.dest, parsed.value or ""
        if dest == "jobs":
            jobs.append(value)
        elif dest == "format":
            fmt = value
        elif dest == "pidformat":
            fmt = PID_FIELDS
        elif dest == "allsteps":
            all_steps = True
        elif dest == "noheader":
            noheader = True
        elif dest == "noconvert":
            noconvert = True
        elif dest == "parsable":
            parsable = "p"
        elif dest == "parsable2":
            parsable = "P"
        elif dest == "helpformat":
            print("\n".join(helpformat()))
            return 0
        elif dest == "help":
            print(HELP)
            return 0
        elif dest == "usage":
            print(USAGE)
            return 0
        elif dest == "version":
            from cli.options import version_line  # noqa: PLC0415 - only -V needs it

            print(version_line())
            return 0
    try:
        fields = parse_fields(fmt)
        if not jobs:
            raise SstatError("You didn't give me any jobs to stat.")
        wanted = parse_jobs(jobs)
    except SstatError as exc:
        print(f"{PROG}: {exc.level}: {exc.message}", file=sys.stderr)
        return 1
    answer = ctld(
        "GetLiveUsage",
        pb.GetLiveUsageRequest(job_ids=sorted({w.job_id for w in wanted}), steps=True),
        pb.GetLiveUsageResponse,
    )
    if not noheader:
        print("\n".join(render_header(fields, parsable)))
    for w in wanted:
        state = answer.job_states.get(w.job_id)
        if state is None:
            print(f"{PROG}: error: couldn't get steps for job {w.job_id}", file=sys.stderr)
            continue
        if state != jobs_pb2.RUNNING:
            print(f"{PROG}: error: No steps running for job {w.job_id}", file=sys.stderr)
            continue
        chosen = select_steps(w, answer.steps, all_steps)
        if w.step and not chosen:
            print(f"{PROG}: error: StepId={w.job_id}.{w.step} not found running.", file=sys.stderr)
        for stat in chosen:
            print(render_row(columns(stat, noconvert), fields, parsable))
    return 0


def main(argv: list[str] | None = None) -> int:
    def body() -> int:
        try:
            return _body(sys.argv[1:] if argv is None else argv)
        except CommandError as exc:
            print(f"{PROG}: error: {exc.message}", file=sys.stderr)
            return 1

    return run_main(PROG, body)


if __name__ == "__main__":
    raise SystemExit(main())
