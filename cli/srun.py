"""srun: run a parallel job step, inside an allocation (SLURM_JOB_ID) or in a new one.

srun opens a TCP listener for the step's I/O, asks ctld for a step (ctld lays it out and has
every node start its tasks, which connect back here), streams the tasks' output, forwards stdin
and signals, and exits with the highest task exit status (128+n for a task killed by signal n).
One Ctrl-C prints the tasks' status; two within a second terminate the step.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time

from cli.common import CommandError, ctld, run_main
from cli.options import (
    HINT_HELP,
    NO_ARG,
    OPTIONAL,
    SBATCH_OPTIONS,
    JobOptions,
    Opt,
    OptionError,
    SpecError,
    SubmitContext,
    build_job_spec,
    check_gpu_bind,
    distribution_text,
    export_environment,
    mem_bind_text,
    parse_count,
    parse_hint,
    parse_mb,
    parse_minutes,
    parse_node_range,
    parse_positive,
    rlimit_environment,
    version_line,
)
from cli.salloc import (
    allocate,
    get_job,
    immediate_seconds,
    job_environment,
    parse_options,
    release,
    wait_for_prologs,
)
from cli.stepio import PortRangeError, StepIO, TaskExit, parse_port_range
from shoal import hostlist
from shoal.agent.client import slurm_conf_value
from shoal.timefmt import format_timestamp
from shoal.v1 import controller_pb2, jobs_pb2

PROG = "srun"
RETRY_S = 0.5
JOB_CHECK_S = 3.0
ABORT_WAIT_S = 32  # KillWait + 2 with Slurm's default KillWait; the step's reply gives the real one
FORWARDED_SIGNALS = (signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)

_SKIP = {
    "array",
    "wrap",
    "parsable",
    "test_only",
    "wait",
    "requeue",
    "no_requeue",
    "kill_on_invalid_dep",
    "signal",
    "get_user_env",
}
SRUN_OPTIONS: tuple[Opt, ...] = tuple(o for o in SBATCH_OPTIONS if o.dest not in _SKIP) + (
    Opt("label", ("label",), "l", NO_ARG),
    Opt("unbuffered", ("unbuffered",), "u", NO_ARG),
    Opt("kill_on_bad_exit", ("kill-on-bad-exit",), "K", OPTIONAL),
    Opt("wait_secs", ("wait",), "W"),
    Opt("overlap", ("overlap",), arg=NO_ARG),
    Opt("jobid", ("jobid",)),
    Opt("mpi", ("mpi",)),
    Opt("cpu_bind", ("cpu-bind", "cpu_bind")),
    Opt("pty", ("pty",), arg=NO_ARG),
    Opt("exact", ("exact",), arg=NO_ARG),
    Opt("whole", ("whole",), arg=NO_ARG),
    Opt("slurmd_debug", ("slurmd-debug",)),
    Opt("immediate", ("immediate",), "I", OPTIONAL),
)

SRUN_ENV = {
    "SLURM_ACCOUNT": "account",
    "SLURM_HINT": "hint",
    "SLURM_REQ_SWITCH": "switches",
    "SRUN_CPUS_PER_TASK": "cpus_per_task",  # 22.05: not SLURM_CPUS_PER_TASK (the job's -c is not inherited)
    "SLURM_DISTRIBUTION": "distribution",
    "SLURM_EXACT": "exact",
    "SLURM_EXCLUSIVE": "exclusive",
    "SLURM_IMMEDIATE": "immediate",
    "SLURM_GRES": "gres",
    "SLURM_GPUS": "gpus",  # the job's --gpus* (batch script, salloc): the step asks the same
    "SLURM_GPUS_PER_NODE": "gpus_per_node",
    "SLURM_GPUS_PER_TASK": "gpus_per_task",
    "SLURM_JOB_NAME": "job_name",
    "SLURM_KILL_BAD_EXIT": "kill_on_bad_exit",
    "SLURM_LABELIO": "label",
    "SLURM_MEM_PER_CPU": "mem_per_cpu",  # the job's, inside an allocation: such a step holds it all
    "SLURM_MEM_PER_NODE": "mem",
    "SLURM_OVERLAP": "overlap",
    "SLURM_PARTITION": "partition",
    "SLURM_QOS": "qos",
    "SLURM_TIMELIMIT": "time",
    "SLURM_UNBUFFEREDIO": "unbuffered",
    "SLURM_WAIT": "wait_secs",
}


# What salloc gives its command but 22.05's srun does not give the tasks of its own allocation.
OWN_ALLOCATION_UNSET = ("SLURM_NODE_ALIASES", "SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK")


def split_export(spec: str) -> list[str]:
    """--export items, split at commas outside quotes."""
    items, cur, quote = [], "", ""
    for ch in spec:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == ",":
            items.append(cur)
            cur = ""
            continue
        cur += ch
    items.append(cur)
    return [i for i in items if i]


def task_export(spec: str | None, environ: dict[str, str]) -> dict[str, str]:
    """The tasks' environment for --export; NAME="value" loses its quotes, as Slurm reads it
    (DeepSpeed passes `--export=ALL,NCCL_X="v"`)."""
    items = split_export(spec or "ALL")
    pairs: dict[str, str] = {}
    rest: list[str] = []
    for item in items:
        name, eq, value = item.partition("=")
        if eq:
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            pairs[name] = value
        else:
            rest.append(item)
    env = export_environment(",".join(rest) or ("NONE" if spec else "ALL"), environ)
    env.update(pairs)
    return env


def _ranges(ids: list[int]) -> str:
    ids = sorted(ids)
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


def describe_exit(ended: TaskExit) -> str:
    if ended.oom:
        return "Out Of Memory"
    if ended.signal:
        try:
            return signal.strsignal(ended.signal) or f"Signal {ended.signal}"
        except ValueError:
            return f"Signal {ended.signal}"
    return f"Exited with exit code {ended.code}"


def exit_messages(exits: dict[int, TaskExit]) -> list[str]:
    """`srun: error: node1: tasks 0-1: Exited with exit code 3`, one line per node and status."""
    groups: dict[tuple[str, str], list[int]] = {}
    for task, ended in sorted(exits.items()):
        if ended.code or ended.signal:
            groups.setdefault((ended.node, describe_exit(ended)), []).append(task)
    lines = []
    for (node, what), tasks in groups.items():
        noun = "task" if len(tasks) == 1 else "tasks"
        lines.append(f"srun: error: {node}: {noun} {_ranges(tasks)}: {what}")
    return lines


# a task ended by one of these makes 22.05's srun say the step was force-terminated; other signals
# (SIGINT, SIGSEGV, SIGUSR1...) only get the task's error line (measured on the running one)
FORCE_TERMINATING = (signal.SIGKILL, signal.SIGTERM)


def force_terminated(exits: dict[int, TaskExit], step_text: str) -> list[str]:
    """`srun: Force Terminated StepId=J.S` after the error lines, when a task was killed or terminated."""
    if any(e.signal in FORCE_TERMINATING and not e.oom for e in exits.values()):
        return [f"srun: Force Terminated {step_text}"]
    return []


def time_limit_notice(step: jobs_pb2.JobStep, timed_out_at: int) -> list[str]:
    """What 22.05's stepd writes to srun's stderr from each node of a step it ends at the step's own
    time limit (srun -t): `slurmstepd-node1: error: *** STEP 12.0 ON node1 CANCELLED AT <time> DUE TO
    TIME LIMIT ***` (the prefix names the node, as in the batch script's own time-limit line)."""
    if not timed_out_at:
        return []
    when = format_timestamp(timed_out_at)
    return [
        f"slurmstepd-{part.node}: error: *** STEP {step.job_id}.{step.step_id} ON {part.node} CANCELLED AT {when}"
        " DUE TO TIME LIMIT ***"
        for part in step.layout
    ]


def _still_running(job_id: int) -> bool:
    try:
        current = get_job(job_id)
    except CommandError:
        return False
    return current is not None and current.state == jobs_pb2.RUNNING


def step_exit_status(exits: dict[int, TaskExit]) -> int:
    return max((e.status for e in exits.values()), default=0)


def allocation_exit(exits: dict[int, TaskExit], status: int) -> tuple[int, int]:
    """(exit code, signal) srun's own allocation ends with: a signal when a task was killed by one
    (22.05: `srun sh -c 'kill -TERM $$'` -> FAILED 0:15, also beside a task that exited 143), else
    the highest exit code, 143 included (`srun sh -c 'exit 143'` -> ExitCode=143:0, not 0:15).
    Without task exits (the step never ran), from srun's status."""
    signalled = [e for e in exits.values() if e.signal or e.oom]
    if signalled:
        worst = max(signalled, key=lambda e: e.status)
        return 0, worst.status - 128
    if exits:
        return max(e.code for e in exits.values()), 0
    return (status, 0) if status < 128 else (0, status - 128)


def step_usage(exits: dict[int, TaskExit]) -> jobs_pb2.Usage:
    """What sacct shows for the step: MaxRSS is the largest task's peak, TotalCPU the sum."""
    return jobs_pb2.Usage(
        max_rss_kb=max((e.max_rss_kb for e in exits.values()), default=0),
        cpu_time_us=sum(e.cpu_time_us for e in exits.values()),
    )


def io_host(job: jobs_pb2.JobInfo) -> str:
    """The address of this host on the route to the job's first node (what tasks connect to)."""
    first = job.allocation[0].node if job.allocation else ""
    addr = first
    try:
        reply = ctld(
            "GetNodes", controller_pb2.GetNodesRequest(names=[first]), controller_pb2.GetNodesResponse
        )
        if reply.nodes and reply.nodes[0].addr:
            addr = reply.nodes[0].addr
    except CommandError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((addr, 9))
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def step_request(
    opts: JobOptions, environ: dict[str, str], command: list[str], job_id: int, cli_given: set[str]
) -> controller_pb2.CreateStepRequest:
    req = controller_pb2.CreateStepRequest(job_id=job_id)
    v = opts.get
    try:
        if opts.has("nodes"):
            req.min_nodes, req.max_nodes = parse_node_range(v("nodes") or "")
        if opts.has("ntasks"):
            req.num_tasks = parse_positive(v("ntasks") or "", "--ntasks")
        if opts.has("ntasks_per_node"):
            req.ntasks_per_node = parse_count(v("ntasks_per_node") or "", "--ntasks-per-node")
        if opts.has("cpus_per_task"):
            req.cpus_per_task = parse_positive(v("cpus_per_task") or "", "--cpus-per-task")
        # --mem/--mem-per-cpu on the command line win over either from the environment.
        mem_cli = {"mem", "mem_per_cpu"} & cli_given
        if opts.has("mem") and ("mem" in cli_given or not mem_cli):
            req.mem_per_node_mb = parse_mb(v("mem") or "", "--mem")
        elif opts.has("mem_per_cpu") and ("mem_per_cpu" in cli_given or not mem_cli):
            req.mem_per_cpu_mb = parse_mb(v("mem_per_cpu") or "", "--mem-per-cpu")
        if opts.has("time"):  # the step's own limit, which ctld enforces (22.05); 0 is none
            req.time_limit_min = parse_minutes(v("time") or "", "--time")
    except SpecError as exc:
        raise CommandError(exc.message) from exc
    inherit_shape(req, environ, cli_given)
    req.nodelist = v("nodelist") or ""
    req.exclude = v("exclude") or ""
    req.distribution = v("distribution") or ""
    try:  # 22.05's words and exit status 255 for a bad layout or memory binding
        if req.distribution:
            distribution_text(req.distribution, bool(req.nodelist), PROG)
        if opts.has("mem_bind"):
            mem_bind_text(v("mem_bind") or "")
    except SpecError as exc:
        raise CommandError(exc.message, exc.exit_code) from exc
    # SLURM_JOB_NAME (the batch job's name) is ignored inside an allocation, as in Slurm
    req.name = (v("job_name") if "job_name" in cli_given else "") or os.path.basename(command[0])
    req.overlap = opts.has("overlap")
    req.exclusive = opts.has("exclusive")
    # 22.05: only the CPUs asked with --exact, which -c and --exclusive imply; else all the job's on each node
    req.exact = opts.has("exact") or req.exclusive or opts.has("cpus_per_task")
    req.overcommit = opts.has("overcommit")
    if opts.has("hint"):  # the step's tasks are told, as 22.05's are (SLURM_HINT)
        try:
            req.launch.environment["SLURM_HINT"] = parse_hint(v("hint") or "")
        except SpecError as exc:
            raise CommandError(exc.message) from exc
    req.srun_host, req.srun_pid = socket.gethostname().split(".")[0], os.getpid()  # SrunHost:Pid
    launch = req.launch
    launch.argv.extend(command)
    launch.environment.update(task_export(v("export"), environ))
    try:
        launch.environment.update(rlimit_environment(opts, PROG))
    except SpecError as exc:
        raise CommandError(exc.message) from exc
    if req.ntasks_per_node and "ntasks_per_node" in cli_given:
        launch.environment["SLURM_NTASKS_PER_NODE"] = str(req.ntasks_per_node)  # the step's, for its tasks
    launch.cwd = os.path.abspath(v("chdir") or ".")
    launch.std_out = v("output") or ""
    launch.std_err = v("error") or ""
    launch.std_in = v("input") or ""
    launch.open_mode = "append" if (v("open_mode") or "").lower() in ("a", "append") else ""
    launch.label = opts.has("label")
    launch.unbuffered = opts.has("unbuffered")
    launch.distribution_given = opts.has("distribution")
    launch.kill_on_bad_exit = opts.has("kill_on_bad_exit") and (v("kill_on_bad_exit") or "1") != "0"
    step_gpus(req, opts)
    mask = os.umask(0)
    os.umask(mask)
    launch.umask = mask
    return req


def ignores_ntasks_per_node(num_tasks: int, nodes: int, per_node: int) -> bool:
    """22.05 drops --ntasks-per-node (saying so) when -n asks more tasks than one node's share and
    they do not make up exactly that many per node: fewer, or more in a multiple of the node count
    (more, not a multiple, is kept and refused for CPUs). Measured: tests/compat/layouts/."""
    if not (per_node and num_tasks and nodes) or num_tasks <= per_node or num_tasks == per_node * nodes:
        return False
    return num_tasks < per_node * nodes or num_tasks % nodes == 0


def ntasks_per_node_warning(num_tasks: int, nodes: int, per_node: int) -> str:
    return (
        f"srun: Warning: can't honor --ntasks-per-node set to {per_node} which doesn't match the requested "
        f"tasks {num_tasks} with the number of requested nodes {nodes}. Ignoring --ntasks-per-node."
    )


def inherit_shape(
    req: controller_pb2.CreateStepRequest, environ: dict[str, str], cli_given: set[str]
) -> None:
    """Inside an allocation SLURM_NTASKS, SLURM_NNODES and SLURM_NTASKS_PER_NODE are srun's input
    variables for -n, -N and --ntasks-per-node (the command line wins each), as in 22.05 (-w names
    nodes the step must include, among as many as SLURM_NNODES says)."""

    def number(name: str) -> int:
        text = environ.get(name, "")
        return int(text) if text.isdigit() else 0

    if "ntasks" not in cli_given and not req.num_tasks:
        req.num_tasks = number("SLURM_NTASKS")
    if "nodes" not in cli_given and not req.min_nodes:
        req.min_nodes = number("SLURM_NNODES")
    if "ntasks_per_node" not in cli_given and not req.ntasks_per_node:
        req.ntasks_per_node = number("SLURM_NTASKS_PER_NODE")
    if req.num_tasks and req.min_nodes > req.num_tasks:
        print(
            f"srun: Warning: can't run {req.num_tasks} processes on {req.min_nodes} nodes, "
            f"setting nnodes to {req.num_tasks}",
            file=sys.stderr,
        )
        req.min_nodes = req.max_nodes = req.num_tasks
    if ignores_ntasks_per_node(req.num_tasks, req.min_nodes, req.ntasks_per_node):
        print(ntasks_per_node_warning(req.num_tasks, req.min_nodes, req.ntasks_per_node), file=sys.stderr)
        req.ntasks_per_node = 0


def check_excluded(req: controller_pb2.CreateStepRequest, job: jobs_pb2.JobInfo) -> None:
    """-x leaving fewer of the job's nodes than the step's node count: 22.05's two lines, before any step."""
    if not req.exclude:
        return
    try:
        excluded = set(hostlist.expand(req.exclude))
    except hostlist.HostlistError:
        return  # ctld refuses it in Slurm's words
    left = len([a for a in job.allocation if a.node not in excluded])
    if req.min_nodes > left:
        raise CommandError(
            f"Only allocated {left} nodes asked for {req.min_nodes}\n"
            "srun: error: Are required nodes explicitly excluded?"
        )


def step_gpus(req: controller_pb2.CreateStepRequest, opts: JobOptions) -> None:
    """--gres/--gpus/--gpus-per-node/--gpus-per-task take GPUs from the job's; --gpu-bind picks each
    task's among them (checked here, applied on the node)."""
    v = opts.get
    req.gres = v("gres") or ""
    req.gpus = v("gpus") or ""
    req.gpus_per_node = v("gpus_per_node") or ""
    req.gpus_per_task = v("gpus_per_task") or ""
    per_task = req.gpus_per_task.rpartition(":")[2]
    req.launch.gpus_per_task = int(per_task) if per_task.isdigit() else 0
    req.launch.gpu_bind = v("gpu_bind") or ""
    if req.launch.gpu_bind:
        try:
            check_gpu_bind(req.launch.gpu_bind)
        except SpecError as exc:
            raise CommandError(exc.message) from exc


class Interrupts:
    """Ctrl-C once: print the tasks' status; twice within a second: terminate the step."""

    def __init__(self, io: StepIO, step_text: str, num_tasks: int) -> None:
        self.io = io
        self.step_text = step_text
        self.num_tasks = num_tasks
        self.last = 0.0
        self.cancelled = False
        self.announced = False
        self.aborted_at = 0.0
        self.abort_wait = ABORT_WAIT_S

    def on_sigint(self, signum: int, frame: object) -> None:
        now = time.monotonic()
        if now - self.last <= 1.0:
            self.cancelled = True
            self.aborted_at = self.aborted_at or now
            if self.step_text:  # else run_step says it once the step's id is known
                self.announce_abort()
            self.io.signal(0)
            return
        self.last = now
        print("srun: interrupt (one more within 1 sec to abort)", file=sys.stderr)
        with self.io.lock:
            done = sorted(self.io.exits)
        running = [t for t in range(self.num_tasks) if t not in done]
        if running:
            print(f"srun: {self.step_text} tasks {_ranges(running)}: running", file=sys.stderr)
        if done:
            print(f"srun: {self.step_text} tasks {_ranges(done)}: exited", file=sys.stderr)

    def announce_abort(self) -> None:
        if self.announced:
            return
        self.announced = True
        print(f"srun: sending Ctrl-C to {self.step_text}", file=sys.stderr)
        print(
            f"srun: Job step aborted: Waiting up to {self.abort_wait} seconds for job step to finish.",
            file=sys.stderr,
        )

    def abort_expired(self) -> bool:
        """The step was aborted and did not end within the time announced: stop waiting for it."""
        return bool(self.aborted_at) and time.monotonic() - self.aborted_at > self.abort_wait

    def on_sigterm(self, signum: int, frame: object) -> None:
        self.cancelled = True
        self.aborted_at = self.aborted_at or time.monotonic()
        self.io.signal(0)


def whole_nodes_unless_counted(req: controller_pb2.CreateStepRequest, opts: JobOptions) -> None:
    """The step of an allocation srun made itself with --exclusive but no -n: as 22.05, its tasks get
    all the (whole) nodes' CPUs (`srun -N1 --exclusive`: SLURM_CPUS_ON_NODE=16), where -n makes the
    step exact as inside an allocation (-n1: 1, -n2: 2; measured on the running one)."""
    if req.exclusive and not opts.has("ntasks") and not opts.has("exact") and not opts.has("cpus_per_task"):
        req.exclusive = False  # steps get dedicated CPUs anyway; here it would only mean --exact
        req.exact = False


def run_step(
    opts: JobOptions,
    environ: dict[str, str],
    command: list[str],
    job: jobs_pb2.JobInfo,
    cli_given: set[str],
    own_allocation: bool = False,
    ended: dict[int, TaskExit] | None = None,
) -> int:
    """Create the step, run its tasks and wait for them: srun's exit status. `ended` receives how
    each task ended (srun's own allocation is released with it)."""
    stdin_mode = (opts.get("input") or "").strip()
    targets = (
        "0"
        if not stdin_mode
        else ("all" if stdin_mode.lower() == "all" else (stdin_mode if stdin_mode.isdigit() else "none"))
    )
    try:
        io = StepIO(
            label=opts.has("label"),
            stdin_targets=targets,
            port_range=parse_port_range(slurm_conf_value("SrunPortRange")),
        )
    except (ValueError, PortRangeError) as exc:
        raise CommandError(str(exc)) from exc
    req = step_request(opts, environ, command, job.job_id, cli_given)
    if own_allocation:
        whole_nodes_unless_counted(req, opts)
    check_excluded(req, job)
    req.launch.own_allocation = own_allocation
    req.launch.io_host = io_host(job)
    req.launch.io_port = io.port
    req.launch.io_token = io.token
    step_text = ""
    reported: set[int] = set()
    killed = threading.Event()
    if req.launch.kill_on_bad_exit:  # before the step exists: a task may end at once

        def on_exit(task: int, ended: TaskExit) -> None:
            if (ended.code or ended.signal) and not killed.is_set():
                killed.set()
                reported.add(task)
                print(f"srun: error: {ended.node}: task {task}: {describe_exit(ended)}", file=sys.stderr)
                if step_text:
                    print(f"srun: Terminating {step_text}", file=sys.stderr)
                io.signal(0)

        io.on_exit.append(on_exit)
    waiting = False
    # srun's Ctrl-C handling is in place before the step exists, so an early Ctrl-C reaches the step
    # (a terminating StepIO also stops nodes that connect later) instead of killing srun and leaving it.
    interrupts = Interrupts(io, "", 0)
    signal.signal(signal.SIGINT, interrupts.on_sigint)
    signal.signal(signal.SIGTERM, interrupts.on_sigterm)
    for forwarded in FORWARDED_SIGNALS:  # as Slurm's srun: these reach the tasks, srun lives on
        signal.signal(forwarded, lambda signum, frame: io.signal(signum))
    while True:
        try:
            reply = ctld("CreateStep", req, controller_pb2.CreateStepResponse)
        except CommandError as exc:
            raise CommandError(f"Unable to create step for job {job.job_id}: {exc.message}") from exc
        if not reply.retry:
            break
        if interrupts.cancelled:
            raise KeyboardInterrupt
        if not waiting:
            print(
                f"srun: Job {job.job_id} step creation temporarily disabled, retrying ({reply.message})",
                file=sys.stderr,
            )
            waiting = True
        time.sleep(RETRY_S)
    step = reply.step
    step_text = f"StepId={step.job_id}.{step.step_id}"
    if killed.is_set():
        print(f"srun: Terminating {step_text}", file=sys.stderr)
    if waiting:
        print(f"srun: Step created for job {step.job_id}", file=sys.stderr)
    io.expect(step.num_nodes)
    io.forward_stdin(sys.stdin.buffer)
    interrupts.step_text = step_text
    interrupts.num_tasks = step.num_tasks
    if reply.kill_wait:
        interrupts.abort_wait = reply.kill_wait + 2  # as Slurm: KillWait + 2 (32 s by default)
    if interrupts.cancelled:  # aborted with two Ctrl-C while the step was being created
        interrupts.announce_abort()
    wait_secs = int(opts.get("wait_secs") or 0) if (opts.get("wait_secs") or "").isdigit() else 0
    first_exit: float | None = None
    while not io.wait(step.num_nodes, timeout=1.0 if interrupts.aborted_at else JOB_CHECK_S):
        if interrupts.abort_expired():
            print("srun: error: Timed out waiting for job step to complete", file=sys.stderr)
            break
        if wait_secs and io.exits and first_exit is None:
            first_exit = time.monotonic()
        if first_exit is not None and time.monotonic() - first_exit > wait_secs:
            print(
                f"srun: error: {step_text}: tasks still running {wait_secs}s after the first one ended",
                file=sys.stderr,
            )
            io.signal(0)
            first_exit = float("inf")
        current = get_job(job.job_id)
        if current is None or current.state != jobs_pb2.RUNNING:
            io.wait(step.num_nodes, timeout=10)
            break
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    exits = dict(io.exits)
    io.close()
    if ended is not None:
        ended.update(exits)
    status = step_exit_status(exits)
    missing = step.num_tasks - len(exits)
    if missing and not status:
        status = 1
    try:
        done = ctld(
            "CompleteStep",
            controller_pb2.CompleteStepRequest(
                job_id=step.job_id,
                step_id=step.step_id,
                exit_code=min(status, 255),
                cancelled=interrupts.cancelled,
                usage=step_usage(exits),
                oom=any(e.oom for e in exits.values()),
                task_signal=max((e.signal for e in exits.values()), default=0),
            ),
            controller_pb2.CompleteStepResponse,
        )
    except CommandError:
        done = controller_pb2.CompleteStepResponse()
    for line in time_limit_notice(step, done.timed_out_at):  # first, as 22.05's stepd says it at the kill
        print(line, file=sys.stderr)
    for line in exit_messages({t: e for t, e in exits.items() if t not in reported}):
        print(line, file=sys.stderr)
    forced = [] if interrupts.cancelled or killed.is_set() else force_terminated(exits, step_text)
    if forced and _still_running(job.job_id):  # not when scancel or the time limit ended the job (22.05)
        for line in forced:
            print(line, file=sys.stderr)
    return status


def own_allocation_shape(opts: JobOptions) -> None:
    """srun's own allocation drops --ntasks-per-node as a step would (saying so once)."""
    try:
        tasks = parse_positive(opts.get("ntasks") or "", "--ntasks") if opts.has("ntasks") else 0
        nodes = parse_node_range(opts.get("nodes") or "")[0] if opts.has("nodes") else 0
        per_node = (
            parse_count(opts.get("ntasks_per_node") or "", "--ntasks-per-node")
            if opts.has("ntasks_per_node")
            else 0
        )
    except SpecError:
        return  # build_job_spec reports it in Slurm's words
    if ignores_ntasks_per_node(tasks, nodes, per_node):
        print(ntasks_per_node_warning(tasks, nodes, per_node), file=sys.stderr)
        opts.values.pop("ntasks_per_node", None)


def body(argv: list[str]) -> int:
    environ = dict(os.environ)
    try:
        opts, command = parse_options(PROG, argv, SRUN_OPTIONS, environ, SRUN_ENV)
    except OptionError as exc:
        print("\n".join(exc.lines), file=sys.stderr)
        return 255  # 22.05: a command-line (or #SBATCH) option getopt refuses ends it with 255
    if (opts.get("hint") or "").strip().lower() == "help":
        sys.stdout.write(HINT_HELP)
        return 1  # 22.05 exits 1 after it
    cli_given = {d for d, s in opts.source.items() if s == "cli"}
    if opts.has("help") or opts.has("usage"):
        usage = "Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]] [ : [OPTIONS(N)...]] executable(N) [args(N)...]"
        from cli.alloc_help import help_text

        sys.stdout.write(help_text(usage, SRUN_OPTIONS) if opts.has("help") else usage + "\n")
        return 0
    if opts.has("version"):
        print(version_line())
        return 0
    if not command:
        raise CommandError("No command given to execute.")
    job_id_text = opts.get("jobid") or environ.get("SLURM_JOB_ID") or ""
    if job_id_text:
        if not job_id_text.isdigit():
            raise CommandError(f"Invalid job id {job_id_text}")
        job = get_job(int(job_id_text))
        if job is None or job.state != jobs_pb2.RUNNING:
            raise CommandError(
                f"Unable to create step for job {job_id_text}: Job/step already completing or completed"
                if job is not None
                else f"Unable to confirm allocation for job {job_id_text}: Invalid job id specified"
            )
        job = wait_for_prologs(PROG, job)  # PrologFlags=NoHold: salloc did not wait, its steps do
        return run_step(opts, environ, command, job, cli_given)
    ctx = SubmitContext(
        cwd=os.getcwd(), environ=environ, now=int(time.time()), is_root=os.getuid() == 0, prog=PROG
    )
    own_allocation_shape(opts)
    alloc_opts = JobOptions(values=dict(opts.values), source=dict(opts.source))
    for dest in ("output", "error", "input", "open_mode"):
        alloc_opts.values.pop(dest, None)
    try:
        spec = build_job_spec(alloc_opts, ctx, batch=False)
    except SpecError as exc:
        raise CommandError(exc.message) from exc
    if not opts.has("job_name"):
        spec.name = os.path.basename(command[0])
    job = allocate(PROG, spec, quiet=opts.has("quiet"), immediate=immediate_seconds(opts, PROG))
    environ.update(job_environment(job))
    for name in OWN_ALLOCATION_UNSET:
        environ.pop(name, None)
    status = 1
    ended: dict[int, TaskExit] = {}
    try:
        job = wait_for_prologs(PROG, job)  # PrologFlags=Alloc: its nodes' Prologs first
        status = run_step(opts, environ, command, job, cli_given, own_allocation=True, ended=ended)
    finally:
        release(job.job_id, *allocation_exit(ended, status))
    return status


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return run_main(PROG, lambda: body(args))


if __name__ == "__main__":
    sys.exit(main())
