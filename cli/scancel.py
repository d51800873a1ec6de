"""scancel: signal or cancel jobs by id and/or filters, with Slurm's messages and exit codes."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from cli.options import NO_ARG, Opt, OptionError, parse_argv, signal_number, version_line

PROG = "scancel"

OPTIONS: tuple[Opt, ...] = (
    Opt("account", ("account",), "A"),
    Opt("batch", ("batch",), "b", NO_ARG),
    Opt("full", ("full",), "f", NO_ARG),
    Opt("help", ("help",), "h", NO_ARG),
    Opt("hurry", ("hurry",), "H", NO_ARG),
    Opt("interactive", ("interactive",), "i", NO_ARG),
    Opt("me", ("me",), arg=NO_ARG),
    Opt("name", ("name", "jobname"), "n"),
    Opt("nodelist", ("nodelist",), "w"),
    Opt("partition", ("partition",), "p"),
    Opt("quiet", ("quiet",), "Q", NO_ARG),
    Opt("signal", ("signal",), "s"),
    Opt("state", ("state",), "t"),
    Opt("usage", ("usage",), arg=NO_ARG),
    Opt("user", ("user",), "u"),
    Opt("verbose", ("verbose",), "v", NO_ARG),
    Opt("version", ("version",), "V", NO_ARG),
)

USAGE = """\
Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name]
               [-p partition] [-Q] [-s signal | integer] [-t PENDING | RUNNING | SUSPENDED]
               [--usage] [-u user_name] [--me] [-V] [-v] [-w hosts...]
               [job_id[_array_id][.step_id]]
"""

HELP = """\
Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]...]

Cancel or signal jobs.

  -A, --account=account           only jobs charged to this account
  -b, --batch                     signal only the batch shell
  -f, --full                      signal the batch shell and every step
  -i, --interactive               (not supported)
  -n, --name=job_name, --jobname  only jobs with this name
  -p, --partition=partition       only jobs in this partition
  -Q, --quiet                     do not report errors for jobs that are gone
  -s, --signal=name | integer     send this signal instead of cancelling
  -t, --state=states              only jobs in these states (PENDING, RUNNING, SUSPENDED)
  -u, --user=user_name            only this user's jobs
      --me                        only my jobs
  -v, --verbose                   report each job signalled
  -V, --version                   print the version
  -w, --nodelist=hosts            only jobs using any of these nodes

  -h, --help                      this help
      --usage                     a short usage line
"""

NOT_NOW = "Job can not be altered now, try again later"  # a signal to a pending job
INVALID_JOB_ID = "Invalid job id specified"
ALREADY_DONE = "Job/step already completing or completed"
ACCESS_DENIED = "Access/permission denied"
EXIT_CODES = {ACCESS_DENIED: 210, NOT_NOW: 228}  # ESLURM_ACCESS_DENIED 2002, ESLURM_TRANSITION_STATE 2020
_JOB_ID = re.compile(r"\d+(_(\d+|\*|\[[0-9,\-%]+\]))?(\.(\d+|batch|extern))?")
_STATES = {"PENDING": "PENDING", "PD": "PENDING", "RUNNING": "RUNNING", "R": "RUNNING",
           "SUSPENDED": "SUSPENDED", "S": "SUSPENDED"}  # fmt: skip


class Failure(Exception):
    """Lines for stderr, then exit 1."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = lines


@dataclass
class Selection:
    """What the user asked for, as the request will carry it."""

    job_ids: list[str] = field(default_factory=list)
    signal: int = 0
    user_name: str = ""
    user_id: int = 0
    filter_user: bool = False
    name: str = ""
    states: list[str] = field(default_factory=list)
    partition: str = ""
    account: str = ""
    nodelist: str = ""
    batch: bool = False
    full: bool = False
    verbose: int = 0
    quiet: bool = False

    def has_filter(self) -> bool:
        return bool(self.job_ids or self.filter_user or self.name or self.states or self.partition
                    or self.account or self.nodelist)  # fmt: skip


