"""sprio: the factors of each pending job's multifactor priority, as the scheduler computed them.

`sprio [-l] [-n] [-w] [-h] [-j ids] [-u users] [-o format]`; format specifiers as Slurm's (%i %r %u
%Y/%y %S %A/%a %B/%b %F/%f %J/%j %P/%p %Q/%q %N %T/%t, upper case weighted, lower case normalized).
"""

from __future__ import annotations

import getopt
import re
import sys
from collections.abc import Sequence

from cli.common import CommandError, ctld, run_main
from cli.options import OptionError, read_getopt
from shoal import version_line
from shoal.v1 import controller_pb2 as pb

PROG = "sprio"
DEFAULT = "%.15i %9r %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.20T"
LONG = "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T"
# -n: left-aligned normalized factors, and neither SITE nor NICE (as 22.05's sprio)
NORM_DEFAULT = "%.15i %9r %10y %10a %10b %10f %10j %10p %10q %20t"
NORM_LONG = "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t"
HEADERS = {
    "i": "JOBID",
    "r": "PARTITION",
    "u": "USER",
    "y": "PRIORITY",
    "s": "SITE",
    "a": "AGE",
    "b": "ASSOC",
    "f": "FAIRSHARE",
    "j": "JOBSIZE",
    "p": "PARTITION",
    "q": "QOS",
    "n": "NICE",
    "t": "TRES",
}
FACTOR_FIELDS = {"a": "age", "b": "assoc", "f": "fairshare", "j": "job_size", "p": "partition", "q": "qos"}
SPEC = re.compile(r"%(-?)(\.?)(\d*)([a-zA-Z])")
USAGE = "Usage: sprio [-j jid[s]] [-u user_name[s]] [-o format] [-p partitions] [--usage] [-hlnvVw]"


def _drop_unweighted(fmt: str, weights: pb.PriorityFactors) -> str:
    """The default formats show a factor's column only when its weight is set, as Slurm does."""
    for letter, name in FACTOR_FIELDS.items():
        if not getattr(weights, name):
            fmt = re.sub(rf" %\.?\d+[{letter}{letter.upper()}]", "", fmt)
    if not weights.tres:
        fmt = re.sub(r" %\.?\d+[tT]", "", fmt)
    return fmt


def _number(value: float, normalized: bool) -> str:
    return (
        f"{value:.7f}" if normalized else f"{value:.0f}"
    )  # rounded, as 22.05 prints it (0.1328 x 1000: 133)


def cell(letter: str, job: pb.JobPriority | None, weights: pb.PriorityFactors, normalized: bool) -> str:
    """One field of one row; `job` None is the -w weights row."""
    key = letter.lower()
    norm = normalized or letter.islower() and key not in ("i", "r", "u", "s", "n")
    if job is None:
        if key == "i":
            return "Weights"
        if key == "s":
            return "1"
        if key in FACTOR_FIELDS:
            return str(int(getattr(weights, FACTOR_FIELDS[key])))
        if key == "t":
            return ",".join(
                f"{t.split('=')[0].upper() if t.startswith(('cpu', 'mem', 'node')) else t.split('=')[0]}"
                f"={t.split('=')[1]}"
                for t in weights.tres
            )
        return ""
    factors = job.normalized if norm else job.weighted
    if key == "i":
        return str(job.job_id)
    if key == "r":
        return job.partition
    if key == "u":
        return job.user_name
    if key == "y":
        return f"{job.priority / 0xFFFFFFFF:.7f}" if norm else str(job.priority)
    if key == "s":
        return str(job.weighted.site)  # the value an operator set, as Slurm shows it (also under -n)
    if key in FACTOR_FIELDS:
        return _number(getattr(factors, FACTOR_FIELDS[key]), norm)
    if key == "n":
        return str(job.weighted.nice)
    if key == "t":
        return ",".join(factors.tres)
    return ""


