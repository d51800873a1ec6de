"""salloc: obtain an allocation, run a command (default: the user's shell) in it, release it.

`salloc: Granted job allocation N` once the job runs; the command sees the job's SLURM_* variables
(so srun inside it runs steps in the allocation); when the command exits the allocation ends with
its exit status. If the job ends first (scancel, time limit) the command is hung up.
Also the allocation half of srun outside an allocation (`allocate`, `job_environment`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping

from cli.common import CommandError, ctld, error, run_main, submit_failure
from cli.options import (
    HINT_HELP,
    OPTIONAL,
    SBATCH_OPTIONS,
    JobOptions,
    Opt,
    OptionError,
    SpecError,
    SubmitContext,
    build_job_spec,
    parse_argv,
    version_line,
)
from shoal.counts import compress_counts
from shoal.v1 import controller_pb2, jobs_pb2

PROG = "salloc"
POLL_S = 0.2
# 22.05's controller tries an allocation within its request and the commands say "queued" only when
# that fails; ctld starts it in the scheduling cycle the submission wakes, so the words wait for a
# job still pending this long (it waits for resources, not for that cycle on a loaded host)
ANNOUNCE_AFTER_S = 0.5
REVOKE_POLL_S = 2.0

SALLOC_ENV = {
    "SALLOC_ACCOUNT": "account",
    "SALLOC_REQ_SWITCH": "switches",
    "SALLOC_PARTITION": "partition",
    "SALLOC_QOS": "qos",
    "SALLOC_TIMELIMIT": "time",
    "SALLOC_GRES": "gres",
    "SALLOC_GPUS": "gpus",
    "SALLOC_EXCLUSIVE": "exclusive",
    "SALLOC_IMMEDIATE": "immediate",
    "SALLOC_HINT": "hint",
}

_SKIP = {
    "array",
    "wrap",
    "parsable",
    "test_only",
    "wait",
    "requeue",
    "no_requeue",
    "open_mode",
    "output",
    "error",
    "input",
    "signal",
    "kill_on_invalid_dep",
}
SALLOC_OPTIONS: tuple[Opt, ...] = tuple(o for o in SBATCH_OPTIONS if o.dest not in _SKIP) + (
    Opt("no_shell", ("no-shell",), arg=0),
    Opt("immediate", ("immediate",), "I", OPTIONAL),
)


def job_environment(job: jobs_pb2.JobInfo) -> dict[str, str]:
    """The SLURM_* variables salloc (and srun for its own allocation) give the command."""
    cpus = [a.cpus for a in job.allocation]
    tasks = [a.tasks or a.cpus for a in job.allocation]
    env = {
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOBID": str(job.job_id),
        "SLURM_JOB_NAME": job.spec.name,
        "SLURM_JOB_NODELIST": job.nodes,
        "SLURM_NODELIST": job.nodes,
        "SLURM_JOB_NUM_NODES": str(len(job.allocation)),
        "SLURM_NNODES": str(len(job.allocation)),
        "SLURM_JOB_CPUS_PER_NODE": compress_counts(cpus),
        "SLURM_TASKS_PER_NODE": compress_counts(tasks),
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_SUBMIT_DIR": job.spec.submit_dir,
        "SLURM_SUBMIT_HOST": job.spec.submit_host,
        "SLURM_CLUSTER_NAME": os.environ.get("SLURM_CLUSTER_NAME", ""),
    }
    if job.spec.num_tasks:
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(job.num_tasks or job.spec.num_tasks)
    if job.spec.ntasks_per_node:
        env["SLURM_NTASKS_PER_NODE"] = str(job.spec.ntasks_per_node)
    if job.spec.cpus_per_task:
        env["SLURM_CPUS_PER_TASK"] = str(job.spec.cpus_per_task)
    env["SLURM_NODE_ALIASES"] = "(null)"
    for name, value in (
        ("SLURM_GPUS", job.spec.gpus),
        ("SLURM_GPUS_PER_NODE", job.spec.gpus_per_node),
        ("SLURM_GPUS_PER_TASK", job.spec.gpus_per_task),
    ):
        if value:  # the --gpus* options as given (22.05: not for --gres)
            env[name] = value
    if not env["SLURM_CLUSTER_NAME"]:
        del env["SLURM_CLUSTER_NAME"]
    return env


def get_job(job_id: int) -> jobs_pb2.JobInfo | None:
    reply = ctld("GetJobs", controller_pb2.GetJobsRequest(job_ids=[job_id]), controller_pb2.GetJobsResponse)
    return next((j for j in reply.jobs if j.job_id == job_id), None)


class AllocationBusy(CommandError):
    """--immediate ran out before the job could start; the job was cancelled."""

    def __init__(self, job_id: int) -> None:
        super().__init__("Unable to allocate resources: Requested nodes are busy")
        self.job_id = job_id


def immediate_seconds(opts: JobOptions, prog: str) -> float | None:
    """-I/--immediate[=secs]: how long the allocation may wait (1 s when no value is given)."""
    if not opts.has("immediate"):
        return None
    value = opts.get("immediate") or "1"
    if not value.isdigit():
        raise CommandError(f"Invalid --immediate specification: {value}")
    return float(value)


def allocate(
    prog: str, spec: jobs_pb2.JobSpec, quiet: bool = False, immediate: float | None = None
) -> jobs_pb2.JobInfo:
    """Submit an interactive job and wait until it runs (Slurm's messages while it waits); with
    `immediate`, give up (cancelling the job) when it has not started within that many seconds."""
    # salloc's words differ from srun's (both as 22.05)
    failed = "Job submit/allocate failed" if prog == "salloc" else "Unable to allocate resources"
    try:
        reply = ctld(
            "SubmitJob", controller_pb2.SubmitJobRequest(spec=spec), controller_pb2.SubmitJobResponse
        )
    except CommandError as exc:
        raise CommandError(f"{failed}: {submit_failure(prog, exc.message, spec.partition)}") from exc
    job_id = reply.job_id
    if immediate is not None and immediate <= 1 and reply.pending_note:
        # -I alone: a job that cannot start as asked fails at once with the reason (22.05, scenario 116)
        release(job_id, 0, 0, cancel=True)
        if prog == "salloc":
            print(f"salloc: Job allocation {job_id} has been revoked.", file=sys.stderr)
        raise CommandError(f"{failed}: {reply.pending_note}")
    if reply.pending_note and not quiet:
        print(f"{prog}: {reply.pending_note}", file=sys.stderr)
    deadline = None if immediate is None else time.monotonic() + immediate
    # `--immediate` alone means "now": Slurm says nothing of queueing then
    announce = immediate is None or immediate > 1
    announced = False
    submitted = time.monotonic()
    previous = {sig: signal.signal(sig, _interrupted) for sig in _REVOKING}
    try:
        while True:
            job = get_job(job_id)
            if job is None:
                raise CommandError(f"Job allocation {job_id} has been revoked.")
            if job.state == jobs_pb2.RUNNING:
                if announced and not quiet:
                    print(f"{prog}: job {job_id} has been allocated resources", file=sys.stderr)
                return job
            if job.state != jobs_pb2.PENDING:
                raise CommandError(f"Job allocation {job_id} has been revoked.")
            if deadline is not None and time.monotonic() >= deadline:
                release(job_id, 0, 0, cancel=True)
                raise AllocationBusy(job_id)
            if announce and not announced and not quiet and time.monotonic() - submitted >= ANNOUNCE_AFTER_S:
                if prog == "salloc":
                    print(f"salloc: Pending job allocation {job_id}", file=sys.stderr)
                print(f"{prog}: job {job_id} queued and waiting for resources", file=sys.stderr)
                announced = True
            time.sleep(POLL_S)
    except _Interrupted:
        for sig in _REVOKING:
            signal.signal(sig, signal.SIG_IGN)  # the cancel below is not itself interrupted
        release(job_id, 0, 0, cancel=True)
        if prog == "salloc":  # 22.05's words, which differ between the two
            print(f"salloc: Job allocation {job_id} has been revoked.", file=sys.stderr)
            print("salloc: Job aborted due to signal", file=sys.stderr)
        else:
            print(f"{prog}: Job allocation {job_id} has been revoked", file=sys.stderr)
            print(f"{prog}: Force Terminated JobId={job_id}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_for_prologs(prog: str, job: jobs_pb2.JobInfo, announce: bool = False) -> jobs_pb2.JobInfo:
    """PrologFlags=Alloc: wait until every node of the allocation has run its Prolog (22.05's salloc
    says so when `announce`; srun waits without a word)."""
    if not job.prolog_pending:
        return job
    if announce:
        print(f"{prog}: Waiting for resource configuration", file=sys.stderr)
    while job.prolog_pending:
        time.sleep(POLL_S)
        current = get_job(job.job_id)
        if current is None or current.state != jobs_pb2.RUNNING:
            raise CommandError(f"Job allocation {job.job_id} has been revoked.")
        job = current
    if announce:
        print(f"{prog}: Nodes {job.nodes} are ready for job", file=sys.stderr)
    return job


class _Interrupted(Exception):
    """A signal came while the allocation was pending."""


# What a timeout, a killed shell or a batch system sends: each ends a pending allocation (the job
# is cancelled, never left PENDING), as Ctrl-C does.
_REVOKING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupted(signum: int, frame: object) -> None:
    raise _Interrupted


def release(job_id: int, exit_code: int, exit_signal: int, cancel: bool = False) -> None:
    """End the allocation (with the command's status); quiet if it has already ended."""
    try:
        if cancel:
            ctld(
                "SignalJobs",
                controller_pb2.SignalJobsRequest(job_ids=[str(job_id)]),
                controller_pb2.SignalJobsResponse,
            )
        else:
            ctld(
                "CompleteAllocation",
                controller_pb2.CompleteAllocationRequest(
                    job_id=job_id, exit_code=exit_code, exit_signal=exit_signal
                ),
                controller_pb2.CompleteAllocationResponse,
            )
    except CommandError:
        pass


def parse_options(
    prog: str, argv: list[str], table: tuple[Opt, ...], environ: Mapping[str, str], env_map: Mapping[str, str]
) -> tuple[JobOptions, list[str]]:
    parsed, rest = parse_argv(prog, argv, table, stop_at_positional=True)
    opts = JobOptions()
    opts.apply_env(environ, env_map)
    opts.apply(parsed, "cli")
    return opts, rest


def _run_command(command: list[str], env: dict[str, str], job_id: int) -> int:
    """Run the command in the foreground; hang it up if the allocation is revoked meanwhile."""
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        print(f"salloc: error: {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126
    previous: Callable[..., object] | int | None = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while True:
            try:
                return _status(child.wait(timeout=REVOKE_POLL_S))
            except subprocess.TimeoutExpired:
                pass
            job = get_job(job_id)
            if job is None or job.state != jobs_pb2.RUNNING:
                print(f"salloc: Job allocation {job_id} has been revoked.", file=sys.stderr)
                child.send_signal(signal.SIGHUP)
                try:
                    return _status(child.wait(timeout=5))
                except subprocess.TimeoutExpired:
                    child.kill()
                    return _status(child.wait())
    finally:
        signal.signal(signal.SIGINT, previous)


def _status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def body(argv: list[str]) -> int:
    environ = dict(os.environ)
    try:
        opts, command = parse_options(PROG, argv, SALLOC_OPTIONS, environ, SALLOC_ENV)
    except OptionError as exc:
        print("\n".join(exc.lines), file=sys.stderr)
        return 255  # 22.05: a command-line (or #SBATCH) option getopt refuses ends it with 255
    if (opts.get("hint") or "").strip().lower() == "help":
        sys.stdout.write(HINT_HELP)
        return 1  # 22.05 exits 1 after it
    if opts.has("help") or opts.has("usage"):
        usage = "Usage: salloc [OPTIONS(0)...] [ : [OPTIONS(N)...]] [command(0) [args(0)...]]"
        from cli.alloc_help import help_text

        sys.stdout.write(help_text(usage, SALLOC_OPTIONS) if opts.has("help") else usage + "\n")
        return 0
    if opts.has("version"):
        print(version_line())
        return 0
    if not command and not opts.has("no_shell"):
        command = [environ.get("SHELL") or "/bin/sh"]
    ctx = SubmitContext(
        cwd=os.getcwd(), environ=environ, now=int(time.time()), is_root=os.getuid() == 0, prog=PROG
    )
    try:
        spec = build_job_spec(opts, ctx, batch=False)
    except SpecError as exc:
        raise CommandError(exc.message) from exc
    if not opts.has("job_name"):
        spec.name = "interactive"  # as 22.05's salloc, whatever the command
    try:
        job = allocate(PROG, spec, quiet=opts.has("quiet"), immediate=immediate_seconds(opts, PROG))
    except AllocationBusy as exc:
        error(PROG, exc.message)
        print(f"salloc: Job allocation {exc.job_id} has been revoked.", file=sys.stderr)
        return 1
    print(f"salloc: Granted job allocation {job.job_id}", file=sys.stderr)
    if not job.prolog_nohold:  # NoHold: the command starts at once, its steps wait on the nodes
        job = wait_for_prologs(PROG, job, announce=not opts.has("quiet"))
    if not command:
        print(f"salloc: Allocation {job.job_id} held (--no-shell); release it with scancel", file=sys.stderr)
        return 0
    env = dict(environ)
    env.update(job_environment(job))
    code = _run_command(command, env, job.job_id)
    print(f"salloc: Relinquishing job allocation {job.job_id}", file=sys.stderr)
    release(job.job_id, code if code < 128 else 0, code - 128 if code > 128 else 0)
    return code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return run_main(PROG, lambda: body(args))


if __name__ == "__main__":
    sys.exit(main())