def parse(argv: Sequence[str]) -> Selection | None:
    """Parse the command line; None when help/usage/version was printed."""
    found, rest = parse_argv(PROG, argv, OPTIONS, stop_at_positional=False)
    sel = Selection()
    for item in found:
        dest, value = item.opt.dest, item.value or ""
        if dest in ("help", "usage"):
            sys.stdout.write(HELP if dest == "help" else USAGE)
            return None
        if dest == "version":
            print(version_line())
            return None
        if dest == "signal":
            number = signal_number(value)
            if number is None:
                raise Failure(f"Unknown job signal: {value}")
            sel.signal = number
        elif dest == "user":
            sel.user_name, sel.user_id = _lookup_user(value)
            sel.filter_user = True
        elif dest == "me":
            sel.user_id = os.getuid()
            sel.user_name = _user_name(sel.user_id)
            sel.filter_user = True
        elif dest == "state":
            sel.states = _parse_states(value)
        elif dest == "interactive":
            raise Failure(f"{PROG}: error: --interactive is not supported")
        elif dest == "verbose":
            sel.verbose += 1
        elif dest in ("name", "partition", "account", "nodelist"):
            setattr(sel, dest, value)
        elif dest in ("batch", "full", "quiet"):
            setattr(sel, dest, True)
    for word in rest:
        for job_id in word.split(","):
            if not _JOB_ID.fullmatch(job_id):
                raise Failure(f"{PROG}: error: Invalid job id {job_id}")
            sel.job_ids.append(job_id)
    if not sel.has_filter():
        raise Failure(f"{PROG}: error: No job identification provided")
    return sel


def _lookup_user(text: str) -> tuple[str, int]:
    import pwd

    try:
        if text.isdigit():
            return pwd.getpwuid(int(text)).pw_name, int(text)
        return text, pwd.getpwnam(text).pw_uid
    except KeyError as exc:
        raise Failure(f"{PROG}: error: Invalid user name: {text}") from exc


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _parse_states(text: str) -> list[str]:
    states: list[str] = []
    for word in text.split(","):
        state = _STATES.get(word.strip().upper())
        if state is None:
            raise Failure(
                f"{PROG}: error: Invalid job state specified: {word}",
                f"{PROG}: error: Valid job states are PENDING, RUNNING, and SUSPENDED",
            )
        states.append(state)
    return states


def send(sel: Selection) -> int:
    """Send the request and report each failed job as Slurm does; the exit status."""
    from cli.common import CommandError, ctld
    from shoal.v1 import controller_pb2

    request = controller_pb2.SignalJobsRequest(
        job_ids=sel.job_ids,
        signal=sel.signal,
        user_name=sel.user_name,
        user_id=sel.user_id,
        filter_user=sel.filter_user,
        name=sel.name,
        states=sel.states,
        partition=sel.partition,
        account=sel.account,
        nodelist=sel.nodelist,
        batch_only=sel.batch,
        full=sel.full,
    )
    if sel.verbose:
        for job_id in sel.job_ids:
            print(f"{PROG}: {_verbose_line(sel, job_id)}", file=sys.stderr)
    try:
        resp = ctld("SignalJobs", request, controller_pb2.SignalJobsResponse)
    except CommandError as exc:
        if sel.job_ids:
            raise Failure(*(_kill_error(j, exc.message) for j in sel.job_ids)) from exc
        raise Failure(f"{PROG}: error: slurm_load_jobs error: {exc.message}") from exc
    lines, status = report(sel, [(r.job_id, r.message or INVALID_JOB_ID) for r in resp.results if r.code])
    for line in lines:
        print(line, file=sys.stderr)
    return status


def report(sel: Selection, failed: Sequence[tuple[str, str]]) -> tuple[list[str], int]:
    """The error lines and exit status for the refused jobs, as 22.05 (measured on the real one):
    killing a job that is gone or done is silent (said only with -v) and exits 0; another user's job
    exits 210 and a signal to a pending job 228 (the low byte of Slurm's error number); any other 1."""
    lines: list[str] = []
    status = 0
    for job_id, message in failed:
        gone = message in (INVALID_JOB_ID, ALREADY_DONE) and "." not in job_id and sel.signal in (0, 9)
        if gone:
            if sel.verbose and not sel.quiet:
                lines.append(_kill_error(job_id, message))
            continue
        status = EXIT_CODES.get(message, 1)
        if not sel.quiet:
            lines.append(_kill_error(job_id, message))
    return lines, status


def _verbose_line(sel: Selection, job_id: str) -> str:
    """What -v says before each request: "Signal 10 to batch job 12", "Terminating step 12.0" ..."""
    base, _, step = job_id.partition(".")
    if step:
        what = f"step {job_id}"
    elif sel.batch:
        what = f"batch job {base}"
    elif sel.full:
        what = f"full job {base}"
    else:
        what = f"job {base}"
    return f"Terminating {what}" if sel.signal == 0 else f"Signal {sel.signal} to {what}"


def _kill_error(job_id: str, message: str) -> str:
    what = "job step id" if "." in job_id else "job id"
    return f"{PROG}: error: Kill job error on {what} {job_id}: {message}"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        sel = parse(args)
        return 0 if sel is None else send(sel)
    except OptionError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return exc.exit_code
    except Failure as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
