"""Option parsing shared by the commands that submit or allocate: sbatch, salloc and srun.

A small getopt_long work-alike gives Slurm's exact option errors; `JobOptions` collects values
from `#SBATCH` directives, then SBATCH_* variables, then the command line (each overriding the
last, as Slurm does); `build_job_spec` validates them with Slurm's messages and fills a JobSpec.
Only the standard library is imported at module level: `sbatch --help` must start fast.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from shoal.v1 import jobs_pb2

NO_ARG, REQUIRED, OPTIONAL = 0, 1, 2
NOT_GIVEN = -1
UNLIMITED = -2


def version_line() -> str:
    """What `-V/--version` prints for every shoal command (one line, shared with the daemons)."""
    from shoal import version_line as line

    return line()


class OptionError(Exception):
    """A command-line error printed verbatim (getopt's lines), then exit 1."""

    def __init__(self, lines: list[str], exit_code: int = 1) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.exit_code = exit_code


class SpecError(Exception):
    """A bad option value; printed as `<prog>: error: <message>` (or `fatal:`), exit 1 (or `exit_code`:
    22.05's sbatch exits 255 for some options, 1 for others)."""

    def __init__(self, message: str, level: str = "error", exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.level = level
        self.exit_code = exit_code


INT32_MAX = 2**31 - 1
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() and int() also take "１２" and "²"
_SIGNED = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Opt:
    """One option: where its value goes (dest), its names, and whether it takes a value."""

    dest: str
    longs: tuple[str, ...]
    short: str = ""
    arg: int = REQUIRED


@dataclass(frozen=True)
class Parsed:
    """One parsed occurrence: the option and its value (None for flags)."""

    opt: Opt
    value: str | None


def parse_argv(
    prog: str, argv: Sequence[str], table: Sequence[Opt], *, stop_at_positional: bool = True
) -> tuple[list[Parsed], list[str]]:
    """Parse like getopt_long (attached values, `--opt=v`, unique long prefixes, `--`).

    With stop_at_positional (sbatch's "+" mode) the first non-option ends option parsing, so
    everything after the script name belongs to the script. Returns (options, positionals).
    """
    by_long = {name: opt for opt in table for name in opt.longs}
    by_short = {opt.short: opt for opt in table if opt.short}
    found: list[Parsed] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            opt = _match_long(prog, name, arg, by_long)
            if opt.arg == NO_ARG:
                if eq:
                    raise _usage_error(prog, f"{prog}: option '--{opt.longs[0]}' doesn't allow an argument")
                found.append(Parsed(opt, None))
            elif eq:
                found.append(Parsed(opt, value))
            elif opt.arg == OPTIONAL:
                found.append(Parsed(opt, None))
            elif i < len(argv):
                found.append(Parsed(opt, argv[i]))
                i += 1
            else:
                raise _usage_error(prog, f"{prog}: option '--{opt.longs[0]}' requires an argument")
        elif arg.startswith("-") and arg != "-":
            j = 1
            while j < len(arg):
                letter = arg[j]
                j += 1
                sopt = by_short.get(letter)
                if sopt is None:
                    raise _usage_error(prog, f"{prog}: invalid option -- '{letter}'")
                if sopt.arg == NO_ARG:
                    found.append(Parsed(sopt, None))
                    continue
                if j < len(arg):
                    found.append(Parsed(sopt, arg[j:]))
                elif sopt.arg == OPTIONAL:
                    found.append(Parsed(sopt, None))
                elif i < len(argv):
                    found.append(Parsed(sopt, argv[i]))
                    i += 1
                else:
                    raise _usage_error(prog, f"{prog}: option requires an argument -- '{letter}'")
                break
        else:
            rest.append(arg)
            if stop_at_positional:
                rest.extend(argv[i:])
                break
    return found, rest


def _match_long(prog: str, name: str, arg: str, by_long: Mapping[str, Opt]) -> Opt:
    if name in by_long:
        return by_long[name]
    candidates = sorted({n for n in by_long if n.startswith(name)}) if name else []
    distinct = {by_long[n] for n in candidates}
    if len(distinct) == 1:
        return distinct.pop()
    if candidates:
        shown = " ".join(f"'--{n}'" for n in candidates)
        raise _usage_error(
            prog, f"{prog}: option '{arg.partition('=')[0]}' is ambiguous; possibilities: {shown}"
        )
    raise _usage_error(prog, f"{prog}: unrecognized option '{arg}'")


def _usage_error(prog: str, line: str) -> OptionError:
    return OptionError([line, f'Try "{prog} --help" for more information'])


def refuse_as_getopt(prog: str, parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """Read `argv` with the getopt_long work-alike over `parser`'s options before argparse does, so an
    unknown option or a missing value is refused in 22.05's words (`sinfo: invalid option -- 'Z'`),
    not argparse's. Raises OptionError. Returns what getopt accepted for argparse to read: each value
    attached to its option (`--sort=-t`), since getopt takes the word after -S as its value even when
    it starts with a dash (`sinfo -S -N`, `squeue -S -t`), where argparse would refuse it; the operands
    after the options."""
    table = []
    for action in parser._actions:
        shorts = [s[1] for s in action.option_strings if len(s) == 2 and s[0] == "-" and s[1] != "-"]
        longs = tuple(s[2:] for s in action.option_strings if s.startswith("--"))
        takes = NO_ARG if action.nargs == 0 else OPTIONAL if action.nargs == "?" else REQUIRED
        table += [Opt(action.dest, longs, short, takes) for short in shorts or [""]]
    found, rest = parse_argv(prog, argv, table, stop_at_positional=False)
    words = []
    for item in found:
        name = f"--{item.opt.longs[0]}" if item.opt.longs else f"-{item.opt.short}"
        words.append(
            name if item.value is None else f"{name}={item.value}" if item.opt.longs else name + item.value
        )
    return [*words, *(["--", *rest] if rest else [])]


def getopt_table(shorts: str, longs: Sequence[str]) -> tuple[Opt, ...]:
    """The table parse_argv reads for a getopt-module spec ("ab:", ["all", "user="]), so a command that
    parses with the getopt module can refuse options in getopt_long's words first."""
    table = [
        Opt(letter, (), letter, REQUIRED if shorts[i + 1 : i + 2] == ":" else NO_ARG)
        for i, letter in enumerate(shorts)
        if letter != ":"
    ]
    table += [
        Opt(name, (name.rstrip("="),), "", REQUIRED if name.endswith("=") else NO_ARG) for name in longs
    ]
    return tuple(table)


def read_getopt(prog: str, args: Sequence[str], shorts: str, longs: Sequence[str]) -> list[tuple[str, str]]:
    """The getopt module's options of `args` (gnu_getopt), after refusing in getopt_long's words
    (OptionError: `sprio: invalid option -- 'Z'` and the hint, as 22.05) what getopt_long refuses."""
    import getopt

    parse_argv(prog, args, getopt_table(shorts, longs), stop_at_positional=False)
    opts, _ = getopt.gnu_getopt(list(args), shorts, list(longs))
    return opts


HINT_HELP = """Application hint options:
    --hint=             Bind tasks according to application hints
        compute_bound   use all cores in each socket
        memory_bound    use only one core in each socket
        [no]multithread [don't] use extra threads with in-core multi-threading
        help            show this help message
"""


class HintHelp(Exception):
    """--hint=help: print HINT_HELP and exit 1, as 22.05's sbatch, salloc and srun do."""


def parse_hint(value: str) -> str:
    """--hint's value (22.05: nomultithread and compute_bound mean one thread per core); memory_bound,
    one core of each socket, is refused: shoal does not lay tasks out by socket."""
    word = value.strip().lower()
    if word == "help":
        raise HintHelp()
    if word == "memory_bound":
        raise SpecError("--hint=memory_bound is not supported by shoal")
    if word not in ("nomultithread", "multithread", "compute_bound"):
        raise SpecError(f'unrecognized --hint argument "{value}", see --hint=help')
    return word


# --- sbatch's options ------------------------------------------------------------------------

SBATCH_OPTIONS: tuple[Opt, ...] = (
    Opt("array", ("array",), "a"),
    Opt("account", ("account",), "A"),
    Opt("begin", ("begin",), "b"),
    Opt("constraint", ("constraint",), "C"),
    Opt("contiguous", ("contiguous",), arg=NO_ARG),
    Opt("acctg_freq", ("acctg-freq",)),
    Opt("cpu_freq", ("cpu-freq",)),
    Opt("cpus_per_gpu", ("cpus-per-gpu",)),
    Opt("cpus_per_task", ("cpus-per-task",), "c"),
    Opt("comment", ("comment",)),
    Opt("deadline", ("deadline",)),
    Opt("distribution", ("distribution",), "m"),
    Opt("dependency", ("dependency",), "d"),
    Opt("chdir", ("chdir",), "D"),
    Opt("error", ("error",), "e"),
    Opt("exclude", ("exclude",), "x"),
    Opt("exclusive", ("exclusive",), arg=OPTIONAL),
    Opt("export", ("export",)),
    Opt("get_user_env", ("get-user-env",), arg=OPTIONAL),
    Opt("gid", ("gid",)),
    Opt("gpus", ("gpus",), "G"),
    Opt("gpu_freq", ("gpu-freq",)),
    Opt("gpu_bind", ("gpu-bind",)),
    Opt("gpus_per_node", ("gpus-per-node",)),
    Opt("gpus_per_socket", ("gpus-per-socket",)),
    Opt("gpus_per_task", ("gpus-per-task",)),
    Opt("gres", ("gres",)),
    Opt("help", ("help",), "h", NO_ARG),
    Opt("hint", ("hint",)),
    Opt("hold", ("hold",), "H", NO_ARG),
    Opt("input", ("input",), "i"),
    Opt("job_name", ("job-name",), "J"),
    Opt("kill_on_invalid_dep", ("kill-on-invalid-dep",)),
    Opt("licenses", ("licenses",), "L"),
    Opt("mail_type", ("mail-type",)),
    Opt("mail_user", ("mail-user",)),
    Opt("mem", ("mem",)),
    Opt("mem_per_cpu", ("mem-per-cpu",)),
    Opt("mem_per_gpu", ("mem-per-gpu",)),
    Opt("mem_bind", ("mem-bind",)),
    Opt("nodes", ("nodes",), "N"),
    Opt("ntasks", ("ntasks",), "n"),
    Opt("ntasks_per_node", ("ntasks-per-node",)),
    Opt("nice", ("nice",), arg=OPTIONAL),
    Opt("no_kill", ("no-kill",), "k", OPTIONAL),
    Opt("no_requeue", ("no-requeue",), arg=NO_ARG),
    Opt("nodelist", ("nodelist",), "w"),
    Opt("open_mode", ("open-mode",)),
    Opt("output", ("output",), "o"),
    Opt("overcommit", ("overcommit",), "O", NO_ARG),
    Opt("oversubscribe", ("oversubscribe",), "s", NO_ARG),
    Opt("parsable", ("parsable",), arg=NO_ARG),
    Opt("partition", ("partition",), "p"),
    Opt("profile", ("profile",)),
    Opt("propagate", ("propagate",), arg=OPTIONAL),
    Opt("qos", ("qos",), "q"),
    Opt("quiet", ("quiet",), "Q", NO_ARG),
    Opt("requeue", ("requeue",), arg=NO_ARG),
    Opt("reservation", ("reservation",)),
    Opt("signal", ("signal",)),
    Opt("switches", ("switches",)),
    Opt("test_only", ("test-only",), arg=NO_ARG),
    Opt("threads_per_core", ("threads-per-core",)),
    Opt("time", ("time",), "t"),
    Opt("time_min", ("time-min",)),
    Opt("uid", ("uid",)),
    Opt("usage", ("usage",), arg=NO_ARG),
    Opt("verbose", ("verbose",), "v", NO_ARG),
    Opt("version", ("version",), "V", NO_ARG),
    Opt("wait", ("wait",), "W", NO_ARG),
    Opt("wckey", ("wckey",)),
    Opt("wrap", ("wrap",)),
)

# Input environment variables (Slurm: they override directives, the command line overrides them).
SBATCH_ENV: dict[str, str] = {
    "SBATCH_ACCOUNT": "account",
    "SBATCH_ARRAY_INX": "array",
    "SBATCH_CONSTRAINT": "constraint",
    "SBATCH_CPUS_PER_GPU": "cpus_per_gpu",
    "SBATCH_EXCLUSIVE": "exclusive",
    "SBATCH_EXPORT": "export",
    "SBATCH_GET_USER_ENV": "get_user_env",
    "SBATCH_GPUS": "gpus",
    "SBATCH_GPU_BIND": "gpu_bind",
    "SBATCH_GPUS_PER_NODE": "gpus_per_node",
    "SBATCH_GPUS_PER_SOCKET": "gpus_per_socket",
    "SBATCH_GPUS_PER_TASK": "gpus_per_task",
    "SBATCH_GRES": "gres",
    "SBATCH_JOB_NAME": "job_name",
    "SBATCH_MEM_PER_CPU": "mem_per_cpu",
    "SBATCH_MEM_PER_GPU": "mem_per_gpu",
    "SBATCH_MEM_PER_NODE": "mem",
    "SBATCH_NO_KILL": "no_kill",
    "SBATCH_NO_REQUEUE": "no_requeue",
    "SBATCH_OPEN_MODE": "open_mode",
    "SBATCH_OVERCOMMIT": "overcommit",
    "SBATCH_PARTITION": "partition",
    "SBATCH_QOS": "qos",
    "SBATCH_REQUEUE": "requeue",
    "SBATCH_REQ_SWITCH": "switches",
    "SBATCH_RESERVATION": "reservation",
    "SBATCH_SIGNAL": "signal",
    "SBATCH_THREADS_PER_CORE": "threads_per_core",
    "SBATCH_HINT": "hint",
    "SBATCH_TIMELIMIT": "time",
    "SBATCH_WAIT": "wait",
    "SBATCH_WCKEY": "wckey",
}

MEMORY_DESTS = ("mem", "mem_per_cpu", "mem_per_gpu")


@dataclass
class JobOptions:
    """Option values by dest, plus where each came from ("script", "env" or "cli")."""

    values: dict[str, str | None] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)
    verbose: int = 0

    def set(self, dest: str, value: str | None, source: str) -> None:
        if dest == "verbose":
            self.verbose += 1
            return
        # --requeue and --no-requeue are one setting: the last one given wins.
        if dest in ("requeue", "no_requeue"):
            other = "no_requeue" if dest == "requeue" else "requeue"
            self.values.pop(other, None)
            self.source.pop(other, None)
        self.values[dest] = value
        self.source[dest] = source

    def has(self, dest: str) -> bool:
        return dest in self.values

    def get(self, dest: str) -> str | None:
        return self.values.get(dest)

    def apply(self, parsed: Iterable[Parsed], source: str) -> None:
        for p in parsed:
            self.set(p.opt.dest, p.value, source)

    def apply_env(self, environ: Mapping[str, str], mapping: Mapping[str, str] = SBATCH_ENV) -> None:
        for var, dest in mapping.items():
            if var in environ:
                self.set(dest, environ[var], "env")


# --- #SBATCH directives ----------------------------------------------------------------------


def directive_words(script: str, file: str = "stdin", magic: str = "#SBATCH") -> list[str]:
    """The option words of a script's `#SBATCH` lines, in order.

    Lines must start exactly with the magic word; scanning stops at the first line that is not
    blank and not a comment (Slurm ignores directives after the first command).
    """
    words: list[str] = []
    for lineno, line in enumerate(script.split("\n"), start=1):
        if line.startswith(magic):
            words.extend(_split_directive(line[len(magic) :], file, lineno, line))
            continue
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
    return words


def _split_directive(text: str, file: str, lineno: int, line: str) -> list[str]:
    """Split like a shell word list: quotes group, backslash escapes, an unquoted # ends the line."""
    words: list[str] = []
    current: list[str] = []
    in_word = False
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        i += 1
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and i < len(text):
                current.append(text[i])
                i += 1
            else:
                current.append(ch)
            continue
        if ch == "\\" and i < len(text):
            current.append(text[i])
            in_word = True
            i += 1
        elif ch in "\"'":
            quote = ch
            in_word = True
        elif ch == "#":
            break
        elif ch.isspace():
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
        else:
            current.append(ch)
            in_word = True
    if quote:
        raise SpecError(f"{file}: line {lineno}: Unmatched `{quote}` in [{line}]", level="fatal")
    if in_word:
        words.append("".join(current))
    return words


def parse_directives(prog: str, script: str, table: Sequence[Opt], file: str = "stdin") -> list[Parsed]:
    """Parse a script's directives; a stray word is Slurm's 'Invalid directive' error."""
    parsed, rest = parse_argv(prog, directive_words(script, file), table, stop_at_positional=False)
    if rest:
        raise SpecError(f"Invalid directive found in batch script: {rest[0]}")
    return parsed


# --- value checks ----------------------------------------------------------------------------


def _bounded(digits: str) -> int:
    """ASCII digits as a number, any length: one beyond 10**18 reads as 10**18 (never 5000 digits)."""
    significant = digits.lstrip("0")
    if not significant:
        return 0
    return int(significant) if len(significant) < 19 else 10**18


def parse_count(text: str, name: str) -> int:
    """A non-negative integer option value, or Slurm's 'Invalid numeric value' error."""
    value = text.strip()
    if not _DIGITS.fullmatch(value) or len(value.lstrip("0")) > 10 or int(value) > INT32_MAX:
        raise SpecError(f'Invalid numeric value "{text}" for {name}.')
    return int(value)


def parse_positive(text: str, name: str) -> int:
    """A count that must be at least 1 (-n, -c): 0 is refused as Slurm does, never read as "not given"."""
    value = parse_count(text, name)
    if value == 0:
        raise SpecError(f'Invalid numeric value "{text}" for {name}.')
    return value


def parse_node_range(text: str) -> tuple[int, int]:
    """`-N 2` or `-N 2-4` -> (min, max); max 0 means not given. 22.05's words and exit code 255."""
    low_text, sep, high_text = text.strip().partition("-")
    low = _node_count(low_text.strip(), text)
    high = _node_count(high_text.strip(), text) if sep else 0
    if high and high < low:
        raise SpecError(f"Maximum node count {high} is less than minimum node count {low}", exit_code=255)
    return low, high


def _node_count(word: str, text: str) -> int:
    if not _DIGITS.fullmatch(word) or len(word.lstrip("0")) > 10 or int(word) > INT32_MAX:
        raise SpecError(f'"{word or text}" is not a valid node count', exit_code=255)
    return int(word)


def parse_minutes(text: str, option: str) -> int:
    """A time limit in minutes (UNLIMITED = -2), or `Invalid --time specification`."""
    from shoal.timefmt import parse_time_limit

    try:
        minutes = int(parse_time_limit(text))
    except ValueError as exc:
        raise SpecError(f"Invalid {option} specification", exit_code=255) from exc
    return minutes if minutes < 2**62 else UNLIMITED  # 22.05 saturates a 40-digit limit to UNLIMITED


def parse_switches(text: str) -> tuple[int, int]:
    """--switches=N[@max-time] -> (N, seconds to wait; -1 = SchedulerParameters max_switch_wait).

    As Slurm 22.05: N must be a positive number; a max-time it cannot read is ignored.
    """
    count, _, wait = text.partition("@")
    significant = count.lstrip("0")
    if not _DIGITS.fullmatch(count) or not significant:
        raise SpecError(f'Invalid numeric value "{count}" for --switches.')
    if len(significant) > 19 or int(significant) > 2**63 - 1:  # 22.05 reads it as a long, saturated
        raise SpecError(f"Numeric argument ({2**63 - 1}) to big for --switches.")
    from shoal.timefmt import parse_time_seconds

    try:
        seconds = parse_time_seconds(wait) if wait else -1
    except ValueError:
        seconds = -1
    return min(int(significant), INT32_MAX), min(max(seconds, -1), INT32_MAX)


def parse_mb(text: str, option: str) -> int:
    """A memory size in megabytes (suffixes K/M/G/T), or `Invalid --mem specification`."""
    from shoal.sizefmt import parse_size_mb

    try:
        value = int(parse_size_mb(text))
    except ValueError as exc:
        raise SpecError(f"Invalid {option} specification", exit_code=255) from exc
    if not 0 <= value < 2**63:
        raise SpecError(f"Invalid {option} specification", exit_code=255)
    return value


def parse_when(text: str, option: str, now: int) -> int:
    """A --begin/--deadline time as unix seconds, or `Invalid --begin specification`."""
    from shoal.timefmt import parse_datetime

    try:
        when = int(parse_datetime(text, now))
    except (ValueError, OverflowError) as exc:
        raise SpecError(f"Invalid {option} specification", exit_code=255) from exc
    if not 0 <= when <= 253402300799:  # beyond year 9999 nothing can print it
        raise SpecError(f"Invalid {option} specification", exit_code=255)
    return when


def check_array(text: str) -> str:
    """Validate `--array` syntax ("0-15%4", "1,3,5-9:2") without expanding it; the controller applies
    MaxArraySize (22.05's sbatch leaves that to slurmctld too)."""
    from shoal.arrayspec import INVALID
    from shoal.arrayspec import check_array as check_syntax

    try:
        check_syntax(text)
    except ValueError as exc:
        raise SpecError(INVALID) from exc
    return text


_DEP_TYPES = ("after", "afterany", "afterburstbuffer", "aftercorr", "afternotok", "afterok")
_DEP_JOB = re.compile(r"\d+(_(\d+|\*))?(\+\d+)?")


def check_dependency(text: str) -> str:
    """Validate `--dependency` syntax: type:job[:job...] joined by ',' (all) or '?' (any)."""
    parts = re.split(r"[,?]", text) if text else [""]
    for part in parts:
        if part in ("singleton", "expand") or part.startswith("expand:"):
            continue
        kind, sep, jobs = part.partition(":")
        if kind not in _DEP_TYPES or not sep or not all(_DEP_JOB.fullmatch(j) for j in jobs.split(":")):
            raise SpecError("Batch job submission failed: Job dependency problem")
    return text


MAX_SIGNAL_NUMBER = 0x7FFFFFFF  # what the request carries (int32)
_SIGNAL_RE = re.compile(r"(?:([RB]{1,2}):)?([A-Za-z0-9]+)(?:@([0-9]*))?")


def parse_signal(text: str) -> tuple[int, int, bool]:
    """`--signal=[{R|B}:]SIG[@secs]` -> (number, seconds before the end, batch shell only)."""
    m = _SIGNAL_RE.fullmatch(text.strip())
    word = m.group(2) if m else ""
    number = (_bounded(word) if word.isdigit() else signal_number(word)) if m else None
    secs = _bounded(m.group(3)) if m and m.group(3) else 60
    # as 22.05: any positive number (sbatch -s 9999 is taken), "SIG@" (the default time), @time in 16 bits
    if m is None or number is None or not 0 < number <= MAX_SIGNAL_NUMBER or secs > 0xFFFF:
        raise SpecError("Invalid --signal specification", exit_code=255)
    return number, secs, "B" in (m.group(1) or "")


def signal_number(text: str) -> int | None:
    """'USR1', 'SIGUSR1', 'usr1' or '10' -> 10; None when it names no signal."""
    import signal as _signal

    word = text.strip()
    if _DIGITS.fullmatch(word):
        value = _bounded(word)
        return value if 0 <= value < 65 else None
    if not word.isascii():
        return None
    name = word.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return int(_signal.Signals[name])
    except KeyError:
        return None


_MAIL_TYPES = frozenset(
    {
        "NONE",
        "BEGIN",
        "END",
        "FAIL",
        "REQUEUE",
        "ALL",
        "INVALID_DEPEND",
        "STAGE_OUT",
        "TIME_LIMIT",
        "TIME_LIMIT_90",
        "TIME_LIMIT_80",
        "TIME_LIMIT_50",
        "ARRAY_TASKS",
    }
)


def check_mail_type(text: str) -> str:
    words = [w.strip().upper() for w in text.split(",")]
    if not all(w in _MAIL_TYPES for w in words):
        raise SpecError(f"--mail-type={text} invalid")
    return ",".join(words)


def read_nodelist(text: str, cwd: str) -> str:
    """`-w` value: a hostlist, or (when it contains '/') a file of host names."""
    from shoal.hostlist import HostlistError, collect, expand

    if "/" in text:
        path = text if os.path.isabs(text) else os.path.join(cwd, text)
        try:
            with open(path, encoding="utf-8") as fh:
                names = [n for n in re.split(r"[\s,]+", fh.read()) if n]
        except OSError as exc:
            raise SpecError(f"Unable to open file {text}") from exc
        return ",".join(names)
    try:
        return collect(expand(text)) if text else text
    except HostlistError as exc:
        raise SpecError(f"Invalid node name specified: {text}") from exc


def export_environment(spec: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The job's starting environment for `--export` as Slurm 22.05 defines it.

    ALL (default): the whole environment; NONE: only SLURM_* variables; a list without ALL:
    SLURM_* plus the named variables (NAME copies the current value, NAME=value sets one).
    Explicit NAME=value pairs always win.
    """
    text = (spec or "ALL").strip()
    items = [i for i in text.split(",") if i]
    head = items[0].upper() if items else "ALL"
    base_all = head == "ALL"
    if head in ("ALL", "NONE"):
        items = items[1:]
    env = dict(environ) if base_all else {k: v for k, v in environ.items() if k.startswith("SLURM_")}
    for item in items:
        name, eq, value = item.partition("=")
        if eq:
            env[name] = value
        elif name in environ:
            env[name] = environ[name]
    return env


def rlimit_environment(opts: JobOptions, prog: str) -> dict[str, str]:
    """SLURM_RLIMIT_* for this process's soft limits (the caller's: cli.runner takes them on), which
    the node sets for the job; --propagate[=names] sends only those it names, asked for."""
    from shoal import rlimits

    asked = (opts.get("propagate") or "") if opts.has("propagate") else None
    try:
        return rlimits.submit_environment(asked)
    except rlimits.PropagateError as exc:
        raise SpecError(f"{exc}\n{prog}: error: --propagate={asked} is not valid.") from None


# --- building the JobSpec --------------------------------------------------------------------


@dataclass
class SubmitContext:
    """What the job is built from besides options: where, who, the script, the environment."""

    cwd: str
    environ: Mapping[str, str]
    now: int
    script: bytes = b""
    script_path: str = ""  # as given on the command line; "" for stdin/--wrap
    argv: list[str] = field(default_factory=list)
    is_root: bool = False
    prog: str = "sbatch"  # the command, for a message of two lines


def resolve_memory(opts: JobOptions) -> None:
    """--mem, --mem-per-cpu and --mem-per-gpu exclude each other on the command line; one given
    there replaces any other from the script or the environment (as Slurm does)."""
    on_cli = [d for d in MEMORY_DESTS if opts.source.get(d) == "cli"]
    if len(on_cli) > 1:
        raise SpecError("--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.", level="fatal")
    if on_cli:
        for dest in MEMORY_DESTS:
            if dest != on_cli[0]:
                opts.values.pop(dest, None)
                opts.source.pop(dest, None)


def check_gpu_bind(text: str) -> None:
    """--gpu-bind must be readable at submit (the node applies it per task)."""
    from shoal.gpubind import GpuBindError, parse_gpu_bind

    try:
        parse_gpu_bind(text)
    except GpuBindError as exc:
        raise SpecError(str(exc), level="fatal") from exc


def build_job_spec(opts: JobOptions, ctx: SubmitContext, *, batch: bool = True) -> jobs_pb2.JobSpec:
    """Validate every option (Slurm's messages, SpecError) and fill a JobSpec."""
    import socket

    from shoal.v1 import jobs_pb2

    resolve_memory(opts)
    spec = jobs_pb2.JobSpec()
    spec.batch = batch
    spec.time_limit_min = NOT_GIVEN
    spec.time_min_min = NOT_GIVEN
    spec.requeue = -1
    spec.submit_dir = ctx.cwd
    spec.submit_host = socket.gethostname().split(".")[0]
    spec.script = ctx.script
    spec.argv.extend(ctx.argv)
    if ctx.script_path:
        spec.command = os.path.normpath(os.path.join(ctx.cwd, ctx.script_path))

    v = opts.get
    chdir = v("chdir")
    spec.work_dir = os.path.normpath(os.path.join(ctx.cwd, chdir)) if chdir else ctx.cwd

    for uid_opt in ("uid", "gid"):
        if opts.has(uid_opt):
            if not ctx.is_root:
                raise SpecError(f"--{uid_opt} only permitted by root user")
            raise SpecError(f"--{uid_opt} is not supported by shoal")

    name = v("job_name")
    if name is None:
        if opts.has("wrap"):
            name = "wrap"
        elif ctx.script_path:
            name = os.path.basename(ctx.script_path)
        else:
            name = "sbatch"
    spec.name = name

    if opts.has("nodes"):
        spec.min_nodes, spec.max_nodes = parse_node_range(v("nodes") or "")
    if opts.has("ntasks"):
        spec.num_tasks = parse_positive(v("ntasks") or "", "--ntasks")
    if opts.has("ntasks_per_node"):
        spec.ntasks_per_node = parse_count(v("ntasks_per_node") or "", "--ntasks-per-node")
    if opts.has("cpus_per_task"):
        spec.cpus_per_task = parse_positive(v("cpus_per_task") or "", "--cpus-per-task")
    if opts.has("threads_per_core"):
        spec.threads_per_core = parse_count(v("threads_per_core") or "", "--threads-per-core")
    spec.oversubscribe = opts.has("oversubscribe")
    if opts.has("hint"):
        spec.hint = parse_hint(v("hint") or "")
        if spec.hint != "multithread" and not opts.has("threads_per_core"):
            spec.threads_per_core = 1  # as 22.05: one thread of each core (ReqB:S:C:T=0:0:*:1)
    if opts.has("mem"):
        spec.mem_per_node_mb = parse_mb(v("mem") or "", "--mem")
        spec.mem_whole_node = spec.mem_per_node_mb == 0
    if opts.has("mem_per_cpu"):
        spec.mem_per_cpu_mb = parse_mb(v("mem_per_cpu") or "", "--mem-per-cpu")
    if opts.has("mem_per_gpu"):
        spec.mem_per_gpu_mb = parse_mb(v("mem_per_gpu") or "", "--mem-per-gpu")
    if opts.has("cpus_per_gpu"):
        spec.cpus_per_gpu = parse_count(v("cpus_per_gpu") or "", "--cpus-per-gpu")
    if opts.has("time"):
        spec.time_limit_min = parse_minutes(v("time") or "", "--time")
    if opts.has("time_min"):
        spec.time_min_min = parse_minutes(v("time_min") or "", "--time-min")
    if opts.has("begin"):
        spec.begin_time = parse_when(v("begin") or "", "--begin", ctx.now)
    if opts.has("deadline"):
        parse_when(v("deadline") or "", "--deadline", ctx.now)
        spec.deadline = v("deadline") or ""
    if opts.has("gpu_bind"):
        check_gpu_bind(v("gpu_bind") or "")
    if opts.has("switches"):
        spec.switches, spec.switch_wait_s = parse_switches(v("switches") or "")

    for dest, attr in (
        ("partition", "partition"),
        ("account", "account"),
        ("qos", "qos"),
        ("output", "std_out"),
        ("error", "std_err"),
        ("input", "std_in"),
        ("gres", "gres"),
        ("gpus", "gpus"),
        ("gpus_per_node", "gpus_per_node"),
        ("gpus_per_task", "gpus_per_task"),
        ("gpu_bind", "gpu_bind"),
        ("gpus_per_socket", "gpus_per_socket"),
        ("exclude", "exclude"),
        ("constraint", "constraint"),
        ("comment", "comment"),
        ("mail_user", "mail_user"),
        ("licenses", "licenses"),
        ("reservation", "reservation"),
        ("wckey", "wckey"),
    ):
        if opts.has(dest):
            setattr(spec, attr, v(dest) or "")
    if opts.has("qos"):
        spec.qos = spec.qos.lower()

    if opts.has("nodelist"):
        spec.nodelist = read_nodelist(v("nodelist") or "", ctx.cwd)
        if spec.nodelist:
            from shoal.hostlist import expand

            listed = len(set(expand(spec.nodelist)))
            if not opts.has("nodes") and spec.num_tasks > listed:
                # -w names nodes the job must have, not all it may get (Slurm adds nodes for -n)
                spec.max_nodes = spec.num_tasks
            spec.min_nodes = max(spec.min_nodes, listed)
    # --ntasks-per-node with a fixed node count and no --ntasks fixes the task count (as Slurm).
    if (
        spec.ntasks_per_node
        and not spec.num_tasks
        and spec.min_nodes
        and spec.max_nodes in (0, spec.min_nodes)
    ):
        spec.num_tasks = spec.min_nodes * spec.ntasks_per_node

    if opts.has("exclusive"):
        spec.exclusive = (v("exclusive") or "").lower() != "oversubscribe"
    spec.contiguous = opts.has("contiguous")
    spec.overcommit = opts.has("overcommit")
    spec.hold = opts.has("hold")
    spec.wait = opts.has("wait")
    if opts.has("requeue"):
        spec.requeue = 1
    elif opts.has("no_requeue"):
        spec.requeue = 0

    if opts.has("open_mode"):
        mode = (v("open_mode") or "").lower()
        if mode in ("a", "append"):
            spec.open_mode = "append"
        elif mode in ("t", "truncate"):
            spec.open_mode = "truncate"
        else:
            raise SpecError(f"Invalid --open-mode argument: {v('open_mode')}. Ignored")
    if opts.has("signal"):
        spec.signal_num, spec.signal_secs, spec.signal_batch_only = parse_signal(v("signal") or "")
    if opts.has("nice"):
        raw = v("nice")
        if raw is not None and not _SIGNED.fullmatch(raw.strip()):
            raise SpecError(f'Invalid numeric value "{raw}" for --nice.')
        sign = -1 if raw is not None and raw.strip().startswith("-") else 1
        nice = sign * _bounded(raw.strip().lstrip("+-")) if raw is not None else 100
        if abs(nice) > 2147483645:
            raise SpecError("Invalid --nice value, out of range (+/- 2147483645)", exit_code=255)
        spec.nice = nice
    if opts.has("array"):
        spec.array = check_array(v("array") or "")
    if opts.has("dependency"):
        spec.dependency = check_dependency(v("dependency") or "")
    if opts.has("mail_type"):
        spec.mail_type = check_mail_type(v("mail_type") or "")
    if opts.has("kill_on_invalid_dep"):
        answer = (v("kill_on_invalid_dep") or "").lower()
        if answer not in ("yes", "no"):
            raise SpecError("Invalid --kill-on-invalid-dep specification")
        spec.kill_on_invalid_dep = answer

    export = v("export")
    spec.export_spec = export or ""
    spec.environment.update(export_environment(export, ctx.environ))
    spec.environment.update(rlimit_environment(opts, ctx.prog))
    spec.environment.update(step_hint_environment(opts, ctx.prog))
    return spec


_CPU_FREQ_WORDS = {
    w.lower(): w
    for w in ("Low", "Medium", "Highm1", "High", "Conservative", "OnDemand", "Performance", "PowerSave",
              "UserSpace", "SchedUtil")
}  # fmt: skip
_PROFILE_WORDS = ("All", "None", "Energy", "Lustre", "Network", "Task")  # 22.05's order


def cpu_freq_text(value: str, prog: str = "sbatch") -> str:
    """--cpu-freq as 22.05 passes it on (SLURM_CPU_FREQ_REQ): keywords and governors capitalised as it
    spells them (high -> High), kHz figures as given; `min-max:governor` part by part."""
    out = []
    for part in re.split(r"([-:])", value):
        if part in ("-", ":") or part.isdigit():
            out.append(part)
        elif part.lower() in _CPU_FREQ_WORDS:
            out.append(_CPU_FREQ_WORDS[part.lower()])
        else:
            # 22.05 says two lines (the command prints the first's prefix)
            raise SpecError(
                f'unrecognized --cpu-freq argument "{value}"\n{prog}: error: Invalid --cpu-freq argument',
                exit_code=255,
            )
    return "".join(out)


def profile_text(value: str) -> str:
    """--profile as 22.05 passes it on (SLURM_PROFILE): its words capitalised, in its own order."""
    words = {w.strip().lower() for w in value.split(",") if w.strip()}
    known = {w.lower(): w for w in _PROFILE_WORDS}
    if not words or words - known.keys():
        raise SpecError(f"invalid --profile={value} option", exit_code=255)  # 22.05's exit status
    return ",".join(w for w in _PROFILE_WORDS if w.lower() in words)


_DIST_FIRST = ("*", "block", "cyclic", "arbitrary")
_DIST_LOWER = ("*", "block", "cyclic", "fcyclic")
_MEM_BIND_WORDS = frozenset(
    {"q", "quiet", "v", "verbose", "none", "no", "local", "rank", "sort", "nosort", "prefer"}
)


def distribution_text(value: str, nodelist_given: bool, prog: str = "sbatch") -> str:
    """-m/--distribution as 22.05 takes it, {*|block|cyclic|arbitrary|plane=N}[:{*|block|cyclic|fcyclic}
    [:...]][,Pack|NoPack], and passes it on (SLURM_DISTRIBUTION, lower case); its words and exit
    statuses for the rest (measured, scenario 255)."""
    layout, comma, pack = value.lower().partition(",")
    levels = layout.split(":")
    first = levels[0]
    if first == "plane" or (first.startswith("plane=") and not first[6:].isdigit()):
        raise SpecError("Invalid plane size or size not specified", exit_code=255)
    if (
        (first not in _DIST_FIRST and not first.startswith("plane="))
        or len(levels) > 3
        or any(level not in _DIST_LOWER for level in levels[1:])
        or pack not in ("", "pack", "nopack")
    ):
        raise SpecError("Invalid --distribution specification", exit_code=255)
    if first == "arbitrary" and not nodelist_given:  # 22.05 says both lines
        raise SpecError(
            "Invalid --distribution specification\n"
            f"{prog}: error: With Arbitrary distribution you need to specify a nodelist or hostfile with the -w option"
        )
    return layout + comma + pack


def mem_bind_text(value: str) -> str:
    """--mem-bind as 22.05 takes it, [quiet|verbose,]{none|local|rank|sort|nosort|prefer|map_mem:L|
    mask_mem:L}, and passes it on (SLURM_MEM_BIND): lower case, `no` as none, verbose kept and quiet
    dropped (measured, scenario 255)."""
    words: list[str] = []
    verbose = False
    for i, item in enumerate(value.split(",")):
        word = item.lower()
        if word.startswith(("map_mem:", "mask_mem:")) and word.partition(":")[2]:
            words.append(",".join(value.split(",")[i:]).lower())  # its list runs to the end
            break
        if word not in _MEM_BIND_WORDS:
            raise SpecError(f'unrecognized --mem-bind argument "{item}"', exit_code=255)
        if word in ("v", "verbose"):
            verbose = True
        elif word not in ("q", "quiet"):
            words.append("none" if word == "no" else word)
    return ",".join(["verbose"] * verbose + words)


def step_hint_environment(opts: JobOptions, prog: str = "sbatch") -> dict[str, str]:
    """Options a job passes on to its steps in its environment, as 22.05's sbatch does: how srun lays
    tasks out and binds memory, the CPU and GPU frequency and profiling it asks for (steps read them
    as srun's input variables; shoal's nodes set no frequency and gather no profile)."""
    env: dict[str, str] = {}
    if opts.has("distribution"):
        env["SLURM_DISTRIBUTION"] = distribution_text(
            opts.get("distribution") or "", opts.has("nodelist"), prog
        )
    if opts.has("mem_bind"):
        env["SLURM_MEM_BIND"] = mem_bind_text(opts.get("mem_bind") or "")
        env["SLURM_MEM_BIND_VERBOSE"] = "verbose" if env["SLURM_MEM_BIND"].startswith("verbose") else "quiet"
    if opts.has("cpu_freq"):
        env["SLURM_CPU_FREQ_REQ"] = cpu_freq_text(opts.get("cpu_freq") or "", prog)
    if opts.has("gpu_freq"):
        env["SLURM_GPU_FREQ"] = opts.get("gpu_freq") or ""
    if opts.has("profile"):
        env["SLURM_PROFILE"] = profile_text(opts.get("profile") or "")
    if opts.has("acctg_freq"):
        env["SLURM_ACCTG_FREQ"] = opts.get("acctg_freq") or ""
    return env
