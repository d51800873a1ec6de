"""sbatch: submit a batch script, with Slurm's options, directives, messages and exit codes.

Heavy imports (protobuf, the agent client) happen only once a job is really being submitted, so
`sbatch --help` and `--version` start in a few milliseconds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cli.options import (
    HINT_HELP,
    SBATCH_OPTIONS,
    HintHelp,
    JobOptions,
    OptionError,
    SpecError,
    SubmitContext,
    build_job_spec,
    parse_argv,
    parse_directives,
    version_line,
)

if TYPE_CHECKING:
    from shoal.v1 import controller_pb2, jobs_pb2

PROG = "sbatch"
WAIT_POLL_S = 1.0

USAGE = """\
Usage: sbatch [-N nnodes] [-n ntasks] [-c ncpus] [-p partition] [-t minutes]
              [-J jobname] [-o out] [-e err] [-D path] [-A account] [-q qos]
              [--mem=MB] [--gres=list] [--gpus=n] [--array=indexes] [-d dependency]
              [--export=names] [--wrap="command"] [--parsable] [-H] [-W]
              executable [args...]
"""

HELP = """\
Usage: sbatch [OPTIONS...] executable [args...]

Submit a batch script to shoal (Slurm 22.05 compatible).

Options:
  -a, --array=indexes         submit a job array (e.g. 0-15%4)
  -A, --account=name          charge the job to this account
  -b, --begin=time            start the job no earlier than this time
  -c, --cpus-per-task=ncpus   CPUs needed by each task
  -C, --constraint=list       required node features
      --comment=text          a comment kept with the job
      --contiguous            nodes must be contiguous
      --cpus-per-gpu=n        CPUs per allocated GPU
  -d, --dependency=spec       start after other jobs (afterok:id ...)
      --deadline=time         remove the job if it cannot end by then
  -D, --chdir=path            working directory of the script
  -e, --error=file            where the script's standard error goes
      --exclusive             do not share nodes with other jobs
      --export=names          environment passed to the job (ALL, NONE, A,B=c)
  -G, --gpus=[type:]n         GPUs for the whole job
      --gpus-per-node=[type:]n
      --gpus-per-task=[type:]n
      --gres=list             generic resources per node (gpu:h100:2)
  -H, --hold                  submit the job held
  -i, --input=file            the script's standard input
  -J, --job-name=name         name of the job
      --kill-on-invalid-dep=yes|no
  -L, --licenses=names        licenses the job needs
      --mail-type=types       BEGIN, END, FAIL, ALL ...
      --mail-user=user        who gets the mail
      --mem=size              memory per node (K/M/G/T; 0 = all of it)
      --mem-per-cpu=size      memory per CPU
      --mem-per-gpu=size      memory per GPU
  -n, --ntasks=n              number of tasks
  -N, --nodes=n[-m]           number of nodes
      --ntasks-per-node=n     tasks on each node
      --nice[=value]          lower the job's priority
      --no-requeue            never requeue the job
  -o, --output=file           where the script's standard output goes
  -O, --overcommit            allow more tasks than CPUs
      --open-mode=append|truncate
  -p, --partition=name        partition(s) to run in
      --parsable              print only the job id
  -q, --qos=name              quality of service
  -Q, --quiet                 print errors only
      --requeue               allow the job to be requeued
      --reservation=name      run inside a reservation
      --signal=[B:]sig[@secs] signal the job before its time limit
      --switches=n[@max-time] at most n leaf switches (wait up to max-time for them)
  -t, --time=limit            time limit (minutes, [D-]HH:MM:SS, UNLIMITED)
      --time-min=limit        smallest acceptable time limit
      --test-only             say when and where the job would start; submit nothing
  -v, --verbose               more messages
  -w, --nodelist=hosts        nodes to use (a hostlist, or a file when it has a '/')
  -W, --wait                  wait for the job to end; exit with its exit code
      --wckey=key             workload characterization key
      --wrap="command"        wrap a shell command in a script
  -x, --exclude=hosts         nodes not to use

Help:
  -h, --help                  this help
      --usage                 a short usage line
  -V, --version               print the version
"""

NOT_A_SCRIPT = [
    "This does not look like a batch script.  The first",
    "line must start with #! followed by the path to an interpreter.",
    "For instance: #!/bin/sh",
]


class Failure(Exception):
    """Error lines to print as `sbatch: error: ...`, then exit 1."""

    def __init__(self, *lines: str, level: str = "error") -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = lines
        self.level = level


def wrap_script(command: str) -> bytes:
    return f"#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{command}\n".encode()


def check_script(body: bytes) -> None:
    """Slurm's sanity checks on a batch script, in its order and words."""
    if not body:
        raise Failure("Batch script is empty!")
    if not body.strip():
        raise Failure("Batch script contains only whitespace!")
    if not body.startswith(b"#!"):
        raise Failure(*NOT_A_SCRIPT)
    if b"\0" in body:
        raise Failure("The Slurm controller does not allow scripts that", "contain a NULL character '\\0'.")
    if b"\r\n" in body:
        raise Failure(
            "Batch script contains DOS line breaks (\\r\\n)", "instead of expected UNIX line breaks (\\n)."
        )