def render(
    fmt: str,
    rows: Sequence[pb.JobPriority | None],
    weights: pb.PriorityFactors,
    normalized: bool,
    header: bool = True,
) -> list[str]:
    """The lines sprio prints for `rows` in format `fmt`."""
    parts = SPEC.split(fmt)
    specs: list[tuple[str, bool, int, str]] = []  # (literal before, right-aligned, width, letter)
    literal = parts[0]
    for i in range(1, len(parts), 5):
        left, dot, width, letter, after = parts[i : i + 5]
        specs.append((literal, bool(dot) and left != "-", int(width or 0), letter))
        literal = after
    tail = literal

    def line(values: list[str]) -> str:
        out = []
        for (lit, right, width, _), value in zip(specs, values, strict=True):
            if width:
                value = value[:width] if len(value) > width else value
                value = value.rjust(width) if right else value.ljust(width)
            out.append(lit + value)
        return "".join(out) + tail

    lines = [line([HEADERS.get(s[3].lower(), "") for s in specs])] if header else []
    lines += [line([cell(s[3], row, weights, normalized) for s in specs]) for row in rows]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(PROG, lambda: _run(list(sys.argv[1:] if argv is None else argv)))


SHORTS = "hlnwVj:u:o:p:"
LONGS = [
    "noheader",
    "long",
    "norm",
    "weights",
    "jobs=",
    "user=",
    "format=",
    "partition=",
    "usage",
    "help",
    "version",
]


def _run(args: list[str]) -> int:
    try:  # 22.05 refuses an option in getopt_long's words, then its hint; exit 1 (captured 2026-12-01)
        opts = read_getopt(PROG, args, SHORTS, LONGS)
    except OptionError as exc:
        sys.stderr.write("".join(line + "\n" for line in exc.lines))
        return exc.exit_code
    except getopt.GetoptError as exc:
        raise CommandError(f"{exc.msg}\n{USAGE}") from exc
    header, long, normalized, show_weights = True, False, False, False
    fmt: str | None = None
    jobs: set[int] = set()
    users: set[str] = set()
    parts: set[str] = set()
    if any(opt in ("-V", "--version") for opt, _ in opts):
        print(version_line())
        return 0
    for opt, val in opts:
        if opt in ("-h", "--noheader"):
            header = False
        elif opt in ("-l", "--long"):
            long = True
        elif opt in ("-n", "--norm"):
            normalized = True
        elif opt in ("-w", "--weights"):
            show_weights = True
        elif opt in ("-j", "--jobs"):
            try:
                jobs.update(int(v) for v in val.split(",") if v)
            except ValueError as exc:
                raise CommandError(f"Invalid job id: {val}") from exc
        elif opt in ("-u", "--user"):
            users.update(v for v in val.split(",") if v)
        elif opt in ("-p", "--partition"):
            parts.update(v for v in val.split(",") if v)
        elif opt in ("-o", "--format"):
            fmt = val
        elif opt in ("--usage", "--help"):
            print(USAGE)
            return 0
    resp = ctld("GetPriorities", pb.GetPrioritiesRequest(), pb.GetPrioritiesResponse)
    if not resp.multifactor:
        print(
            "You are not running a supported priority plugin\n(priority/basic).\n"
            "Only 'priority/multifactor' is supported.",
            file=sys.stderr,
        )
        return 1
    if fmt is None:
        if normalized:
            fmt = NORM_LONG if long else _drop_unweighted(NORM_DEFAULT, resp.weights)
        else:
            fmt = LONG if long else _drop_unweighted(DEFAULT, resp.weights)
    rows: list[pb.JobPriority | None]
    if show_weights:
        rows = [None]
    else:
        rows = [
            j
            for j in resp.jobs
            if (not jobs or j.job_id in jobs)
            and (not users or j.user_name in users)
            and (not parts or j.partition in parts)
        ]
        rows.sort(key=lambda j: (j.job_id, j.partition) if j else (0, ""))
        if jobs and not rows:
            print("Unable to find jobs matching user/id(s) specified", file=sys.stderr)
    for text in render(fmt, rows, resp.weights, normalized, header):
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