def read_script(path: str | None, stdin: object) -> bytes:
    if path is None:
        buffer = getattr(stdin, "buffer", None)
        data = buffer.read() if buffer is not None else stdin.read().encode()  # type: ignore[attr-defined]
        return bytes(data)
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise Failure(f"Unable to open file {path}") from exc


def prepare(
    argv: Sequence[str], environ: Mapping[str, str], cwd: str, stdin: object, now: int
) -> tuple[JobOptions, jobs_pb2.JobSpec | None]:
    """Parse everything and build the JobSpec; (opts, None) when only help/usage/version ran."""
    first, rest = parse_argv(PROG, argv, SBATCH_OPTIONS)
    cli = JobOptions()
    cli.apply(first, "cli")
    for dest, text in (("help", HELP), ("usage", USAGE)):
        if cli.has(dest):
            sys.stdout.write(text)
            return cli, None
    if cli.has("version"):
        print(version_line())
        return cli, None

    wrap = cli.get("wrap") if cli.has("wrap") else None
    if wrap is not None and rest:
        raise Failure("Script arguments not permitted with --wrap option")
    script_path = rest[0] if rest else None
    if wrap is not None:
        body = wrap_script(wrap)
    else:
        body = read_script(script_path, stdin)
        check_script(body)

    opts = JobOptions()
    file = os.path.basename(script_path) if script_path else "stdin"
    opts.apply(parse_directives(PROG, body.decode("utf-8", "replace"), SBATCH_OPTIONS, file), "script")
    opts.apply_env(environ)
    opts.apply(first, "cli")
    if opts.has("quiet") and opts.verbose:
        raise Failure("don't specify both --verbose (-v) and --quiet (-Q)")
    ctx = SubmitContext(
        cwd=cwd,
        environ=environ,
        now=now,
        script=body,
        script_path=script_path or "",
        argv=list(rest[1:]),
        is_root=os.getuid() == 0,
    )
    return opts, build_job_spec(opts, ctx)


def submit(spec: jobs_pb2.JobSpec, test_only: bool) -> controller_pb2.SubmitJobResponse:
    from cli.common import CommandError, ctld, submit_failure
    from shoal.v1 import controller_pb2

    request = controller_pb2.SubmitJobRequest(spec=spec, test_only=test_only)
    try:
        return ctld("SubmitJob", request, controller_pb2.SubmitJobResponse)
    except CommandError as exc:
        raise Failure(
            f"Batch job submission failed: {submit_failure(PROG, exc.message, spec.partition)}"
        ) from exc


def test_only_line(resp: controller_pb2.SubmitJobResponse) -> str:
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(resp.test_start_time))
    return (
        f"{PROG}: Job {resp.job_id} to start at {start} using {resp.test_cpus} processors"
        f" on nodes {resp.test_nodes} in partition {resp.test_partition}"
    )


def wait_for(job_id: int, poll_s: float = WAIT_POLL_S) -> int:
    """Poll the controller until the job ends; its exit status (128+signal when killed)."""
    from cli.common import CommandError, ctld
    from shoal.states import FINISHED_STATES
    from shoal.v1 import controller_pb2

    while True:
        try:
            resp = ctld(
                "GetJobs", controller_pb2.GetJobsRequest(job_ids=[job_id]), controller_pb2.GetJobsResponse
            )
        except CommandError as exc:
            raise Failure(f"slurm_load_jobs error: {exc.message}") from exc
        jobs = [j for j in resp.jobs if j.job_id == job_id] or list(resp.jobs)
        if not jobs:
            return 0
        if all(j.state in FINISHED_STATES for j in jobs):
            worst = 0
            for job in jobs:
                code = 128 + job.exit_signal if job.exit_signal else job.exit_code
                worst = max(worst, code)
            return worst
        time.sleep(poll_s)


def run(argv: Sequence[str], environ: Mapping[str, str], cwd: str, stdin: object) -> int:
    opts, spec = prepare(argv, environ, cwd, stdin, int(time.time()))
    if spec is None:
        return 0
    resp = submit(spec, opts.has("test_only"))
    quiet = opts.has("quiet")
    if resp.user_message and not quiet:
        for line in resp.user_message.splitlines():
            print(f"{PROG}: {line}", file=sys.stderr)
    if opts.has("test_only"):
        print(test_only_line(resp), file=sys.stderr)
        return 0
    if opts.has("parsable"):
        print(resp.job_id)
    elif not quiet:
        print(f"Submitted batch job {resp.job_id}")
    sys.stdout.flush()
    if opts.has("wait"):
        return wait_for(resp.job_id)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return run(args, os.environ, os.getcwd(), sys.stdin)
    except OptionError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return 255  # 22.05: a command-line (or #SBATCH) option getopt refuses ends it with 255
    except SpecError as exc:
        print(f"{PROG}: {exc.level}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except HintHelp:
        sys.stdout.write(HINT_HELP)
        return 1  # 22.05 exits 1 after it
    except Failure as exc:
        for line in exc.lines:
            print(f"{PROG}: {exc.level}: {line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
